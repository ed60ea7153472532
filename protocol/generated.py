"""A decoder and an encoder generated as Python source from the schema table.

For the APIs declared with ``generated=True`` (the hot ones: Produce,
OffsetCommit, ApiVersions, Metadata, the heartbeats, the request header, the
offset records of ``__consumer_offsets``) the codec is not
construct's compiled code but one plain function per direction, generated at
first use from the very ``KStruct`` that the construct codec is built from, so
both follow one schema table and agree on every version rule.  The generated
code reads the frame in place by offset (``struct.unpack_from`` and slices, no
stream, no call per field), merges neighbouring fixed-size fields into one
``struct`` call, and writes into one ``bytearray``.  About four times faster
than construct's compiled code on an OffsetCommit.

It must give exactly what the construct codec gives: the same bytes when
encoding, the same values when decoding, a ``DecodeError`` for every input
construct refuses, the same exception types for values that cannot be encoded.
``tests/protocol/test_generated_codec.py`` checks that for every version of
every API (not only the generated ones), byte for byte.

One difference is deliberate: a ``records`` field of a request (Produce)
decodes to a ``memoryview`` of the buffer, not a copy, so a megabyte of records
goes from the frame to the log file without being copied (a response's, a
Fetch answer read by a client, decodes to ``bytes`` as construct's); it is writable when the buffer
is (the broker receives large frames into a ``bytearray`` of their own).  The
decoder reads ``bytes``, ``bytearray`` or ``memoryview`` buffers alike and
gives the same values (other ``bytes`` fields are ``bytes``) for each.
"""

from __future__ import annotations

import io as _io
import struct as _struct
import uuid as _uuid

from construct import FormatField

from kcoord.protocol import types as T
from kcoord.protocol.wire import (
    JAVA_UTF8_ERRORS,
    MAX_STRING_BYTES,
    ZERO_UUID,
    DecodeError,
    StringTooLongError,
    UnknownFieldError,
)


class Unsupported(Exception):
    """A construct type that no API schema uses (the zig-zag varints of records)."""


def _uvarint_at(buf, pos):
    """``read_uvarint`` on a buffer: (value, next position)."""
    result = 0
    shift = 0
    while True:
        byte = buf[pos]  # IndexError at the end: a truncated varint
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def _put_uvarint(out: bytearray, value: int) -> None:
    """``write_uvarint`` into a bytearray."""
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


_I16 = _struct.Struct(">h")
_I32 = _struct.Struct(">i")

_NAMESPACE = {
    "DecodeError": DecodeError,
    "UnknownFieldError": UnknownFieldError,
    "StringTooLongError": StringTooLongError,
    "ZERO_UUID": ZERO_UUID,
    "UUID": _uuid.UUID,
    "MAX_STRING": MAX_STRING_BYTES,
    "uvarint_at": _uvarint_at,
    "put_uvarint": _put_uvarint,
    "I16": _I16,
    "I32": _I32,
    "struct_error": _struct.error,
}


class _Source:
    def __init__(self):
        self.lines: list[str] = []
        self.names: dict[str, object] = {}
        self._count = 0
        self.uses_view = False  # the decoder reads a records field
        self.views = True  # records fields decode to views of the buffer

    def var(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}{self._count}"

    def const(self, prefix: str, value) -> str:
        name = self.var(prefix)
        self.names[name] = value
        return name

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)


def _is_fixed(node) -> bool:
    return isinstance(node, FormatField)


def _fixed_runs(fields):
    """``fields`` grouped: runs of fixed-size fields (read or written with one
    ``struct`` call) and single other fields, in wire order."""
    run: list = []
    for field in fields:
        if _is_fixed(field[1]):
            run.append(field)
            continue
        if run:
            yield True, run
            run = []
        yield False, [field]
    if run:
        yield True, run


def _run_struct(src: _Source, run) -> str:
    fmt = ">" + "".join(node.fmtstr.lstrip("<>=!") for _name, node, *_ in run)
    return src.const("S", _struct.Struct(fmt))


