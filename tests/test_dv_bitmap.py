"""The serialized DV bitmap against an independent, hand-written portable Roaring codec.

``parse_dv_bitmap`` / ``encode_dv_bitmap`` below follow the Roaring format spec
(github.com/RoaringBitmap/RoaringFormatSpec) and the 64-bit portable extension, written from the
spec and not from pyroaring, so a pyroaring or wrapper bug shows up as a disagreement.
"""

from __future__ import annotations

import struct

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64

from dvengine.dv.bitmap import MAGIC, bitmap_from_row_indexes, deserialize_bitmap, serialize_bitmap
from dvengine.errors import DeletionVectorError

U64 = npt.NDArray[np.uint64]

SERIAL_COOKIE_NO_RUNCONTAINER = 12346
SERIAL_COOKIE = 12347
NO_OFFSET_THRESHOLD = 4
ARRAY_MAX = 4096

# --- independent reference codec -----------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"truncated: need {n} bytes at {self.pos}, have {len(self.data) - self.pos}")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u16s(self, n: int) -> npt.NDArray[np.uint16]:
        return np.frombuffer(self.take(2 * n), dtype="<u2")

    def u32(self) -> int:
        return int(struct.unpack("<I", self.take(4))[0])


def _parse_roaring32(r: _Reader) -> npt.NDArray[np.uint32]:
    """One standard 32-bit portable Roaring bitmap starting at ``r.pos``; advances past it."""
    start = r.pos
    cookie = r.u32()
    if cookie & 0xFFFF == SERIAL_COOKIE:
        size = (cookie >> 16) + 1
        run_flags = np.unpackbits(np.frombuffer(r.take((size + 7) // 8), dtype=np.uint8), bitorder="little")[:size]
        has_offsets = size >= NO_OFFSET_THRESHOLD
    elif cookie == SERIAL_COOKIE_NO_RUNCONTAINER:
        size = r.u32()
        run_flags = np.zeros(size, dtype=np.uint8)
        has_offsets = True
    else:
        raise ValueError(f"bad cookie {cookie}")
    header = r.u16s(2 * size).reshape(-1, 2) if size else np.zeros((0, 2), dtype=np.uint16)
    keys = header[:, 0].astype(np.uint32)
    cards = header[:, 1].astype(np.int64) + 1
    offsets = np.frombuffer(r.take(4 * size), dtype="<u4") if has_offsets else None
    parts = []
    for i in range(size):
        if offsets is not None:
            assert start + int(offsets[i]) == r.pos, "offset header disagrees with the container position"
        if run_flags[i]:
            n_runs = int(r.u16s(1)[0])
            runs = r.u16s(2 * n_runs).reshape(-1, 2).astype(np.int64)
            lows = np.concatenate([np.arange(s, s + ln + 1) for s, ln in runs]) if n_runs else np.zeros(0, np.int64)
        elif cards[i] > ARRAY_MAX:
            words = np.frombuffer(r.take(8192), dtype=np.uint8)
            lows = np.flatnonzero(np.unpackbits(words, bitorder="little"))
        else:
            lows = r.u16s(int(cards[i])).astype(np.int64)
        assert len(lows) == cards[i], f"container {i}: header cardinality {cards[i]}, content {len(lows)}"
        parts.append((keys[i] << np.uint32(16)) | lows.astype(np.uint32))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint32)


def parse_dv_bitmap(data: bytes) -> U64:
    """Row indexes of a serialized DV (magic + 64-bit portable Roaring), sorted; rejects trailing bytes."""
    r = _Reader(data)
    assert r.u32() == MAGIC
    n_buckets = struct.unpack("<Q", r.take(8))[0]
    out = []
    previous_high = -1
    for _ in range(n_buckets):
        high = r.u32()
        assert high > previous_high, "high keys must be strictly increasing"
        previous_high = high
        out.append((np.uint64(high) << np.uint64(32)) | _parse_roaring32(r).astype(np.uint64))
    assert r.pos == len(data), f"{len(data) - r.pos} trailing bytes"
    return np.concatenate(out) if out else np.zeros(0, dtype=np.uint64)


def encode_dv_bitmap(rows: U64) -> bytes:
    """Serialize sorted unique row indexes with array and bitmap containers only (no runs)."""
    rows = np.unique(rows.astype(np.uint64))
    highs = (rows >> np.uint64(32)).astype(np.uint32)
    out = [struct.pack("<I", MAGIC)]
    unique_highs = np.unique(highs)
    out.append(struct.pack("<Q", len(unique_highs)))
    for high in unique_highs:
        low32 = (rows[highs == high] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        keys = np.unique(low32 >> np.uint32(16))
        containers = []
        for key in keys:
            lows = (low32[(low32 >> np.uint32(16)) == key] & np.uint32(0xFFFF)).astype(np.uint16)
            if len(lows) > ARRAY_MAX:
                bits = np.zeros(65536, dtype=np.uint8)
                bits[lows] = 1
                body = np.packbits(bits, bitorder="little").tobytes()
            else:
                body = lows.astype("<u2").tobytes()
            containers.append((int(key), len(lows), body))
        n = len(containers)
        head = struct.pack("<II", SERIAL_COOKIE_NO_RUNCONTAINER, n)
        head += b"".join(struct.pack("<HH", k, c - 1) for k, c, _ in containers)
        position = len(head) + 4 * n
        offsets = []
        for _, _, body in containers:
            offsets.append(position)
            position += len(body)
        out.append(struct.pack("<I", int(high)) + head + struct.pack(f"<{n}I", *offsets))
        out.extend(body for _, _, body in containers)
    return b"".join(out)


# --- strategies ------------------------------------------------------------------------------------

MAX_KEY = 2**40


@st.composite
def row_sets(draw: st.DrawFn) -> U64:
    """Unions of: sparse points up to 2**40, dense ranges (run containers), random dense chunks
    (bitmap containers), and sparse high keys up to 2**63 - 1."""
    parts: list[U64] = []
    for kind in draw(st.lists(st.sampled_from(["points", "range", "dense", "high"]), min_size=1, max_size=5)):
        if kind == "points":
            parts.append(np.array(draw(st.lists(st.integers(0, MAX_KEY), max_size=200)), dtype=np.uint64))
        elif kind == "range":
            start = draw(st.integers(0, MAX_KEY))
            length = draw(st.integers(1, 200_000))
            parts.append(np.arange(start, start + length, dtype=np.uint64))
        elif kind == "dense":
            base = draw(st.integers(0, MAX_KEY >> 16)) << 16
            rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
            density = draw(st.sampled_from([0.02, 0.1, 0.5, 0.9]))
            parts.append(base + np.flatnonzero(rng.random(65536) < density).astype(np.uint64))
        else:
            parts.append(np.array(draw(st.lists(st.integers(2**32, 2**63 - 1), max_size=20)), dtype=np.uint64))
    return np.unique(np.concatenate(parts))


# --- tests ---------------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(row_sets())
def test_serialize_matches_independent_parser(rows: U64) -> None:
    bitmap = bitmap_from_row_indexes(rows)
    assert len(bitmap) == len(rows)
    data = serialize_bitmap(bitmap)
    assert data[:4] == bytes.fromhex("d1d33964")
    np.testing.assert_array_equal(parse_dv_bitmap(data), rows)
    assert deserialize_bitmap(data) == bitmap


@settings(max_examples=150, deadline=None)
@given(row_sets())
def test_deserialize_bytes_from_independent_encoder(rows: U64) -> None:
    data = encode_dv_bitmap(rows)
    np.testing.assert_array_equal(parse_dv_bitmap(data), rows)  # the reference pair agrees with itself
    decoded = deserialize_bitmap(data)
    np.testing.assert_array_equal(np.array(decoded.to_array(), dtype=np.uint64), rows)


def test_run_containers_are_used_for_ranges() -> None:
    rows = np.arange(1000, 1_001_000, dtype=np.uint64)
    data = serialize_bitmap(bitmap_from_row_indexes(rows))
    # one bucket, 16 containers of runs: far smaller than 1M rows' worth of arrays or bitmaps
    assert len(data) < 300
    assert struct.unpack_from("<I", data, 4 + 8 + 4)[0] & 0xFFFF == SERIAL_COOKIE
    np.testing.assert_array_equal(parse_dv_bitmap(data), rows)


def test_serialize_does_not_mutate_input() -> None:
    bitmap = BitMap64(range(100_000))
    before = bitmap.serialize()
    serialize_bitmap(bitmap)
    assert bitmap.serialize() == before


def test_known_bytes_of_golden_dv() -> None:
    # The payload of basic-dv-no-checkpoint's DV (rows 0 and 1), as written by Delta Spark 2.4.
    golden = bytes.fromhex("d1d339640100000000000000000000003a30000001000000000001001000000000000100")
    assert deserialize_bitmap(golden) == BitMap64([0, 1])
    np.testing.assert_array_equal(parse_dv_bitmap(golden), [0, 1])
    assert serialize_bitmap(BitMap64([0, 1])) == golden


def test_large_dv_of_array_containers_matches_the_reference_codec() -> None:
    # 3M rows, every 30th: ~2185 per 65536-row chunk, so array containers (the costliest to parse).
    # Its speed is measured by the bench (python -m dvengine.bench.dv_codec), not here.
    rows = np.arange(0, 90_000_000, 30, dtype=np.uint64)
    bitmap = bitmap_from_row_indexes(rows)
    data = serialize_bitmap(bitmap)
    np.testing.assert_array_equal(parse_dv_bitmap(data), rows)
    assert deserialize_bitmap(data) == bitmap


def test_empty_bitmap_round_trips() -> None:
    data = serialize_bitmap(BitMap64())
    assert data == struct.pack("<IQ", MAGIC, 0)
    assert len(deserialize_bitmap(data)) == 0


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "too short"),
        (b"\xd1\xd3\x39", "too short"),
        (struct.pack("<IQ", MAGIC + 1, 0), "magic"),
        (struct.pack("<IQ", 1681511376, 0), "magic"),  # the 'native' RoaringBitmapArray magic
        (struct.pack("<I", MAGIC) + b"\x01\x00", "bucket count"),
        (struct.pack("<IQ", MAGIC, 1), "not a valid"),  # claims a bucket that is not there
        (struct.pack("<IQI", MAGIC, 1, 0) + b"\xff" * 12, "not a valid"),  # bad cookie
    ],
)
def test_malformed_bytes_raise(data: bytes, match: str) -> None:
    with pytest.raises(DeletionVectorError, match=match):
        deserialize_bitmap(data)


