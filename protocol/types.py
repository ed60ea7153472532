"""Kafka's wire types as construct classes that compile to native code.

construct's stock ``VarInt``, ``PascalString``, ``Prefixed`` and adapters make
``compile()`` fall back to the interpreter, and stock ``PrefixedArray`` turns a
null array into ``[]`` once compiled.  Each class here therefore implements both
the interpreted path (``_parse``/``_build``) and an emitter
(``_emitparse``/``_emitbuild``) that calls the same functions of
``protocol.wire``; a compiled schema contains no interpreter fallback (a test
checks the generated source).

``KStruct`` is the struct of a Kafka message for one version: its fields in
order, the fields the version does not carry (filled with their defaults on
decode, ignored on encode), and, in flexible versions, the tagged-field section.
A missing field on encode takes the schema default, as Kafka's generated message
classes do; a key that is no field of the message at any version raises
``UnknownFieldError``.
"""

from __future__ import annotations

import io as _io
import uuid as _uuid

from construct import Construct, SizeofError

from kcoord.protocol import wire
from kcoord.protocol.values import message_class
from kcoord.protocol.wire import UnknownFieldError

_HELPERS = (
    "from kcoord.protocol.wire import *\nfrom kcoord.protocol.values import message_class\n"
    "from io import BytesIO\n"
)


def _prelude(code) -> None:
    code.append(_HELPERS)


def default_literal(value) -> str:
    """Python source for a schema default (a fresh object at every use)."""
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return repr(value)
    if isinstance(value, _uuid.UUID):
        return "ZERO_UUID" if value.int == 0 else f"__import__('uuid').UUID({str(value)!r})"
    if isinstance(value, list) and not value:
        return "[]"
    if isinstance(value, dict):
        items = ", ".join(f"{k!r}: {default_literal(v)}" for k, v in value.items())
        return "{" + items + "}"
    raise TypeError(f"unsupported default {value!r}")


def fresh_default(value):
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {k: fresh_default(v) for k, v in value.items()}
    return value


class _Primitive(Construct):
    """A primitive whose parse and build are single calls into ``protocol.wire``."""

    reader: str
    writer: str

    def _parse(self, stream, context, path):
        return getattr(wire, self.reader)(stream)

    def _build(self, obj, stream, context, path):
        getattr(wire, self.writer)(stream, obj)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("variable size")

    def _emitparse(self, code):
        _prelude(code)
        return f"{self.reader}(io)"

    def _emitbuild(self, code):
        _prelude(code)
        return f"({self.writer}(io, obj), obj)[1]"


def _primitive(name: str, reader: str, writer: str) -> _Primitive:
    cls = type(name, (_Primitive,), {"reader": reader, "writer": writer})
    return cls()


UVarInt = _primitive("UVarInt", "read_uvarint", "write_uvarint")
VarInt = _primitive("VarInt", "read_varint", "write_varint")
VarLong = _primitive("VarLong", "read_varlong", "write_varlong")
Uuid = _primitive("Uuid", "read_uuid", "write_uuid")
Bool = _primitive("Bool", "read_bool", "write_bool")
# Inside record batches: zig-zag varint lengths.
VarBytes = _primitive("VarBytes", "read_varint_bytes", "write_varint_bytes")
VarString = _primitive("VarString", "read_varint_string", "write_varint_string")


def KString(*, compact: bool, nullable: bool) -> _Primitive:
    kind = ("compact_" if compact else "") + ("nullable_" if nullable else "") + "string"
    return _STRINGS[kind]


def KBytes(*, compact: bool, nullable: bool) -> _Primitive:
    kind = ("compact_" if compact else "") + ("nullable_" if nullable else "") + "bytes"
    return _STRINGS[kind]


_STRINGS = {
    kind: _primitive(
        "".join(p.capitalize() for p in kind.split("_")), f"read_{kind}", f"write_{kind}"
    )
    for kind in (
        "string",
        "nullable_string",
        "compact_string",
        "compact_nullable_string",
        "bytes",
        "nullable_bytes",
        "compact_bytes",
        "compact_nullable_bytes",
    )
}


def KRecords(*, compact: bool) -> _Primitive:
    """A ``records`` field: nullable bytes on the wire, read by construct as
    ``bytes``; the generated codec reads a request's as a ``memoryview`` of the
    frame (``protocol.generated``), so that a megabyte of records is not copied."""
    return _RECORDS[compact]


_RECORDS = {
    compact: type("CompactRecords" if compact else "Records", (_Primitive,),
                  {"reader": _STRINGS[kind].reader, "writer": _STRINGS[kind].writer,
                   "records": True})()
    for compact, kind in ((False, "nullable_bytes"), (True, "compact_nullable_bytes"))
}