# -- decoding ----------------------------------------------------------------------


def _read_uvarint(src: _Source, d: int, dst: str) -> None:
    src.emit(d, f"{dst} = buf[pos]")
    src.emit(d, f"if {dst} < 128: pos += 1")
    src.emit(d, f"else: {dst}, pos = uvarint_at(buf, pos)")


def _read_slice(src: _Source, d: int, dst: str, n: str, expr: str, source: str = "buf") -> None:
    end = src.var("e")
    src.emit(d, f"{end} = pos + {n}")
    src.emit(d, f"if {end} > nbuf: "
                f"raise DecodeError('needed %d bytes, got %d' % ({n}, nbuf - pos))")
    src.emit(d, f"{dst} = {expr.format(f'{source}[pos:{end}]')}")
    src.emit(d, f"pos = {end}")


def _read(src: _Source, node, d: int, dst: str) -> None:
    """Code reading one value of ``node`` at ``pos`` into ``dst``."""
    if _is_fixed(node):
        s = src.const("S", _struct.Struct(node.fmtstr))
        src.emit(d, f"{dst} = {s}.unpack_from(buf, pos)[0]")
        src.emit(d, f"pos += {s}.size")
    elif isinstance(node, T.KStruct):
        _read_struct(src, node, d, dst)
    elif isinstance(node, T.KArray):
        _read_array(src, node, d, dst)
    elif isinstance(node, T._Primitive):
        _read_primitive(src, node, d, dst)
    else:
        raise Unsupported(type(node).__name__)


def _read_primitive(src: _Source, node, d: int, dst: str) -> None:
    reader = node.reader
    if reader == "read_bool":
        src.emit(d, f"{dst} = buf[pos] != 0")
        src.emit(d, "pos += 1")
        return
    if reader == "read_uuid":
        _read_slice(src, d, dst, "16", "UUID(bytes=bytes({}))")
        return
    kind = reader[len("read_"):]
    compact = kind.startswith("compact_")
    nullable = "nullable_" in kind
    text = kind.endswith("string")
    if kind.rsplit("_", 1)[-1] not in ("string", "bytes"):
        raise Unsupported(reader)
    n = src.var("n")
    if compact:
        _read_uvarint(src, d, n)
        src.emit(d, f"{n} -= 1")
    elif text:
        src.emit(d, f"{n} = I16.unpack_from(buf, pos)[0]")
        src.emit(d, "pos += 2")
    else:
        src.emit(d, f"{n} = I32.unpack_from(buf, pos)[0]")
        src.emit(d, "pos += 4")
    what = "string" if text else "bytes"
    src.emit(d, f"if {n} < 0:")
    if nullable:
        src.emit(d + 1, f"{dst} = None")
    else:
        src.emit(d + 1, f"raise DecodeError('null value in a non-nullable {what}')")
    src.emit(d, "else:")
    if compact and text:
        src.emit(d + 1, f"if {n} > MAX_STRING: "
                        f"raise DecodeError('string had invalid length %d' % {n})")
    if getattr(node, "records", False) and src.views:
        # A view of the frame, not a copy (see the module's docstring).
        src.uses_view = True
        _read_slice(src, d + 1, dst, n, "{}", source="view")
    else:
        # ``bytes()`` of a ``bytes`` slice is that slice: it copies only when the
        # buffer is a bytearray or a memoryview.
        text_of = f"str({{}}, 'utf-8', {JAVA_UTF8_ERRORS!r})"
        _read_slice(src, d + 1, dst, n, text_of if text else "bytes({})")


