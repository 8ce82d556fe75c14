"""Spark's hash functions, computed batch-wise with numpy: ``hash`` (Murmur3 x86_32, seed 42),
``xxhash64`` (XXH64, seed 42), ``crc32``, ``md5``, ``sha1`` / ``sha``, ``sha2``.

Arrow has no such kernels. ``hash`` is not the reference Murmur3 on strings: Spark's
``Murmur3_x86_32.hashUnsafeBytes`` mixes each trailing byte (sign-extended) as a whole block, so the
routine is written out here (``mmh3`` would differ, and is not a dependency). Each argument's value
is hashed with the previous argument's hash as seed (NULLs leave it unchanged), by type as Spark's
``HashExpression``: BOOLEAN as INT 1/0, BYTE / SHORT / INT / DATE as INT, BIGINT / TIMESTAMP(_NTZ)
as LONG (micros), FLOAT / DOUBLE by their IEEE bits with -0.0 as 0.0 (NaN canonical), STRING /
BINARY by their bytes. DECIMAL and nested types are refused. Digests (``md5``, ``sha*``, ``crc32``)
go through ``hashlib`` / ``zlib`` row by row (there is no vectorized digest); BINARY results of
Spark are lower-case hex strings, as Spark gives them.
"""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.expressions.arrow_types import INTEGRAL, Refused, Val, prim
from dvengine.expressions.arrow_udfs import call_udf, valid, values

U32, U64 = np.uint32, np.uint64
INT, LONG, STRING = prim("integer"), prim("long"), prim("string")


# --- byte access ------------------------------------------------------------------------------


