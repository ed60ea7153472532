"""Cross-check against kafka-python's own protocol classes (``kafka.protocol``).

kafka-python 3 builds its message classes from Apache Kafka's JSON schemas with
a code generator of its own, so it is an implementation independent of ours.
For every (api, version) both define:

- a request kafka-python encodes decodes in our codec to the same values, and
  our codec re-encodes it to the same bytes;
- a response we encode decodes with kafka-python to the same values, and
  kafka-python re-encodes it to our bytes.

Values are drawn from our schema table; kafka-python's representation differs
in three places, mapped here: a zero UUID is ``None`` there, the
authorized-operations bitfields are sets of bit numbers (``None`` for
INT32_MIN), two of those fields are renamed ``authorized_operations``, and an
absent tagged struct is ``None`` rather than the struct at its defaults.
"""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafka.protocol.api_message as kafka_protocol

import kafka.protocol.admin  # noqa: E402,F401  (registers the message classes)
import kafka.protocol.consumer  # noqa: E402,F401
import kafka.protocol.metadata  # noqa: E402,F401
import kafka.protocol.producer  # noqa: E402,F401
import kafka.protocol.sasl  # noqa: E402,F401

from kcoord.protocol.messages import ALL_APIS  # noqa: E402
from kcoord.protocol.schema import S  # noqa: E402
from tests.protocol.strategies import ZERO_UUID, message_values, plain  # noqa: E402

