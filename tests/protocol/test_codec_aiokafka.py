"""Cross-check against aiokafka's hand-written protocol structs (``aiokafka.protocol``).

aiokafka declares one ``Struct`` per (api, version) with its own field names,
so the comparison is positional: the fields our schema carries at a version,
in wire order, against aiokafka's schema of that version (an array of
one-field structs, such as Metadata's topic names, is an array of bare values
there). Only the non-flexible versions aiokafka defines are covered (it has
no flexible class for any API we declare).
"""

from __future__ import annotations

import importlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiokafka.protocol.api import RequestStruct, Response  # noqa: E402
from aiokafka.protocol.types import Array, Schema  # noqa: E402

from kcoord.protocol.messages import ALL_APIS  # noqa: E402
from kcoord.protocol.schema import S  # noqa: E402
from tests.protocol.strategies import message_values  # noqa: E402

for _module in ("admin", "commit", "coordination", "fetch", "group", "metadata", "offset",
                "produce", "transaction"):
    importlib.import_module(f"aiokafka.protocol.{_module}")


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _by_version(base):
    found = {}
    for cls in _subclasses(base):
        key, version = getattr(cls, "API_KEY", None), getattr(cls, "API_VERSION", None)
        if not isinstance(key, int) or not isinstance(version, int):
            continue
        if getattr(cls, "FLEXIBLE_VERSION", False):
            continue
        # aiokafka labels ListGroupsRequest_v2 as version 1: trust the class
        # whose name carries the version it declares.
        if (key, version) in found and not cls.__name__.endswith(f"_v{version}"):
            continue
        found[(key, version)] = cls
    return found


AK_REQUESTS = _by_version(RequestStruct)
AK_RESPONSES = _by_version(Response)


# aiokafka's ListOffsets v4 and v5 requests declare current_leader_epoch as
# int64 where Kafka's schema (and kafka-python) say int32; aiokafka itself
# never sends them (its request builder stops at v3).
AK_WRONG = {(2, 4, "request"), (2, 5, "request")}


def _cases():
    cases = []
    for (key, version) in sorted(AK_REQUESTS):
        api = ALL_APIS.get(key)
        if api is None or version not in api.valid or api.is_flexible(version):
            continue
        if (key, version) not in AK_RESPONSES:
            continue
        for direction in ("request", "response"):
            if (key, version, direction) not in AK_WRONG:
                cases.append((api, version, direction))
    return cases


CASES = _cases()


def _case_id(case):
    api, version, direction = case
    return f"{api.name}-v{version}-{direction}"


def _positional(schema: S, value, version):
    """Our value as aiokafka's nested tuples: the version's fields in order."""
    out = []
    for f in schema.fields:
        if version not in f.versions or f.tag is not None:
            continue
        out.append(_positional_value(f.type, value[f.name], version))
    return tuple(out)


def _positional_value(typ, value, version):
    if value is None:
        return None
    if isinstance(typ, list):
        return [_positional_value(typ[0], v, version) for v in value]
    if isinstance(typ, S):
        return _positional(typ, value, version)
    return value


def _fit(ak_type, value):
    """Our positional value shaped like aiokafka's schema.

    aiokafka writes an array of one-field structs (Metadata's topic names) as
    an array of that field's values: the same bytes, a flatter value.
    """
    if value is None:
        return None
    if isinstance(ak_type, Schema):
        if len(ak_type.fields) < len(value):
            value = _regroup(ak_type, value)
        assert len(ak_type.fields) == len(value), (ak_type.names, value)
        return tuple(_fit(t, v) for t, v in zip(ak_type.fields, value))
    if isinstance(value, tuple) and len(value) == 1:
        return _fit(ak_type, value[0])
    if isinstance(ak_type, Array):
        return [_fit(ak_type.array_of, v) for v in value]
    return value


def _regroup(ak_type: Schema, value: tuple) -> tuple:
    """aiokafka groups some consecutive fields into a struct of their own (a
    CreatePartitions topic is ``(topic, (count, assignment))``): the same bytes,
    our flat fields taken in that grouping."""
    out, values = [], list(value)
    for i, t in enumerate(ak_type.fields):
        left = len(ak_type.fields) - i - 1
        if isinstance(t, Schema) and len(values) - left > 1:
            out.append(tuple(values[:len(t.fields)]))
            values = values[len(t.fields):]
        else:
            out.append(values.pop(0))
    return tuple(out)


def _normalise(value):
    """aiokafka's decoded values (tuples, lists, Struct) as lists for comparison."""
    if hasattr(value, "SCHEMA"):
        value = [value.get_item(name) for name in value.SCHEMA.names]
    if isinstance(value, (list, tuple)):
        return [_normalise(v) for v in value]
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    return value


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_aiokafka_agrees(case, data):
    api, version, direction = case
    schema = api.request if direction == "request" else api.response
    ak_cls = (AK_REQUESTS if direction == "request" else AK_RESPONSES)[(api.key, version)]
    codec = api.codec(version, direction)
    value = data.draw(message_values(schema, version, False))
    expected = _fit(ak_cls.SCHEMA, _positional(schema, value, version))

    theirs = bytes(ak_cls(*expected).encode())
    ours = codec.encode(value)
    assert theirs == ours
    assert _normalise(ak_cls.decode(ours)) == _normalise(expected)
    decoded = _fit(ak_cls.SCHEMA, _positional(schema, codec.decode(theirs), version))
    assert _normalise(decoded) == _normalise(expected)