def _read_array(src: _Source, node: T.KArray, d: int, dst: str) -> None:
    n = src.var("n")
    if node._reader == "read_array_count":
        src.emit(d, f"{n} = I32.unpack_from(buf, pos)[0]")
        src.emit(d, "pos += 4")
        src.emit(d, f"if {n} < -1: raise DecodeError('invalid array count %d' % {n})")
    elif node._reader == "read_compact_array_count":
        _read_uvarint(src, d, n)
        src.emit(d, f"{n} -= 1")
    else:
        raise Unsupported(node._reader)
    src.emit(d, f"if {n} < 0:")
    if node.nullable:
        src.emit(d + 1, f"{dst} = None")
    else:
        src.emit(d + 1, "raise DecodeError('null value in a non-nullable array')")
    src.emit(d, "else:")
    # Every element takes at least a byte: a larger count cannot be honest.
    src.emit(d + 1, f"if {n} > nbuf - pos: "
                    f"raise DecodeError('array count %d exceeds the remaining bytes' % {n})")
    items, item = src.var("items"), src.var("item")
    src.emit(d + 1, f"{items} = []")
    src.emit(d + 1, f"for _ in range({n}):")
    _read(src, node.element, d + 2, item)
    src.emit(d + 2, f"{items}.append({item})")
    src.emit(d + 1, f"{dst} = {items}")


def _read_struct(src: _Source, node: T.KStruct, d: int, dst: str) -> None:
    if node.nullable:
        src.emit(d, "if buf[pos] == 255:")
        src.emit(d + 1, "pos += 1")
        src.emit(d + 1, f"{dst} = None")
        src.emit(d, "else:")
        src.emit(d + 1, "pos += 1")
        d += 1
    cls = src.const("M", node.message_class)
    r = src.var("r")
    src.emit(d, f"{r} = {cls}()")
    for fixed, run in _fixed_runs(node.fields):
        if fixed:
            s = _run_struct(src, run)
            targets = ", ".join(f"{r}.{name}" for name, *_ in run)
            src.emit(d, f"{targets}{',' if len(run) == 1 else ''} = {s}.unpack_from(buf, pos)")
            src.emit(d, f"pos += {s}.size")
        else:
            ((name, sub, _default),) = run
            _read(src, sub, d, f"{r}.{name}")
    for name, default in node.absent:
        src.emit(d, f"{r}.{name} = {T.default_literal(default)}")
    if node.flexible:
        for _tag, name, _sub, default in node.tagged:
            src.emit(d, f"{r}.{name} = {T.default_literal(default)}")
        # Almost always an empty section: one byte, 0.
        src.emit(d, "if buf[pos] == 0: pos += 1")
        src.emit(d, "else:")
        d += 1
        count, tag, size = src.var("tags"), src.var("tag"), src.var("size")
        _read_uvarint(src, d, count)
        src.emit(d, f"for _ in range({count}):")
        _read_uvarint(src, d + 1, tag)
        _read_uvarint(src, d + 1, size)
        for i, (number, name, sub, _default) in enumerate(node.tagged):
            src.emit(d + 1, f"{'if' if i == 0 else 'elif'} {tag} == {number}:")
            end = src.var("e")
            src.emit(d + 2, f"{end} = pos + {size}")
            _read(src, sub, d + 2, f"{r}.{name}")
            src.emit(d + 2, f"if pos != {end}: "
                            f"raise DecodeError('tagged field {name} has the wrong size')")
        if node.tagged:
            src.emit(d + 1, "else:")
            inner = d + 2
        else:
            inner = d + 1
        src.emit(inner, f"pos += {size}")
        src.emit(inner, "if pos > nbuf: raise DecodeError('truncated tagged field')")
        d -= 1
    src.emit(d, f"{dst} = {r}")


def _decoder(src: _Source, node: T.KStruct) -> str:
    src.emit(0, "def decode_at(buf, pos):")
    src.emit(1, "nbuf = len(buf)")
    view_at = len(src.lines)
    src.emit(1, "try:")
    _read(src, node, 2, "value")
    if src.uses_view:
        src.lines.insert(view_at, "    view = memoryview(buf)")
    src.emit(1, "except (IndexError, struct_error) as exc:")
    src.emit(2, "raise DecodeError('truncated message: %s' % (exc,)) from None")
    src.emit(1, "except UnicodeDecodeError as exc:")
    src.emit(2, "raise DecodeError('invalid UTF-8 in string: %s' % (exc,)) from None")
    src.emit(1, "return value, pos")
    return "decode_at"


