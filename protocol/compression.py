"""Kafka's compression codecs (attribute bits 0-2 of a batch or legacy message).

All codecs run in cramjam (C/Rust), with gzip from the standard library:

* gzip (1): an RFC 1952 stream, as Java's ``GZIPOutputStream`` writes; readers
  accept concatenated members.
* snappy (2): producers write either snappy-java's "xerial" framing (Java,
  kafka-python, aiokafka) or a raw snappy block (librdkafka); a reader detects
  the xerial magic and falls back to raw, and the writer uses xerial framing
  like the Java client.
* lz4 (3): the LZ4 frame format with independent blocks (KIP-57), the only
  form Kafka's ``Lz4BlockOutputStream`` accepts.  Magic 0 messages written by
  Kafka 0.8/0.9 carry a frame header checksum computed over the magic number
  too; ``lz4_decompress`` does not verify that byte, so both forms are read.
* zstd (4): one or more standard zstd frames.
"""

from __future__ import annotations

import gzip as _gzip
import struct

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


def lz4_decompress(data) -> bytes:
    return bytes(cramjam.lz4.decompress(bytes(data)))


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
    if codec == NONE:
        return bytes(data)
    try:
        fn = _DECOMPRESS[codec]
    except KeyError:
        raise UnsupportedCodecError(f"unknown compression codec {codec}") from None
    return fn(data)
