"""The declarative schema mechanism every message uses.

An API is declared once, for all its versions, in the shape of Kafka's JSON
message definitions::

    Api(key=3, name="Metadata", versions="0-12", flexible="9+",
        request=S(
            F("topics", [S(F("topic_id", "uuid", v="10+"),
                           F("name", "string", nullable="10+"))], nullable="1+"),
            F("allow_auto_topic_creation", "bool", v="4+", default=True),
        ),
        response=S(...))

Field types are the primitive names (``int8`` ... ``float64``, ``bool``,
``string``, ``bytes``, ``uuid``, ``records``), ``S(...)`` for a nested struct,
and a one-element list for an array (``["int32"]``, ``[S(...)]``).

For each (api, version, request|response) the table is turned into a
``KStruct`` holding exactly the fields of that version, compiled with
construct's ``compile()`` on first use and cached.  Decoding fills the fields
the version lacks with their defaults, so handlers read every field at every
version; encoding ignores fields the version lacks and takes defaults for
fields not given.
"""

from __future__ import annotations

import io as _io
import struct as _struct
from dataclasses import dataclass, field as _dc_field
from typing import Any

from construct import Float64b, Int8sb, Int16sb, Int16ub, Int32sb, Int32ub, Int64sb

from kcoord.protocol import types as T
from kcoord.protocol.generated import GeneratedCodec
from kcoord.protocol.wire import ZERO_UUID, DecodeError


class VersionRange:
    """A Kafka version spec: ``"3+"``, ``"0-4"``, ``"5"`` or ``"none"``."""

    __slots__ = ("low", "high")

    def __init__(self, spec: str | None):
        spec = (spec or "none").strip()
        if spec == "none":
            self.low, self.high = 1, 0
        elif spec.endswith("+"):
            self.low, self.high = int(spec[:-1]), 1 << 15
        elif "-" in spec:
            low, high = spec.split("-")
            self.low, self.high = int(low), int(high)
        else:
            self.low = self.high = int(spec)

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def __repr__(self) -> str:
        return f"VersionRange({self.low}-{self.high})"


_NO_DEFAULT = object()


@dataclass
class F:
    """One field: name, type, the versions it exists in, nullability, tag, default."""

    name: str
    type: Any
    v: str = "0+"
    nullable: str | None = None
    tag: int | None = None
    default: Any = _NO_DEFAULT
    classic: bool = False  # stays a classic string even in flexible versions (headers)
    versions: VersionRange = _dc_field(init=False)
    nullable_versions: VersionRange = _dc_field(init=False)

    def __post_init__(self):
        self.versions = VersionRange(self.v)
        self.nullable_versions = VersionRange(self.nullable)

    def default_value(self):
        if self.default is not _NO_DEFAULT:
            return self.default
        return type_default(self.type)


class S:
    """A struct: an ordered list of fields."""

    def __init__(self, *fields: F):
        self.fields = list(fields)
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate field names in {names}")


_FIXED = {
    "int8": (Int8sb, 0),
    "int16": (Int16sb, 0),
    "uint16": (Int16ub, 0),
    "int32": (Int32sb, 0),
    "uint32": (Int32ub, 0),
    "int64": (Int64sb, 0),
    "float64": (Float64b, 0.0),
    "bool": (T.Bool, False),
    "uuid": (T.Uuid, ZERO_UUID),
}


def type_default(typ):
    if isinstance(typ, list):
        return []
    if isinstance(typ, S):
        # A struct-valued field defaults to the struct with every field at its
        # default, as Kafka's generated classes do; a tagged struct equal to
        # that is not written.
        return {f.name: f.default_value() for f in typ.fields}
    if typ in _FIXED:
        return _FIXED[typ][1]
    if typ == "string":
        return ""
    if typ == "bytes":
        return b""
    if typ == "records":
        # An empty record set, not null: clients read a Fetch answer's records
        # without a null check.
        return b""
    raise ValueError(f"unknown type {typ!r}")


def _field_construct(f: F, version: int, flexible: bool):
    nullable = version in f.nullable_versions
    return _type_construct(f.type, version, flexible and not f.classic, nullable)


def _type_construct(typ, version: int, flexible: bool, nullable: bool):
    if isinstance(typ, list):
        (element,) = typ
        return T.KArray(
            _type_construct(element, version, flexible, False),
            compact=flexible,
            nullable=nullable,
        )
    if isinstance(typ, S):
        return struct_for_version(typ, version, flexible, nullable=nullable)
    if typ in _FIXED:
        return _FIXED[typ][0]
    if typ == "string":
        return T.KString(compact=flexible, nullable=nullable)
    if typ == "bytes":
        return T.KBytes(compact=flexible, nullable=nullable)
    if typ == "records":
        return T.KRecords(compact=flexible)
    raise ValueError(f"unknown type {typ!r}")