# -- encoding ----------------------------------------------------------------------


def _write_uvarint(src: _Source, d: int, out: str, expr: str) -> None:
    v = src.var("u")
    src.emit(d, f"{v} = {expr}")
    src.emit(d, f"if {v} < 128: {out}.append({v})")
    src.emit(d, f"else: put_uvarint({out}, {v})")


def _write(src: _Source, node, d: int, out: str, value: str) -> None:
    """Code appending the encoding of ``value`` (a local name) to ``out``."""
    if _is_fixed(node):
        s = src.const("S", _struct.Struct(node.fmtstr))
        src.emit(d, f"{out} += {s}.pack({value})")
    elif isinstance(node, T.KStruct):
        _write_struct(src, node, d, out, value)
    elif isinstance(node, T.KArray):
        _write_array(src, node, d, out, value)
    elif isinstance(node, T._Primitive):
        _write_primitive(src, node, d, out, value)
    else:
        raise Unsupported(type(node).__name__)


def _write_primitive(src: _Source, node, d: int, out: str, value: str) -> None:
    writer = node.writer
    if writer == "write_bool":
        src.emit(d, f"{out}.append(1 if {value} else 0)")
        return
    if writer == "write_uuid":
        src.emit(d, f"{out} += (ZERO_UUID if {value} is None else {value}).bytes")
        return
    kind = writer[len("write_"):]
    if kind.rsplit("_", 1)[-1] not in ("string", "bytes"):
        raise Unsupported(writer)
    compact = kind.startswith("compact_")
    nullable = "nullable_" in kind
    text = kind.endswith("string")
    src.emit(d, f"if {value} is None:")
    if nullable:
        null = "b'\\x00'" if compact else ("b'\\xff\\xff'" if text else "b'\\xff\\xff\\xff\\xff'")
        src.emit(d + 1, f"{out} += {null}")
    else:
        message = "null value for a non-nullable string" if text else \
            "null value for non-nullable bytes"
        src.emit(d + 1, f"raise ValueError({message!r})")
    src.emit(d, "else:")
    raw = value
    if text:
        raw = src.var("raw")
        src.emit(d + 1, f"{raw} = {value}.encode('utf-8')")
        src.emit(d + 1, f"if len({raw}) > MAX_STRING: raise StringTooLongError("
                        f"'string of %d bytes is longer than 32767 bytes' % len({raw}))")
    if compact:
        _write_uvarint(src, d + 1, out, f"len({raw}) + 1")
    else:
        src.emit(d + 1, f"{out} += {'I16' if text else 'I32'}.pack(len({raw}))")
    src.emit(d + 1, f"{out} += {raw}")


def _write_array(src: _Source, node: T.KArray, d: int, out: str, value: str) -> None:
    compact = node._writer == "write_compact_array_count"
    if not compact and node._writer != "write_array_count":
        raise Unsupported(node._writer)
    src.emit(d, f"if {value} is None:")
    if node.nullable:
        src.emit(d + 1, f"{out} += {'bytes(1)' if compact else 'I32.pack(-1)'}")
    else:
        src.emit(d + 1, "raise ValueError('null value for a non-nullable array')")
    src.emit(d, "else:")
    if compact:
        _write_uvarint(src, d + 1, out, f"len({value}) + 1")
    else:
        src.emit(d + 1, f"{out} += I32.pack(len({value}))")
    item = src.var("item")
    src.emit(d + 1, f"for {item} in {value}:")
    _write(src, node.element, d + 2, out, item)