class KArray(Construct):
    """Kafka array: int32 count (classic) or uvarint count+1 (compact), -1/0 is null;
    or, inside records (``varint``), a zig-zag varint count that is never null."""

    _COUNTS = {"classic": "array_count", "compact": "compact_array_count",
               "varint": "varint_array_count"}

    def __init__(self, element: Construct, *, compact: bool = False, nullable: bool = False,
                 varint: bool = False):
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        kind = "varint" if varint else "compact" if compact else "classic"
        self._reader = f"read_{self._COUNTS[kind]}"
        self._writer = f"write_{self._COUNTS[kind]}"

    def _read_count(self, stream) -> int:
        return getattr(wire, self._reader)(stream)

    def _parse(self, stream, context, path):
        n = self._read_count(stream)
        if n < 0:
            if not self.nullable:
                raise wire.DecodeError("null value in a non-nullable array")
            return None
        return [self.element._parsereport(stream, context, path) for _ in range(n)]

    def _build(self, obj, stream, context, path):
        if obj is None and not self.nullable:
            raise ValueError("null value for a non-nullable array")
        getattr(wire, self._writer)(stream, obj)
        if obj is not None:
            for item in obj:
                self.element._build(item, stream, context, path)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("variable size")

    def _emitparse(self, code):
        _prelude(code)
        fname = f"parse_karray_{code.allocateId()}"
        counter = self._reader
        null = "return None" if self.nullable else (
            "raise DecodeError('null value in a non-nullable array')"
        )
        element = self.element._compileparse(code)
        code.append(
            f"""
            def {fname}(io, this):
                n = {counter}(io)
                if n < 0:
                    {null}
                return [{element} for _ in range(n)]
            """
        )
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _prelude(code)
        fname = f"build_karray_{code.allocateId()}"
        counter = self._writer
        element = self.element._compilebuild(code)
        null_check = "" if self.nullable else (
            "if obj is None: raise ValueError('null value for a non-nullable array')"
        )
        code.append(
            f"""
            def {fname}(obj, io, this):
                {null_check or 'pass'}
                {counter}(io, obj)
                if obj is not None:
                    for obj in obj:
                        {element}
            """
        )
        return f"({fname}(obj, io, this), obj)[1]"


