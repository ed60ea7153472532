"""Low-level readers and writers for Kafka's primitive wire types.

These functions are the runtime of the codec: the construct classes in
``protocol.types`` call them when interpreted, and the code that construct's
``compile()`` emits for those classes calls the very same functions, so both
paths agree byte for byte.

Every reader takes a binary stream (``io.BytesIO``) and raises ``DecodeError``
on truncated or malformed input; every writer takes the stream and the value.
"""

from __future__ import annotations

import codecs
import struct
import uuid as _uuid

__all__ = [
    "DecodeError",
    "UnknownFieldError",
    "StringTooLongError",
    "MAX_STRING_BYTES",
    "JAVA_UTF8_ERRORS",
    "decode_utf8",
    "JAVA_UTF8_UNBOUNDED",
    "read_exact",
    "read_uvarint",
    "write_uvarint",
    "uvarint_size",
    "read_varint",
    "write_varint",
    "read_varlong",
    "write_varlong",
    "read_string",
    "read_nullable_string",
    "read_compact_string",
    "read_compact_nullable_string",
    "write_string",
    "write_nullable_string",
    "write_compact_string",
    "write_compact_nullable_string",
    "read_bytes",
    "read_nullable_bytes",
    "read_compact_bytes",
    "read_compact_nullable_bytes",
    "write_bytes",
    "write_nullable_bytes",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "read_array_count",
    "read_compact_array_count",
    "write_array_count",
    "write_compact_array_count",
    "read_varint_array_count",
    "write_varint_array_count",
    "read_varint_bytes",
    "write_varint_bytes",
    "read_varint_string",
    "write_varint_string",
    "read_uuid",
    "write_uuid",
    "read_bool",
    "write_bool",
    "skip_tagged_field",
    "ZERO_UUID",
]


class DecodeError(ValueError):
    """The bytes do not form a valid value of the expected type."""


ZERO_UUID = _uuid.UUID(int=0)

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_pack_i16 = _INT16.pack
_pack_i32 = _INT32.pack
_unpack_i16 = _INT16.unpack
_unpack_i32 = _INT32.unpack


def read_exact(io, n: int) -> bytes:
    data = io.read(n)
    if len(data) != n:
        raise DecodeError(f"needed {n} bytes, got {len(data)}")
    return data


# --- unsigned varint (LEB128), used by flexible versions -------------------


def read_uvarint(io) -> int:
    read = io.read
    result = 0
    shift = 0
    while True:
        b = read(1)
        if not b:
            raise DecodeError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result
        shift += 7
        if shift > 63:
            raise DecodeError("varint too long")


def write_uvarint(io, value: int) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot be negative: {value}")
    if value < 0x80:
        io.write(bytes((value,)))
        return
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    io.write(out)


def uvarint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


# --- zig-zag varint / varlong, used inside record batches -------------------


def _read_zigzag(io, max_shift: int) -> int:
    read = io.read
    result = 0
    shift = 0
    while True:
        b = read(1)
        if not b:
            raise DecodeError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
        if shift > max_shift:
            raise DecodeError("varint too long")


def read_varint(io) -> int:
    return _read_zigzag(io, 28)


def read_varlong(io) -> int:
    return _read_zigzag(io, 63)