def _write_struct(src: _Source, node: T.KStruct, d: int, out: str, value: str) -> None:
    if node.nullable:
        src.emit(d, f"if {value} is None:")
        src.emit(d + 1, f"{out}.append(255)")
        src.emit(d, "else:")
        src.emit(d + 1, f"{out}.append(1)")
        d += 1
    known = src.const("K", node.known)
    src.emit(d, f"if not {value}.keys() <= {known}:")
    src.emit(d + 1, f"raise UnknownFieldError("
                    f"'unknown field(s) %s' % sorted(set({value}) - {known}))")
    for fixed, run in _fixed_runs(node.fields):
        if fixed:
            s = _run_struct(src, run)
            args = ", ".join(f"{value}.get({name!r}, {T.default_literal(default)})"
                             for name, _sub, default in run)
            src.emit(d, f"{out} += {s}.pack({args})")
        else:
            ((name, sub, default),) = run
            v = src.var("v")
            src.emit(d, f"{v} = {value}.get({name!r}, {T.default_literal(default)})")
            _write(src, sub, d, out, v)
    if not node.flexible:
        return
    if not node.tagged:
        src.emit(d, f"{out}.append(0)")
        return
    tags = src.var("tags")
    src.emit(d, f"{tags} = []")
    for number, name, sub, default in node.tagged:
        v, buf = src.var("v"), src.var("tagbuf")
        literal = T.default_literal(default)
        src.emit(d, f"{v} = {value}.get({name!r}, {literal})")
        src.emit(d, f"if {v} != {literal}:")
        src.emit(d + 1, f"{buf} = bytearray()")
        _write(src, sub, d + 1, buf, v)
        src.emit(d + 1, f"{tags}.append(({number}, {buf}))")
    _write_uvarint(src, d, out, f"len({tags})")
    number, raw = src.var("number"), src.var("raw")
    src.emit(d, f"for {number}, {raw} in {tags}:")
    _write_uvarint(src, d + 1, out, number)
    _write_uvarint(src, d + 1, out, f"len({raw})")
    src.emit(d + 1, f"{out} += {raw}")


def _encoder(src: _Source, node: T.KStruct) -> str:
    src.emit(0, "def encode(value):")
    src.emit(1, "out = bytearray()")
    _write(src, node, 1, "out", "value")
    src.emit(1, "return bytes(out)")
    return "encode"


# -- the codec ---------------------------------------------------------------------


def generate(node: T.KStruct, views: bool = True) -> tuple[str, dict]:
    """The source of ``decode_at(buf, pos) -> (value, end)`` and
    ``encode(value) -> bytes`` for ``node``, and the names it needs; ``views``:
    ``records`` fields decode to views of the buffer (a request's)."""
    src = _Source()
    src.views = views
    _decoder(src, node)
    src.emit(0, "")
    _encoder(src, node)
    return "\n".join(src.lines) + "\n", src.names


class GeneratedCodec:
    """Has the interface of ``protocol.schema.Codec`` (``read``, ``decode``,
    ``write``, ``encode``, ``decode_at``); ``construct`` is the construct codec
    of the same struct, compiled only when asked for (tests compare the two)."""

    __slots__ = ("struct", "source", "decode_at", "encode", "_construct")

    generated = True

    def __init__(self, struct: T.KStruct, views: bool = True):
        self.struct = struct
        self.source, names = generate(struct, views)
        namespace = dict(_NAMESPACE)
        namespace.update(names)
        exec(compile(self.source, f"<generated codec {id(self):x}>", "exec"), namespace)
        self.decode_at = namespace["decode_at"]
        self.encode = namespace["encode"]
        self._construct = None

    @property
    def construct(self):
        if self._construct is None:
            from kcoord.protocol.schema import Codec
            self._construct = Codec(self.struct)
        return self._construct

    @property
    def compiled(self):
        return self.construct.compiled

    def read(self, stream):
        if not isinstance(stream, _io.BytesIO):
            return self.construct.read(stream)
        value, end = self.decode_at(stream.getvalue(), stream.tell())
        stream.seek(end)
        return value

    def decode(self, data):
        value, end = self.decode_at(data, 0)
        if end != len(data):
            raise DecodeError(f"{len(data) - end} trailing bytes")
        return value

    def write(self, stream, value) -> None:
        stream.write(self.encode(value))
