"""Writing and reading DVs through files and inline descriptors, with several DVs per file.

Files written here are re-parsed by hand (version byte, big-endian framing, zlib CRC) and the
bitmaps by the independent Roaring parser of test_dv_bitmap, so the writer is not only checked
against its own reader.
"""

from __future__ import annotations

import os
import re
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyroaring import BitMap64
from test_dv_bitmap import U64, parse_dv_bitmap, row_sets

from dvengine.dv import (
    DVFileWriter,
    absolute_dv_path,
    bitmap_from_row_indexes,
    dv_file_relative_path,
    encode_deletion_vectors,
    inline_descriptor,
    load_deletion_vector,
    new_dv_file_id,
    read_dv_from_file_bytes,
    serialize_bitmap,
    write_dv_file,
    z85_decode,
)
from dvengine.errors import DeletionVectorError
from dvengine.protocol.actions import DeletionVectorDescriptor

NON_EMPTY_ROWS = row_sets().filter(lambda rows: len(rows) > 0)


def _hand_parse_file(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, payload) of every frame, walking the file from the start."""
    assert data[0] == 1
    out = []
    pos = 1
    while pos < len(data):
        (size,) = struct.unpack_from(">I", data, pos)
        payload = data[pos + 4 : pos + 4 + size]
        (crc,) = struct.unpack_from(">I", data, pos + 4 + size)
        assert crc == zlib.crc32(payload)
        out.append((pos, payload))
        pos += 8 + size
    assert pos == len(data)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NON_EMPTY_ROWS, min_size=1, max_size=5), st.integers(0, 3))
def test_file_round_trip_many_per_file(tmp_path: Path, row_lists: list[U64], prefix_len: int) -> None:
    bitmaps = [bitmap_from_row_indexes(r) for r in row_lists]
    root = tmp_path / f"t{uuid.uuid4().hex}"
    descriptors = write_dv_file(str(root), bitmaps, random_prefix_len=prefix_len)
    assert len(descriptors) == len(bitmaps)
    assert len({d.path_or_inline_dv for d in descriptors}) == 1, "one file for all"
    assert len({d.unique_id for d in descriptors}) == len(bitmaps)
    files = [p for p in root.rglob("*") if p.is_file()]
    assert len(files) == 1, "exactly one file, no temp left behind"
    frames = _hand_parse_file(files[0].read_bytes())
    assert [d.offset for d in descriptors] == [off for off, _ in frames]
    assert descriptors[0].offset == 1
    for d, rows, bm, (_, payload) in zip(descriptors, row_lists, bitmaps, frames, strict=True):
        assert d.storage_type == "u" and d.size_in_bytes == len(payload) and d.cardinality == len(rows)
        np.testing.assert_array_equal(parse_dv_bitmap(payload), rows)
        assert load_deletion_vector(str(root), d, num_records=int(rows.max()) + 1) == bm
    prefix = descriptors[0].path_or_inline_dv[:-20]
    assert len(prefix) == prefix_len
    assert files[0].relative_to(root).as_posix() == (f"{prefix}/" if prefix else "") + files[0].name


@settings(max_examples=60, deadline=None)
@given(row_sets())
def test_inline_round_trip(rows: U64) -> None:
    bm = bitmap_from_row_indexes(rows)
    d = inline_descriptor(bm)
    assert d.storage_type == "i" and d.offset is None and d.cardinality == len(rows)
    raw = z85_decode(d.path_or_inline_dv, d.size_in_bytes)
    assert raw == serialize_bitmap(bm)
    np.testing.assert_array_equal(parse_dv_bitmap(raw), rows)
    assert load_deletion_vector("/nonexistent-table-root", d) == bm


def test_encode_mixes_inline_and_file(tmp_path: Path) -> None:
    small = BitMap64([3, 7])
    big = BitMap64(range(0, 200_000, 3))
    big2 = BitMap64(range(1, 300_000, 7))
    descriptors = encode_deletion_vectors(str(tmp_path), [big, small, big2], inline_max_bytes=64)
    assert [d.storage_type for d in descriptors] == ["u", "i", "u"]
    assert descriptors[0].path_or_inline_dv == descriptors[2].path_or_inline_dv
    assert descriptors[0].offset == 1 and descriptors[2].offset == 1 + 8 + descriptors[0].size_in_bytes
    assert len(list(tmp_path.iterdir())) == 1
    for d, bm in zip(descriptors, [big, small, big2], strict=True):
        assert load_deletion_vector(str(tmp_path), d) == bm


def test_encode_all_inline_writes_nothing(tmp_path: Path) -> None:
    descriptors = encode_deletion_vectors(str(tmp_path), [BitMap64([1]), BitMap64(range(1000))], inline_max_bytes=1000)
    assert [d.storage_type for d in descriptors] == ["i", "i"]
    assert list(tmp_path.iterdir()) == []


def test_encode_inline_threshold_is_inclusive(tmp_path: Path) -> None:
    bm = BitMap64([1, 2, 3])
    size = len(serialize_bitmap(bm))
    assert encode_deletion_vectors(str(tmp_path), [bm], inline_max_bytes=size)[0].storage_type == "i"
    assert encode_deletion_vectors(str(tmp_path), [bm], inline_max_bytes=size - 1)[0].storage_type == "u"


def test_empty_bitmaps_are_refused(tmp_path: Path) -> None:
    with pytest.raises(DeletionVectorError, match="empty"):
        encode_deletion_vectors(str(tmp_path), [BitMap64([1]), BitMap64()], inline_max_bytes=100)
    with pytest.raises(DeletionVectorError, match="empty"):
        write_dv_file(str(tmp_path), [BitMap64()])
    assert list(tmp_path.iterdir()) == []
    assert write_dv_file(str(tmp_path), []) == []


def test_new_dv_file_id_and_paths() -> None:
    encoded, relative = new_dv_file_id()
    assert len(encoded) == 20
    assert re.fullmatch(r"deletion_vector_[0-9a-f-]{36}\.bin", relative)
    assert dv_file_relative_path(encoded) == relative
    encoded, relative = new_dv_file_id(random_prefix_len=2)
    assert len(encoded) == 22 and encoded[:2].isalnum()
    assert relative == f"{encoded[:2]}/deletion_vector_{uuid.UUID(bytes=z85_decode(encoded[2:]))}.bin"
    assert dv_file_relative_path(encoded) == relative
    assert len({new_dv_file_id()[0] for _ in range(100)}) == 100


def test_absolute_path_of_p_descriptor(tmp_path: Path) -> None:
    target = tmp_path / "dir with space" / "my dv.bin"
    target.parent.mkdir()
    bm = BitMap64([5, 6, 9])
    writer = DVFileWriter()
    offset, size = writer.add(serialize_bitmap(bm))
    target.write_bytes(writer.to_bytes())
    uri = "file://" + str(target).replace(" ", "%20")
    d = DeletionVectorDescriptor("p", uri, size, 3, offset)
    assert absolute_dv_path("/other/table", d) == str(target)
    assert load_deletion_vector("/other/table", d, num_records=10) == bm


def test_absolute_path_rejects_inline_and_unserved_schemes() -> None:
    with pytest.raises(DeletionVectorError, match="inline"):
        absolute_dv_path("/t", inline_descriptor(BitMap64([1])))
    with pytest.raises(DeletionVectorError, match="scheme"):
        absolute_dv_path("/t", DeletionVectorDescriptor("p", "hdfs://nn/dv.bin", 10, 1, 1))
    # object-store URIs are served by the storage layer: s3a:// spelled canonically as s3://
    assert absolute_dv_path("/t", DeletionVectorDescriptor("p", "s3a://bucket/d%20v.bin", 10, 1, 1)) == "s3://bucket/d v.bin"


def test_missing_offset_means_first_dv(tmp_path: Path) -> None:
    bm = BitMap64([1, 4])
    (d,) = write_dv_file(str(tmp_path), [bm])
    no_offset = DeletionVectorDescriptor("u", d.path_or_inline_dv, d.size_in_bytes, d.cardinality, None)
    assert load_deletion_vector(str(tmp_path), no_offset) == bm


def test_read_dv_from_file_bytes_honours_offsets() -> None:
    writer = DVFileWriter()
    payloads = [serialize_bitmap(BitMap64(range(i, i + 10 * (i + 1)))) for i in range(4)]
    locations = [writer.add(p) for p in payloads]
    data = writer.to_bytes()
    assert locations[0][0] == 1
    for (offset, size), payload in zip(locations, payloads, strict=True):
        assert read_dv_from_file_bytes(data, offset, size, "x.bin") == payload


def test_written_file_is_atomic_and_clean(tmp_path: Path) -> None:
    descriptors = write_dv_file(str(tmp_path), [BitMap64([1])], random_prefix_len=3)
    path = absolute_dv_path(str(tmp_path), descriptors[0])
    assert os.path.isfile(path)
    assert [p.name for p in Path(path).parent.iterdir()] == [os.path.basename(path)]


def test_executor_entry_points_pickle_by_reference() -> None:
    """Spark ships these to executors: they must pickle as module-level functions."""
    import pickle

    from dvengine import dv

    for name in (
        "load_deletion_vector",
        "write_dv_file",
        "encode_deletion_vectors",
        "serialize_bitmap",
        "deserialize_bitmap",
    ):
        fn = getattr(dv, name)
        assert pickle.loads(pickle.dumps(fn)) is fn
    bm = BitMap64([1, 2**40])
    assert pickle.loads(pickle.dumps(bm)) == bm
    d = inline_descriptor(bm)
    assert pickle.loads(pickle.dumps(d)) == d