def write_varint(io, value: int) -> None:
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of range: {value}")
    write_uvarint(io, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(io, value: int) -> None:
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of range: {value}")
    write_uvarint(io, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


# --- strings ----------------------------------------------------------------


class UnknownFieldError(ValueError):
    """A message to encode carries a key that is no field of its schema."""


class StringTooLongError(ValueError):
    """A string to encode is longer than the 32767 bytes Kafka's strings can hold."""


def _java_replacement(exc: UnicodeDecodeError) -> tuple[str, int]:
    """Malformed UTF-8 becomes U+FFFD, exactly as Java's ``new String(bytes, UTF_8)``
    (which Kafka decodes every string with) replaces it: Python's ``replace``
    agrees except on an encoded surrogate (``ED A0..BF``), which Java takes
    whole (three bytes, or two without a continuation byte) as one character."""
    data, i = exc.object, exc.start
    if data[i] == 0xED and i + 1 < len(data) and 0xA0 <= data[i + 1] <= 0xBF:
        whole = i + 2 < len(data) and 0x80 <= data[i + 2] <= 0xBF
        return "\ufffd", i + (3 if whole else 2)
    return "\ufffd", exc.end


_checked: list = [None]  # the last long string found to fit once replaced


def _java_replacement_that_fits(exc: UnicodeDecodeError) -> tuple[str, int]:
    """``_java_replacement``, refusing a string that would no longer fit a Kafka
    string once replaced (one malformed byte becomes three): every answer that
    quotes it back would be unencodable (Kafka cannot answer it either)."""
    data = exc.object
    if len(data) * 3 > MAX_STRING_BYTES and _checked[0] is not data:
        replaced = len(str(data, "utf-8", JAVA_UTF8_UNBOUNDED).encode("utf-8"))
        if replaced > MAX_STRING_BYTES:
            raise DecodeError(f"a string of {len(data)} bytes that is not valid UTF-8 "
                              f"would be {replaced} bytes with its malformed bytes replaced, "
                              f"more than {MAX_STRING_BYTES}")
        _checked[0] = data
    return _java_replacement(exc)


# Kafka answers a request whose strings are not valid UTF-8 (a group id, a
# client id) with the replaced text; it never refuses one for its encoding.
JAVA_UTF8_ERRORS = "kcoord-java-utf8"
JAVA_UTF8_UNBOUNDED = "kcoord-java-utf8-unchecked"
codecs.register_error(JAVA_UTF8_ERRORS, _java_replacement_that_fits)
codecs.register_error(JAVA_UTF8_UNBOUNDED, _java_replacement)


def decode_utf8(raw: bytes) -> str:
    """A Kafka string field's text (at most 32767 bytes once malformed bytes are replaced)."""
    return str(raw, "utf-8", JAVA_UTF8_ERRORS)


_decode_utf8 = decode_utf8


def read_string(io) -> str:
    (n,) = _unpack_i16(read_exact(io, 2))
    if n < 0:
        raise DecodeError("null value in a non-nullable string")
    return _decode_utf8(read_exact(io, n))


def read_nullable_string(io) -> str | None:
    (n,) = _unpack_i16(read_exact(io, 2))
    if n < 0:
        return None
    return _decode_utf8(read_exact(io, n))


MAX_STRING_BYTES = 0x7FFF


def read_compact_string(io) -> str:
    n = read_uvarint(io) - 1
    if n < 0:
        raise DecodeError("null value in a non-nullable compact string")
    if n > MAX_STRING_BYTES:
        # Kafka's generated readers refuse any string over 32767 bytes.
        raise DecodeError(f"string had invalid length {n}")
    return _decode_utf8(read_exact(io, n))


def read_compact_nullable_string(io) -> str | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    if n > MAX_STRING_BYTES:
        raise DecodeError(f"string had invalid length {n}")
    return _decode_utf8(read_exact(io, n))


def write_string(io, value: str) -> None:
    if value is None:
        raise ValueError("null value for a non-nullable string")
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_BYTES:
        raise StringTooLongError(f"string of {len(raw)} bytes is longer than 32767 bytes")
    io.write(_pack_i16(len(raw)))
    io.write(raw)


def write_nullable_string(io, value: str | None) -> None:
    if value is None:
        io.write(b"\xff\xff")
    else:
        write_string(io, value)


def write_compact_string(io, value: str) -> None:
    if value is None:
        raise ValueError("null value for a non-nullable string")
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_BYTES:
        raise StringTooLongError(f"string of {len(raw)} bytes is longer than 32767 bytes")
    write_uvarint(io, len(raw) + 1)
    io.write(raw)


def write_compact_nullable_string(io, value: str | None) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_string(io, value)


# --- bytes --------------------------------------------------------------------


def read_bytes(io) -> bytes:
    (n,) = _unpack_i32(read_exact(io, 4))
    if n < 0:
        raise DecodeError("null value in non-nullable bytes")
    return read_exact(io, n)


def read_nullable_bytes(io) -> bytes | None:
    (n,) = _unpack_i32(read_exact(io, 4))
    if n < 0:
        return None
    return read_exact(io, n)


def read_compact_bytes(io) -> bytes:
    n = read_uvarint(io) - 1
    if n < 0:
        raise DecodeError("null value in non-nullable compact bytes")
    return read_exact(io, n)


def read_compact_nullable_bytes(io) -> bytes | None:
    n = read_uvarint(io) - 1
    if n < 0:
        return None
    return read_exact(io, n)


def write_bytes(io, value) -> None:
    if value is None:
        raise ValueError("null value for non-nullable bytes")
    io.write(_pack_i32(len(value)))
    io.write(value)


def write_nullable_bytes(io, value) -> None:
    if value is None:
        io.write(b"\xff\xff\xff\xff")
    else:
        write_bytes(io, value)


def write_compact_bytes(io, value) -> None:
    if value is None:
        raise ValueError("null value for non-nullable bytes")
    write_uvarint(io, len(value) + 1)
    io.write(value)


def write_compact_nullable_bytes(io, value) -> None:
    if value is None:
        io.write(b"\x00")
    else:
        write_compact_bytes(io, value)


# --- array counts ---------------------------------------------------------------

# A count larger than the bytes left cannot be honest (every element takes at
# least one byte); refusing it early stops a 4-byte frame from asking for a
# two-billion element list.


def _check_count(io, n: int) -> int:
    buf = getattr(io, "getbuffer", None)
    if buf is not None and n > len(buf()) - io.tell():
        raise DecodeError(f"array count {n} exceeds the remaining bytes")
    return n


def read_array_count(io) -> int:
    """Classic array count; -1 means null."""
    (n,) = _unpack_i32(read_exact(io, 4))
    if n < -1:
        raise DecodeError(f"invalid array count {n}")
    return _check_count(io, n) if n > 0 else n


def read_compact_array_count(io) -> int:
    """Compact array count; -1 means null."""
    n = read_uvarint(io) - 1
    return _check_count(io, n) if n > 0 else n


def write_array_count(io, value) -> None:
    io.write(_pack_i32(-1 if value is None else len(value)))


def write_compact_array_count(io, value) -> None:
    write_uvarint(io, 0 if value is None else len(value) + 1)


def read_varint_array_count(io) -> int:
    """Zig-zag varint count, never null (record headers)."""
    n = read_varint(io)
    if n < 0:
        raise DecodeError(f"negative count {n}")
    return _check_count(io, n) if n > 0 else n


def write_varint_array_count(io, value) -> None:
    write_varint(io, len(value))


# --- zig-zag length-prefixed bytes and strings, inside records ---------------------


def read_varint_bytes(io) -> bytes | None:
    """Bytes with a zig-zag varint length, -1 for null (record keys, values, header values)."""
    n = read_varint(io)
    if n < 0:
        return None
    return read_exact(io, n)


def write_varint_bytes(io, value) -> None:
    if value is None:
        io.write(b"\x01")  # zig-zag -1
    else:
        write_varint(io, len(value))
        io.write(value)


def read_varint_string(io) -> str:
    """A UTF-8 string with a zig-zag varint length, never null (header keys)."""
    n = read_varint(io)
    if n < 0:
        raise DecodeError("null header key")
    return str(read_exact(io, n), "utf-8", JAVA_UTF8_UNBOUNDED)


def write_varint_string(io, value: str) -> None:
    raw = value.encode("utf-8")
    write_varint(io, len(raw))
    io.write(raw)


# --- uuid -------------------------------------------------------------------------


def read_uuid(io) -> _uuid.UUID:
    return _uuid.UUID(bytes=read_exact(io, 16))


def write_uuid(io, value) -> None:
    if value is None:
        value = ZERO_UUID
    io.write(value.bytes)


# --- bool -------------------------------------------------------------------------

# construct's compiled ``Flag`` reads a missing byte as True; a truncated frame
# must fail instead.


def read_bool(io) -> bool:
    return read_exact(io, 1) != b"\x00"


def write_bool(io, value) -> None:
    io.write(b"\x01" if value else b"\x00")


# --- tagged fields ------------------------------------------------------------------


def skip_tagged_field(io) -> None:
    size = read_uvarint(io)
    read_exact(io, size)