ApiMessage = kafka_protocol.ApiMessage


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _primary_classes():
    requests, responses = {}, {}
    for cls in _subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or getattr(cls, "_json", None) is None:
            continue
        (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    return requests, responses


KP_REQUESTS, KP_RESPONSES = _primary_classes()

# Our snake_case of Kafka's name -> kafka-python's name, where they differ.
RENAMES = {
    (3, "response"): {
        "cluster_authorized_operations": "authorized_operations",
        "topic_authorized_operations": "authorized_operations",
    },
    (60, "response"): {"cluster_authorized_operations": "authorized_operations"},
    # kafka-python's TxnOffsetCommit schema predates KIP-848's rename of GenerationId.
    (28, "request"): {"generation_id_or_member_epoch": "generation_id"},
    # Kafka's "Values" ("values" is a method of our messages)
    (48, "response"): {"quota_values": "values"},
}

# Versions kafka-python can encode but describes with a newer schema that
# dropped them (its JSON files are Kafka 4.x's): fields that only those old
# versions carried are missing there, so they cannot be cross-checked.
KP_STALE = {}


def _cases():
    cases = []
    for key in sorted(ALL_APIS):
        api = ALL_APIS[key]
        if key not in KP_REQUESTS or key not in KP_RESPONSES:
            continue
        top = min(api.max_version, KP_REQUESTS[key].max_version, KP_RESPONSES[key].max_version)
        for version in range(api.min_version, top + 1):
            if version in KP_STALE.get(key, ()):
                continue
            for direction in ("request", "response"):
                cases.append((api, version, direction))
    return cases


CASES = _cases()


def _case_id(case):
    api, version, direction = case
    return f"{api.name}-v{version}-{direction}"


def _present(f, version, flexible):
    return version in f.versions and (f.tag is None or flexible)


def _bits_from_int(value):
    if value == -(1 << 31):
        return None
    value &= 0xFFFFFFFF
    return {bit for bit in range(32) if value >> bit & 1}


def _int_from_bits(bits):
    if bits is None:
        return -(1 << 31)
    value = sum(1 << bit for bit in bits)
    return value - (1 << 32) if value >= 1 << 31 else value


def _to_kp(kp_struct, schema: S, value, version, flexible, renames):
    """Our value -> kwargs for kafka-python's class of ``kp_struct``."""
    kp_fields = kp_struct.fields
    kwargs = {}
    for f in schema.fields:
        if not _present(f, version, flexible):
            continue
        if f.tag is not None and plain(value[f.name]) == plain(f.default_value()):
            continue  # kafka-python writes only the tagged fields it is given
        name = renames.get(f.name, f.name)
        kwargs[name] = _value_to_kp(kp_fields[name], f.type, value[f.name], version, flexible, renames)
    return kwargs


def _value_to_kp(kp_field, typ, value, version, flexible, renames):
    if value is None:
        return None
    if isinstance(typ, list):
        return [_value_to_kp(kp_field, typ[0], v, version, flexible, renames) for v in value]
    if isinstance(typ, S):
        return kp_field.data_class(**_to_kp(kp_field, typ, value, version, flexible, renames))
    if kp_field.type_str == "bitfield":
        return _bits_from_int(value)
    if typ == "uuid" and value == ZERO_UUID:
        return None
    return value


def _from_kp(kp_obj, schema: S, version, flexible, renames):
    """kafka-python's decoded object -> our representation, version fields only."""
    out = {}
    for f in schema.fields:
        if not _present(f, version, flexible):
            continue
        name = renames.get(f.name, f.name)
        kp_field = kp_obj.fields[name]
        kp_value = getattr(kp_obj, name)
        if kp_value is None and f.tag is not None and isinstance(f.type, S):
            # kafka-python leaves an absent tagged struct None; Kafka's (and
            # our) default is the struct with its fields at their defaults.
            out[f.name] = f.default_value()
            continue
        out[f.name] = _value_from_kp(kp_field, f.type, kp_value, version, flexible, renames)
    return out


def _value_from_kp(kp_field, typ, value, version, flexible, renames):
    if isinstance(typ, list):
        if value is None:
            return None
        return [_value_from_kp(kp_field, typ[0], v, version, flexible, renames) for v in value]
    if isinstance(typ, S):
        return None if value is None else _from_kp(value, typ, version, flexible, renames)
    if kp_field.type_str == "bitfield":
        return _int_from_bits(value)
    if typ == "uuid":
        return ZERO_UUID if value is None else uuid.UUID(str(value))
    if typ in ("bytes", "records") and value is not None:
        return bytes(value)
    return value


def _only_version_fields(schema: S, value, version, flexible):
    out = {}
    for f in schema.fields:
        if not _present(f, version, flexible):
            continue
        v = value[f.name]
        if isinstance(f.type, S) and v is not None:
            v = _only_version_fields(f.type, v, version, flexible)
        elif isinstance(f.type, list) and isinstance(f.type[0], S) and v is not None:
            v = [_only_version_fields(f.type[0], item, version, flexible) for item in v]
        out[f.name] = v
    return out


def _values(api, version, direction):
    schema = api.request if direction == "request" else api.response
    values = message_values(schema, version, api.is_flexible(version))
    if api.key == 18 and direction == "response":
        # kafka-python re-reads any errored ApiVersions answer as v0 (the
        # UNSUPPORTED_VERSION fallback), so only error 0 keeps its version.
        values = values.map(lambda v: {**v, "error_code": 0})
    return values


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_kafka_python_agrees(case, data):
    api, version, direction = case
    flexible = api.is_flexible(version)
    schema = api.request if direction == "request" else api.response
    kp_cls = (KP_REQUESTS if direction == "request" else KP_RESPONSES)[api.key]
    renames = RENAMES.get((api.key, direction), {})
    codec = api.codec(version, direction)
    value = data.draw(_values(api, version, direction))
    expected = plain(_only_version_fields(schema, value, version, flexible))

    kp_obj = kp_cls[version](**_to_kp(kp_cls._struct, schema, value, version, flexible, renames))
    if direction == "request":
        theirs = bytes(kp_obj.encode())
        ours = codec.decode(theirs)
        assert plain(_only_version_fields(schema, ours, version, flexible)) == expected
        assert codec.encode(ours) == theirs
    else:
        ours = codec.encode(value)
        decoded = kp_cls.decode(ours, version=version)
        assert plain(_from_kp(decoded, schema, version, flexible, renames)) == expected
        assert bytes(kp_obj.encode()) == ours