def test_truncated_payload_raises_at_every_length() -> None:
    data = serialize_bitmap(BitMap64([1, 70_000, 2**33, 2**40 + 5]))
    for cut in range(len(data)):
        with pytest.raises(DeletionVectorError):
            deserialize_bitmap(data[:cut])


def test_row_index_with_top_bit_set_is_rejected() -> None:
    with pytest.raises(DeletionVectorError, match="2\\*\\*63"):
        serialize_bitmap(BitMap64([2**63]))
    crafted = encode_dv_bitmap(np.array([2**63 + 3], dtype=np.uint64))
    with pytest.raises(DeletionVectorError, match="2\\*\\*63"):
        deserialize_bitmap(crafted)


def test_bitmap_from_row_indexes_rejects_bad_input() -> None:
    with pytest.raises(DeletionVectorError, match=">= 0"):
        bitmap_from_row_indexes(np.array([3, -1]))
    with pytest.raises(DeletionVectorError, match="integers"):
        bitmap_from_row_indexes(np.array([1.5]))
    assert bitmap_from_row_indexes(np.array([], dtype=np.int64)) == BitMap64()
    assert bitmap_from_row_indexes([5, 3, 5]) == BitMap64([3, 5])


@pytest.mark.parametrize("rows_count", [0, 1, 50, 5_000, 200_000])
@pytest.mark.parametrize("deleted_count", [0, 1, 40_000])
def test_outside_equals_isin_truth(rows_count: int, deleted_count: int) -> None:
    """``outside`` (few rows: intersect with the DV; many: test against the whole DV) gives the
    mask a plain ``np.isin`` over the DV's rows gives, with repeats and any order."""
    from dvengine.dv import outside

    rng = np.random.default_rng(rows_count * 7 + deleted_count)
    deleted = np.unique(rng.integers(0, 1_000_000, deleted_count))
    rows = rng.integers(0, 1_000_000, rows_count)
    if rows_count and deleted_count:  # make sure some rows are deleted ones, some repeated
        rows[: min(rows_count, 10)] = deleted[: min(rows_count, 10, len(deleted))][0]
    bitmap = bitmap_from_row_indexes(deleted)
    got = outside(rows.astype(np.int64), bitmap)
    assert got.dtype == np.bool_ and got.shape == rows.shape
    assert np.array_equal(got, ~np.isin(rows, deleted))
