"""Kafka's compression codecs (attribute bits 0-2 of a batch or legacy message).

All codecs run in cramjam (C/Rust), with gzip from the standard library:

* gzip (1): an RFC 1952 stream, as Java's ``GZIPOutputStream`` writes; readers
  accept concatenated members.
* snappy (2): producers write either snappy-java's "xerial" framing (Java,
  kafka-python, aiokafka) or a raw snappy block (librdkafka); a reader detects
  the xerial magic and falls back to raw, and the writer uses xerial framing
  like the Java client.
* lz4 (3): the LZ4 frame format with independent blocks (KIP-57), the only
  form Kafka's ``KafkaLZ4BlockInputStream`` reads: a frame whose descriptor
  does not set block independence is refused, as Kafka refuses it ("Dependent
  block stream is unsupported"), though other readers could decompress it
  and Java consumers could not.  Magic 0 messages written by Kafka 0.8/0.9
  carry a frame header checksum computed over the magic number too;
  ``lz4_decompress`` does not verify that byte, so both forms are read.
* zstd (4): one or more standard zstd frames.
"""

from __future__ import annotations

import gzip as _gzip
import struct
import zlib

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
BY_NAME = {name: codec for codec, name in NAMES.items()}


class UnsupportedCodecError(ValueError):
    """A codec id outside 0-4, or a codec the record format does not allow."""


class DecompressionError(ValueError):
    """Bytes a codec cannot decompress (Kafka: a KafkaException from the codec's
    input stream, which a Produce is answered UNKNOWN_SERVER_ERROR for)."""


# snappy-java SnappyOutputStream header: magic, version 1, min compatible 1.
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_INT32 = struct.Struct(">i")


def gzip_compress(data, level: int | None = None) -> bytes:
    # mtime=0 keeps the output deterministic (Java writes 0 there as well).
    # Level -1 (Kafka's default) is zlib's default, 6.
    level = 6 if level is None or level < 0 else level
    out = bytearray(_gzip.compress(bytes(data), compresslevel=level, mtime=0))
    # The header as Java's GZIPOutputStream writes it since JDK 16: no extra
    # flags, operating system 255 ("unknown"); the stream is then byte for byte
    # what Kafka writes.
    out[8], out[9] = 0, 0xFF
    return bytes(out)


def gzip_decompress(data) -> bytes:
    # gzip.decompress reads every concatenated member, as Java's GZIPInputStream does.
    return _gzip.decompress(bytes(data))


def snappy_compress(data, level: int | None = None, *, xerial: bool = True) -> bytes:
    data = memoryview(data)
    if not xerial:
        return bytes(cramjam.snappy.compress_raw(data))
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block))
        out += block
    return bytes(out)


def is_xerial(data) -> bool:
    return len(data) >= 16 and bytes(data[:8]) == _XERIAL_MAGIC


def snappy_decompress(data) -> bytes:
    data = memoryview(data)
    if not is_xerial(data):
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos, end = 16, len(data)
    while pos < end:
        if end - pos < 4:
            raise ValueError("truncated xerial snappy block length")
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > end:
            raise ValueError("truncated xerial snappy block")
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


def lz4_compress(data, level: int | None = None) -> bytes:
    compressor = cramjam.lz4.Compressor(level=9 if level is None else level,
                                        content_checksum=False, block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_INDEPENDENCE = 0x20  # in the frame descriptor's FLG byte


def lz4_decompress(data) -> bytes:
    data = bytes(data)
    if len(data) > 4 and data[:4] == _LZ4_MAGIC and not data[4] & _LZ4_BLOCK_INDEPENDENCE:
        raise DecompressionError("Dependent block stream is unsupported")
    return bytes(cramjam.lz4.decompress(data))


def zstd_compress(data, level: int | None = None) -> bytes:
    return bytes(cramjam.zstd.compress(bytes(data), level=3 if level is None else level))


def zstd_decompress(data) -> bytes:
    return bytes(cramjam.zstd.decompress(bytes(data)))


_COMPRESS = {
    GZIP: gzip_compress,
    SNAPPY: snappy_compress,
    LZ4: lz4_compress,
    ZSTD: zstd_compress,
}
_DECOMPRESS = {
    GZIP: gzip_decompress,
    SNAPPY: snappy_decompress,
    LZ4: lz4_decompress,
    ZSTD: zstd_decompress,
}


def compress(codec: int, data, level: int | None = None) -> bytes:
    """``data`` compressed with ``codec`` at ``level`` (Kafka's compression.<codec>.level;
    None: Kafka's default level).  Snappy has no levels."""
    if codec == NONE:
        return bytes(data)
    try:
        fn = _COMPRESS[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression codec {codec}") from None
    return fn(data, level)


def decompress(codec: int, data) -> bytes:
    """``data`` decompressed; DecompressionError for bytes the codec cannot read."""
    if codec == NONE:
        return bytes(data)
    try:
        fn = _DECOMPRESS[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression codec {codec}") from None
    try:
        return fn(data)
    except DecompressionError:
        raise
    except (ValueError, EOFError, OSError, zlib.error, cramjam.DecompressionError) as exc:
        raise DecompressionError(f"{NAMES[codec]}: {exc}") from exc


# --- LZ4 frames from Kafka 0.8/0.9 (magic 0) ----------------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, used only for the few bytes of an LZ4 frame descriptor."""
    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos + 4 * i)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (lane,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


def _lz4_descriptor_end(frame: bytes) -> int:
    flg = frame[4]
    return 4 + 2 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0)


def lz4_compress_broken_checksum(data: bytes) -> bytes:
    """An LZ4 frame whose header checksum also covers the magic, as Kafka 0.8/0.9 wrote for magic 0."""
    frame = bytearray(lz4_compress(data))
    end = _lz4_descriptor_end(frame)
    frame[end] = (xxh32(bytes(frame[0:end])) >> 8) & 0xFF
    return bytes(frame)


def lz4_decompress_any_checksum(data: bytes) -> bytes:
    """Read an LZ4 frame whose header checksum is either the standard or the Kafka 0.8 form."""
    frame = bytearray(data)
    if len(frame) > 7:
        end = _lz4_descriptor_end(frame)
        if end < len(frame):
            frame[end] = (xxh32(bytes(frame[4:end])) >> 8) & 0xFF
    return decompress(LZ4, bytes(frame))
