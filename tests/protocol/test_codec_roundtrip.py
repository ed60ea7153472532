"""Every declared (api, version, direction): compiled without interpreter
fallbacks, and a property round trip through the compiled codec that also
checks the interpreted construct gives the same bytes and values."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kcoord.protocol.messages import ALL_APIS
from tests.protocol.strategies import all_codec_cases, case_id, message_values, plain

CASES = all_codec_cases()

SETTINGS = settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _schema(api, direction):
    return api.request if direction == "request" else api.response


def test_every_api_is_registered_once():
    assert {18, 3, 19, 20, 32, 60} <= set(ALL_APIS)
    for key, api in ALL_APIS.items():
        assert api.key == key
        assert api.min_version <= api.max_version


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_compiled_source_has_no_interpreter_fallback(case):
    api, version, direction = case
    source = api.codec(version, direction).compiled.source
    assert "linkedparsers[" not in source
    assert "linkedbuilders[" not in source


@pytest.mark.parametrize("case", CASES, ids=case_id)
@SETTINGS
@given(data=st.data())
def test_round_trip(case, data):
    api, version, direction = case
    codec = api.codec(version, direction)
    value = data.draw(message_values(_schema(api, direction), version, api.is_flexible(version)))

    raw = codec.encode(value)
    decoded = codec.decode(raw)
    assert plain(decoded) == plain(value)
    assert codec.encode(decoded) == raw

    # The interpreted construct is the reference for the compiled one.
    assert codec.struct.build(value) == raw
    assert plain(codec.struct.parse(raw)) == plain(decoded)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_defaults_round_trip(case):
    """An empty value encodes with every field at its default and decodes back."""
    api, version, direction = case
    codec = api.codec(version, direction)
    raw = codec.encode({})
    decoded = codec.decode(raw)
    assert codec.encode(decoded) == raw
    assert codec.struct.build({}) == raw
    for f in _schema(api, direction).fields:
        assert plain(decoded[f.name]) == plain(f.default_value()), f.name


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_truncated_input_is_a_decode_error(case):
    from kcoord.protocol.wire import DecodeError

    api, version, direction = case
    codec = api.codec(version, direction)
    raw = codec.encode({})
    for cut in range(len(raw)):
        with pytest.raises(DecodeError):
            codec.decode(raw[:cut])


def test_is_flexible_follows_the_declared_range():
    from kcoord.protocol import group_records, headers

    apis = list(ALL_APIS.values()) + [headers.REQUEST_HEADER, headers.RESPONSE_HEADER,
                                      group_records.OFFSET_COMMIT_VALUE,
                                      group_records.GROUP_METADATA_VALUE]
    for api in apis:
        for version in [*range(-2, 40), 1023, 1024, 1025, 32767, 40000]:
            assert api.is_flexible(version) == (version in api.flexible), (api, version)