def struct_for_version(s: S, version: int, flexible: bool, nullable: bool = False) -> T.KStruct:
    fields, absent, tagged = [], [], []
    for f in s.fields:
        default = f.default_value()
        if version not in f.versions or (f.tag is not None and not flexible):
            absent.append((f.name, default))
        elif f.tag is not None:
            tagged.append((f.tag, f.name, _field_construct(f, version, flexible), default))
        else:
            fields.append((f.name, _field_construct(f, version, flexible), default))
    return T.KStruct(fields, absent=absent, tagged=tagged, flexible=flexible, nullable=nullable)


class Codec:
    """The compiled codec of one (api, version, direction)."""

    __slots__ = ("struct", "compiled", "_parse", "_build")

    generated = False

    def __init__(self, struct: T.KStruct):
        self.struct = struct
        self.compiled = struct.compile()
        self._parse = self.compiled.parsefunc
        self._build = self.compiled.buildfunc

    def read(self, stream):
        """Decode one message from a stream positioned at its first byte."""
        try:
            return self._parse(stream, None)
        except _struct.error as exc:
            # construct's compiled fixed-size ints unpack whatever was read:
            # a short read surfaces as struct.error.
            raise DecodeError(f"truncated message: {exc}") from None
        except OverflowError as exc:
            # A damaged length too large for a read (past what a C size holds).
            raise DecodeError(f"invalid length: {exc}") from None

    def decode_at(self, data, pos: int):
        """Decode one message starting at ``pos`` of ``data``: (value, end position)."""
        stream = _io.BytesIO(data)
        stream.seek(pos)
        value = self.read(stream)
        return value, stream.tell()

    def decode(self, data: bytes):
        """Decode a whole buffer; trailing bytes are an error."""
        stream = _io.BytesIO(data)
        value = self.read(stream)
        if stream.tell() != len(data):
            raise DecodeError(f"{len(data) - stream.tell()} trailing bytes")
        return value

    def write(self, stream, value) -> None:
        self._build(value, stream, None)

    def encode(self, value) -> bytes:
        stream = _io.BytesIO()
        self._build(value, stream, None)
        return stream.getvalue()


_CACHED_VERSIONS = 1 << 10


class Api:
    """One Kafka API (or a standalone message such as a header or a record value)."""

    def __init__(
        self,
        *,
        key: int,
        name: str,
        versions: str,
        flexible: str | None,
        request: S,
        response: S,
        generated: bool = False,
    ):
        self.key = key
        self.name = name
        self.valid = VersionRange(versions)
        self.flexible = VersionRange(flexible)
        # Asked for every request and response: a set lookup, not a range test.
        self._flexible_versions = frozenset(range(
            self.flexible.low, min(self.flexible.high, _CACHED_VERSIONS - 1) + 1))
        self.request = request
        self.response = response
        # A hot API is served by the codec generated from this same table
        # (``protocol.generated``), byte-identical to construct's and faster.
        self.generated = generated
        self._codecs: dict[tuple[int, str], Codec] = {}
        self._construct_codecs: dict[tuple[int, str], Codec] = {}

    @property
    def min_version(self) -> int:
        return self.valid.low

    @property
    def max_version(self) -> int:
        return self.valid.high

    def is_flexible(self, version: int) -> bool:
        if version in self._flexible_versions:
            return True
        if 0 <= version < _CACHED_VERSIONS:
            return False
        return version in self.flexible

    def codec(self, version: int, direction: str) -> Codec:
        """The codec for ``direction`` ("request" or "response"): the generated one
        for an API declared ``generated``, else the compiled construct codec."""
        key = (version, direction)
        codec = self._codecs.get(key)
        if codec is None:
            if not self.generated:
                codec = self.construct_codec(version, direction)
            else:
                # a request's records are read as a view of the frame, a
                # response's (a Fetch answer, read by a client) as bytes
                codec = GeneratedCodec(self._struct(version, direction),
                                       views=direction == "request")
            self._codecs[key] = codec
        return codec

    def compiled(self, version: int, direction: str) -> bool:
        """Whether ``codec(version, direction)`` is compiled already."""
        return (version, direction) in self._codecs

    def construct_codec(self, version: int, direction: str) -> Codec:
        """The compiled construct codec, whatever ``generated`` says."""
        key = (version, direction)
        codec = self._construct_codecs.get(key)
        if codec is None:
            codec = Codec(self._struct(version, direction))
            self._construct_codecs[key] = codec
        return codec

    def _struct(self, version: int, direction: str) -> T.KStruct:
        if version not in self.valid:
            raise ValueError(f"{self.name} has no version {version}")
        struct = self.request if direction == "request" else self.response
        return struct_for_version(struct, version, self.is_flexible(version))

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, {self.valid.low}-{self.valid.high})"