def _bytes_of(array: pa.Array) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """(data padded with 8 zero bytes, start offsets, lengths) of a string / binary array."""
    array = array.cast(pa.large_binary())
    offsets_buf, data_buf = array.buffers()[1], array.buffers()[2]
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[array.offset: array.offset + len(array) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    padded = np.concatenate([data, np.zeros(8, np.uint8)])
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    lengths = np.where(valid(array), lengths, 0)
    return padded, starts, lengths


def _le(data: np.ndarray[Any, Any], pos: np.ndarray[Any, Any], width: int, dtype: Any) -> np.ndarray[Any, Any]:
    """Little-endian unsigned integers of ``width`` bytes at ``pos``."""
    out = np.zeros(len(pos), dtype=dtype)
    for k in range(width):
        out |= data[pos + k].astype(dtype) << dtype(8 * k)
    return out


# --- Murmur3 x86_32, as Spark's Murmur3_x86_32 -------------------------------------------------

_C1, _C2 = U32(0xCC9E2D51), U32(0x1B873593)


def _rotl32(x: Any, r: int) -> Any:
    return (x << U32(r)) | (x >> U32(32 - r))


def _mix_k1(k1: Any) -> Any:
    return _rotl32(k1 * _C1, 15) * _C2


def _mix_h1(h1: Any, k1: Any) -> Any:
    return _rotl32(h1 ^ k1, 13) * U32(5) + U32(0xE6546B64)


def _fmix32(h1: Any, length: Any) -> Any:
    h1 = h1 ^ length
    h1 = h1 ^ (h1 >> U32(16))
    h1 = h1 * U32(0x85EBCA6B)
    h1 = h1 ^ (h1 >> U32(13))
    h1 = h1 * U32(0xC2B2AE35)
    return h1 ^ (h1 >> U32(16))


def murmur3_ints(v: np.ndarray[Any, Any], seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    return np.asarray(_fmix32(_mix_h1(seed, _mix_k1(v.astype(np.int32).view(U32))), U32(4)))


def murmur3_longs(v: np.ndarray[Any, Any], seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    u = v.astype(np.int64).view(U64)
    low, high = (u & U64(0xFFFFFFFF)).astype(U32), (u >> U64(32)).astype(U32)
    return np.asarray(_fmix32(_mix_h1(_mix_h1(seed, _mix_k1(low)), _mix_k1(high)), U32(8)))


def murmur3_bytes(array: pa.Array, seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    data, starts, lengths = _bytes_of(array)
    h1 = seed.copy()
    words = lengths // 4
    for w in range(int(words.max(initial=0))):
        rows = np.nonzero(words > w)[0]
        h1[rows] = _mix_h1(h1[rows], _mix_k1(_le(data, starts[rows] + 4 * w, 4, U32)))
    for t in range(3):
        rows = np.nonzero(lengths % 4 > t)[0]
        byte = data[starts[rows] + 4 * words[rows] + t].view(np.int8).astype(np.int32).view(U32)  # sign-extended
        h1[rows] = _mix_h1(h1[rows], _mix_k1(byte))
    return np.asarray(_fmix32(h1, lengths.astype(U32)))


# --- XXH64, as Spark's XXH64 -------------------------------------------------------------------

_P1, _P2, _P3 = U64(0x9E3779B185EBCA87), U64(0xC2B2AE3D27D4EB4F), U64(0x165667B19E3779F9)
_P4, _P5 = U64(0x85EBCA77C2B2AE63), U64(0x27D4EB2F165667C5)


def _rotl64(x: Any, r: int) -> Any:
    return (x << U64(r)) | (x >> U64(64 - r))


def _fmix64(h: Any) -> Any:
    h = h ^ (h >> U64(33))
    h = h * _P2
    h = h ^ (h >> U64(29))
    h = h * _P3
    return h ^ (h >> U64(32))


def _round64(acc: Any, lane: Any) -> Any:
    return _rotl64(acc + lane * _P2, 31) * _P1


def xxhash_ints(v: np.ndarray[Any, Any], seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    h = seed + _P5 + U64(4)
    h = h ^ (v.astype(np.int32).view(U32).astype(U64) * _P1)
    return np.asarray(_fmix64(_rotl64(h, 23) * _P2 + _P3))


def xxhash_longs(v: np.ndarray[Any, Any], seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    h = seed + _P5 + U64(8)
    h = h ^ (_rotl64(v.astype(np.int64).view(U64) * _P2, 31) * _P1)
    return np.asarray(_fmix64(_rotl64(h, 27) * _P1 + _P4))


def xxhash_bytes(array: pa.Array, seed: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    data, starts, lengths = _bytes_of(array)
    h = seed + _P5
    pos = starts.copy()
    long_rows = np.nonzero(lengths >= 32)[0]
    if len(long_rows):
        s = seed[long_rows]
        v = [s + _P1 + _P2, s + _P2, s.copy(), s - _P1]
        stripes = lengths[long_rows] // 32
        for k in range(int(stripes.max())):
            active = np.nonzero(stripes > k)[0]
            base = starts[long_rows[active]] + 32 * k
            for lane in range(4):
                v[lane][active] = _round64(v[lane][active], _le(data, base + 8 * lane, 8, U64))
        acc = _rotl64(v[0], 1) + _rotl64(v[1], 7) + _rotl64(v[2], 12) + _rotl64(v[3], 18)
        for lane in range(4):
            acc = (acc ^ _round64(U64(0), v[lane])) * _P1 + _P4
        h[long_rows] = acc
        pos[long_rows] += 32 * stripes
    h = h + lengths.astype(U64)
    end = starts + lengths
    while True:
        rows = np.nonzero(end - pos >= 8)[0]
        if not len(rows):
            break
        h[rows] = _rotl64(h[rows] ^ _round64(U64(0), _le(data, pos[rows], 8, U64)), 27) * _P1 + _P4
        pos[rows] += 8
    rows = np.nonzero(end - pos >= 4)[0]
    h[rows] = _rotl64(h[rows] ^ (_le(data, pos[rows], 4, U64) * _P1), 23) * _P2 + _P3
    pos[rows] += 4
    while True:
        rows = np.nonzero(end - pos >= 1)[0]
        if not len(rows):
            break
        h[rows] = _rotl64(h[rows] ^ (data[pos[rows]].astype(U64) * _P5), 11) * _P1
        pos[rows] += 1
    return np.asarray(_fmix64(h))


# --- per-type dispatch --------------------------------------------------------------------------

_INT_LIKE = (*INTEGRAL[:3], "boolean", "date")
_LONG_LIKE = ("long", "timestamp", "timestamp_ntz")


def _arrow_input(v: Val) -> tuple[Any, pa.DataType, str]:
    """(expression, Arrow type passed to the routine, how it is hashed) for one argument."""
    name = v.name
    if name in _INT_LIKE:
        return v.expr.cast(pa.int32()), pa.int32(), "int"  # true is 1; a DATE is its day number
    if name in _LONG_LIKE:
        return v.expr.cast(pa.int64()), pa.int64(), "long"
    if name == "float":
        return v.expr, pa.float32(), "float"
    if name == "double":
        return v.expr, pa.float64(), "double"
    if name in ("string", "binary"):
        return v.expr, pa.large_binary(), "bytes"
    raise Refused(f"hash of a {name or 'NULL'} value")


def _float_bits(array: pa.Array, width: int) -> np.ndarray[Any, Any]:
    """IEEE bits as Java's floatToIntBits / doubleToLongBits after Spark maps -0.0 to 0.0."""
    x = values(array, np.float32 if width == 32 else np.float64)
    x = np.where(x == 0, 0, x).astype(x.dtype)
    bits = x.view(np.int32 if width == 32 else np.int64).copy()
    bits[np.isnan(x)] = 0x7FC00000 if width == 32 else 0x7FF8000000000000
    return bits


def _hash_step(kind: str, family: str) -> Any:
    ints, longs, raw = (murmur3_ints, murmur3_longs, murmur3_bytes) if family == "murmur3" else (xxhash_ints, xxhash_longs, xxhash_bytes)
    seed_type = np.int32 if family == "murmur3" else np.int64
    unsigned = U32 if family == "murmur3" else U64

    def run(array: pa.Array, seed_array: pa.Array) -> pa.Array:
        seed = values(seed_array, seed_type).view(unsigned)
        with np.errstate(over="ignore"):
            if kind == "int":
                h = ints(values(array, np.int32), seed)
            elif kind == "long":
                h = longs(values(array, np.int64), seed)
            elif kind == "float":
                h = ints(_float_bits(array, 32), seed)
            elif kind == "double":
                h = longs(_float_bits(array, 64), seed)
            else:
                h = raw(array, seed)
        out = np.where(valid(array), h, seed).view(seed_type)
        return pa.array(out)

    return run


def hash_values(args: list[Val], family: str) -> Val:
    """``hash(a, ...)`` (INT) or ``xxhash64(a, ...)`` (BIGINT), seed 42."""
    if not args:
        raise Refused(f"{family} needs at least one argument")
    out_type = pa.int32() if family == "murmur3" else pa.int64()
    seed: Any = pc.scalar(pa.scalar(42, out_type))
    for v in args:
        if v.data_type is None:
            continue  # a NULL literal leaves the hash unchanged
        expr, arrow_type, kind = _arrow_input(v)
        seed = call_udf(f"{family}_{kind}", _hash_step(kind, family), [(expr, arrow_type), (seed, out_type)], out_type)
    return Val(seed, INT if family == "murmur3" else LONG)


# --- digests --------------------------------------------------------------------------------------

_DIGESTS = {"md5": "md5", "sha1": "sha1", "sha224": "sha224", "sha256": "sha256", "sha384": "sha384", "sha512": "sha512"}


def _digest_udf(algorithm: str) -> Any:
    def run(array: pa.Array) -> pa.Array:
        return pa.array([None if b is None else hashlib.new(algorithm, b).hexdigest() for b in array.to_pylist()], pa.string())

    return run


def _crc32(array: pa.Array) -> pa.Array:
    return pa.array([None if b is None else zlib.crc32(b) for b in array.to_pylist()], pa.int64())


def _binary(v: Val, what: str) -> Any:
    """Spark's digests take BINARY; a STRING is implicitly cast to its UTF-8 bytes."""
    if v.name not in ("string", "binary"):
        raise Refused(f"{what} of a {v.name or 'NULL'} value")
    return v.expr


def digest(v: Val, algorithm: str) -> Val:
    """``md5`` / ``sha1`` / ``sha2``: the lower-case hex digest, NULL for NULL."""
    if v.data_type is None:
        return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
    return Val(call_udf(f"digest_{algorithm}", _digest_udf(_DIGESTS[algorithm]), [(_binary(v, algorithm), pa.large_binary())], pa.string()), STRING)


def sha2(v: Val, bits: int | None) -> Val:
    """``sha2(x, bits)``: 224 / 256 (or 0) / 384 / 512; other lengths give NULL, as in Spark."""
    algorithm = {0: "sha256", 224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}.get(bits) if bits is not None else None
    if algorithm is None or v.data_type is None:
        _binary(v, "sha2") if v.data_type is not None else None
        return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
    return digest(v, algorithm)


def crc32(v: Val) -> Val:
    """``crc32(x)``: BIGINT, the unsigned CRC-32 (zlib's, as java.util.zip.CRC32)."""
    if v.data_type is None:
        return Val(pc.scalar(pa.scalar(None, pa.int64())), LONG)
    return Val(call_udf("crc32", _crc32, [(_binary(v, "crc32"), pa.large_binary())], pa.int64()), LONG)