class KStruct(Construct):
    """The fields of one message (or nested struct) at one version.

    ``fields``: ``[(name, construct, default)]`` in wire order.
    ``absent``: ``[(name, default)]`` for fields this version does not carry.
    ``tagged``: ``[(tag, name, construct, default)]`` (flexible versions only).
    ``flexible``: whether a tagged-field section ends the struct.
    ``nullable``: a nullable struct (int8 -1 for null, 1 then the fields).
    """

    def __init__(self, fields, *, absent=(), tagged=(), flexible=False, nullable=False):
        super().__init__()
        self.fields = list(fields)
        self.absent = list(absent)
        self.tagged = sorted(tagged, key=lambda t: t[0])
        self.flexible = flexible
        self.nullable = nullable
        if self.tagged and not flexible:
            raise ValueError("tagged fields need a flexible version")
        # Every field name of the message at any version: building from a dict
        # with any other key is a bug (a misspelled field would go out as its
        # default without a word), so it raises.
        self.known = frozenset([f[0] for f in self.fields] + [a[0] for a in self.absent]
                               + [t[1] for t in self.tagged])
        # What a decoded value is: one slot per field, in wire order.
        self.message_class = message_class(
            [f[0] for f in self.fields] + [a[0] for a in self.absent]
            + [t[1] for t in self.tagged]
        )

    def check_known(self, obj) -> None:
        if not obj.keys() <= self.known:
            unknown = sorted(set(obj.keys()) - self.known)
            raise UnknownFieldError(f"unknown field(s) {unknown}; known: {sorted(self.known)}")

    # -- interpreted ---------------------------------------------------------

    def _parse(self, stream, context, path):
        if self.nullable:
            marker = wire.read_exact(stream, 1)[0]
            if marker == 0xFF:
                return None
        result = self.message_class()
        for name, sub, _default in self.fields:
            result[name] = sub._parsereport(stream, context, path)
        for name, default in self.absent:
            result[name] = fresh_default(default)
        if self.flexible:
            by_tag = {tag: (name, sub) for tag, name, sub, _ in self.tagged}
            for _tag, name, _sub, default in self.tagged:
                result[name] = fresh_default(default)
            for _ in range(wire.read_uvarint(stream)):
                tag = wire.read_uvarint(stream)
                if tag in by_tag:
                    name, sub = by_tag[tag]
                    size = wire.read_uvarint(stream)
                    end = stream.tell() + size
                    result[name] = sub._parsereport(stream, context, path)
                    if stream.tell() != end:
                        raise wire.DecodeError(f"tagged field {name} has the wrong size")
                else:
                    wire.skip_tagged_field(stream)
        return result

    def _build(self, obj, stream, context, path):
        if self.nullable:
            if obj is None:
                stream.write(b"\xff")
                return obj
            stream.write(b"\x01")
        self.check_known(obj)
        for name, sub, default in self.fields:
            sub._build(obj.get(name, fresh_default(default)), stream, context, path)
        if self.flexible:
            present = []
            for tag, name, sub, default in self.tagged:
                value = obj.get(name, default)
                if value != default:
                    buf = _io.BytesIO()
                    sub._build(value, buf, context, path)
                    present.append((tag, buf.getvalue()))
            wire.write_uvarint(stream, len(present))
            for tag, raw in present:
                wire.write_uvarint(stream, tag)
                wire.write_uvarint(stream, len(raw))
                stream.write(raw)
        return obj

    def _sizeof(self, context, path):
        raise SizeofError("variable size")

    # -- compiled ------------------------------------------------------------

    def _emitparse(self, code):
        _prelude(code)
        fname = f"parse_kstruct_{code.allocateId()}"
        lines = [f"def {fname}(io, this):"]
        if self.nullable:
            lines.append("    if read_exact(io, 1) == b'\\xff': return None")
        cls = f"message_class_{code.allocateId()}"
        code.append(f"{cls} = message_class({list(self.message_class._keys)!r})")
        lines.append(f"    r = {cls}()")
        for name, sub, _default in self.fields:
            lines.append(f"    r.{name} = {sub._compileparse(code)}")
        for name, default in self.absent:
            lines.append(f"    r.{name} = {default_literal(default)}")
        if self.flexible:
            if self.tagged:
                for _tag, name, _sub, default in self.tagged:
                    lines.append(f"    r.{name} = {default_literal(default)}")
                lines.append("    for _ in range(read_uvarint(io)):")
                lines.append("        tag = read_uvarint(io)")
                for i, (tag, name, sub, _default) in enumerate(self.tagged):
                    kw = "if" if i == 0 else "elif"
                    lines.append(f"        {kw} tag == {tag}:")
                    lines.append("            end = read_uvarint(io) + io.tell()")
                    lines.append(f"            r.{name} = {sub._compileparse(code)}")
                    lines.append("            if io.tell() != end:")
                    lines.append(
                        f"                raise DecodeError('tagged field {name} has the wrong size')"
                    )
                lines.append("        else:")
                lines.append("            skip_tagged_field(io)")
            else:
                lines.append("    for _ in range(read_uvarint(io)):")
                lines.append("        read_uvarint(io)")
                lines.append("        skip_tagged_field(io)")
        lines.append("    return r")
        code.append("\n".join(lines))
        return f"{fname}(io, this)"

    def _emitbuild(self, code):
        _prelude(code)
        fname = f"build_kstruct_{code.allocateId()}"
        lines = [f"def {fname}(obj, io, this):"]
        if self.nullable:
            lines.append("    if obj is None:")
            lines.append("        io.write(b'\\xff')")
            lines.append("        return None")
            lines.append("    io.write(b'\\x01')")
        known = f"known_fields_{code.allocateId()}"
        code.append(f"{known} = {sorted(self.known)!r}")
        code.append(f"{known} = frozenset({known})")
        lines.append("    objdict = obj")
        lines.append(f"    if not objdict.keys() <= {known}:")
        lines.append(f"        raise UnknownFieldError('unknown field(s) %s' % sorted(set(objdict) - {known}))")
        for name, sub, default in self.fields:
            lines.append(f"    obj = objdict.get({name!r}, {default_literal(default)})")
            lines.append(f"    {sub._compilebuild(code)}")
        if self.flexible:
            if self.tagged:
                lines.append("    tags = []")
                for tag, name, sub, default in self.tagged:
                    helper = f"build_tag_{code.allocateId()}"
                    code.append(
                        f"""
                        def {helper}(obj, io, this):
                            return {sub._compilebuild(code)}
                        """
                    )
                    lines.append(f"    obj = objdict.get({name!r}, {default_literal(default)})")
                    lines.append(f"    if obj != {default_literal(default)}:")
                    lines.append("        sub = BytesIO()")
                    lines.append(f"        {helper}(obj, sub, this)")
                    lines.append(f"        tags.append(({tag}, sub.getvalue()))")
                lines.append("    write_uvarint(io, len(tags))")
                lines.append("    for tag, raw in tags:")
                lines.append("        write_uvarint(io, tag)")
                lines.append("        write_uvarint(io, len(raw))")
                lines.append("        io.write(raw)")
            else:
                lines.append("    io.write(b'\\x00')")
        lines.append("    return objdict")
        code.append("\n".join(lines))
        return f"{fname}(obj, io, this)"
