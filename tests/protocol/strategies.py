"""Hypothesis strategies generated from the schema table.

``message_values(struct, version, flexible)`` walks the ``S``/``F`` declaration
of one message for one version and draws a value the codec must accept:
fields the version lacks (and tagged fields of a non-flexible version) hold
their defaults, since that is what decoding gives back; nullable fields are
null only in the versions where they are nullable.
"""

from __future__ import annotations

import os

import uuid
from collections.abc import Mapping

from hypothesis import strategies as st

from kcoord.protocol.schema import S

INT_RANGES = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "uint16": (0, (1 << 16) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "uint32": (0, (1 << 32) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
}

ZERO_UUID = uuid.UUID(int=0)

# Small sizes keep nested messages (Fetch responses are four arrays deep) fast.
MAX_ITEMS = 3
MAX_TEXT = 8
MAX_BYTES = 24

uuids = st.one_of(st.just(ZERO_UUID), st.uuids(allow_nil=True))
texts = st.text(max_size=MAX_TEXT)
binaries = st.binary(max_size=MAX_BYTES)


def _int_strategy(lo: int, hi: int):
    # Mix the edges and small values in: they are where codecs break.
    edges = st.sampled_from(sorted({lo, hi, 0, -1 if lo < 0 else 1, lo + 1, hi - 1}))
    return st.one_of(edges, st.integers(lo, hi))


def type_values(typ, version: int, flexible: bool, nullable: bool = False):
    """A strategy for one value of schema type ``typ`` at ``version``."""
    if isinstance(typ, list):
        (element,) = typ
        base = st.lists(type_values(element, version, flexible), max_size=MAX_ITEMS)
    elif isinstance(typ, S):
        base = message_values(typ, version, flexible)
    elif typ in INT_RANGES:
        base = _int_strategy(*INT_RANGES[typ])
    elif typ == "float64":
        base = st.floats(allow_nan=False)
    elif typ == "bool":
        base = st.booleans()
    elif typ == "string":
        base = texts
    elif typ == "bytes":
        base = binaries
    elif typ == "records":
        base = binaries
        nullable = True
    elif typ == "uuid":
        base = uuids
    else:
        raise ValueError(f"unknown type {typ!r}")
    return st.one_of(st.none(), base) if nullable else base


def message_values(struct: S, version: int, flexible: bool):
    """A strategy for a whole struct at ``version`` (a plain dict)."""
    parts = {}
    for f in struct.fields:
        present = version in f.versions and (f.tag is None or flexible)
        if present:
            parts[f.name] = type_values(
                f.type, version, flexible, nullable=version in f.nullable_versions
            )
        else:
            parts[f.name] = st.just(f.default_value())
    return st.fixed_dictionaries(parts)


def plain(value):
    """Decoded messages and lists as plain dicts and lists, for comparisons and messages."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


FULL_MATRIX = os.environ.get("KCOORD_CODEC_MATRIX") == "full"


def codec_versions(api, full: bool | None = None) -> list[int]:
    """The versions of ``api`` the codec-against-itself tests check: all of them
    in the full matrix (``make test-codecs``, which CI runs too), otherwise the
    oldest, the first flexible one and the newest (``make test``)."""
    versions = list(range(api.min_version, api.max_version + 1))
    if FULL_MATRIX if full is None else full:
        return versions
    flexible = [v for v in versions if api.is_flexible(v)]
    return sorted({versions[0], versions[-1], *flexible[:1]})


def all_codec_cases(full: bool | None = None):
    """(api, version, direction) for every API the schema table declares, at the
    versions ``codec_versions`` picks."""
    from kcoord.protocol.messages import ALL_APIS

    cases = []
    for key in sorted(ALL_APIS):
        api = ALL_APIS[key]
        for version in codec_versions(api, full):
            for direction in ("request", "response"):
                cases.append((api, version, direction))
    return cases


def case_id(case) -> str:
    api, version, direction = case
    return f"{api.name}-v{version}-{direction}"
