"""Every kind of DV corruption is detected and reported as DeletionVectorError.

Corruptions are applied to copies of the golden basic-dv-no-checkpoint DV (written by Delta
Spark) and to a two-DV file of our own, so both a foreign and a packed file are covered.
"""

from __future__ import annotations

import dataclasses
import os
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
from pyroaring import BitMap64

from dvengine.dv import (
    absolute_dv_path,
    inline_descriptor,
    load_deletion_vector,
    read_dv_from_file_bytes,
    serialize_bitmap,
    write_dv_file,
    z85_encode,
)
from dvengine.errors import DeletionVectorError
from dvengine.protocol.actions import DeletionVectorDescriptor

GOLDEN_DV = DeletionVectorDescriptor("u", "IjB3V2d3#qUP%s94R0WF", 36, 2, 1)
GOLDEN_FILE = "deletion_vector_899cef78-06b3-4c14-b024-03860e62cd40.bin"


@pytest.fixture
def golden_table(golden_copy: Callable[[str], Path]) -> Path:
    return golden_copy("basic-dv-no-checkpoint")


def _mutate(path: Path, edit: Callable[[bytearray], bytearray]) -> None:
    path.write_bytes(bytes(edit(bytearray(path.read_bytes()))))


def _flip(pos: int) -> Callable[[bytearray], bytearray]:
    def edit(b: bytearray) -> bytearray:
        b[pos] ^= 0x01
        return b

    return edit


# positions in the golden file: 0 version, 1..4 size, 5..8 magic, 9..40 roaring, 41..44 CRC
@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (_flip(0), "format version 0, expected 1"),
        (_flip(4), "size field says 37 bytes but the descriptor's sizeInBytes is 36"),
        (_flip(7), "CRC-32 mismatch"),  # inside the magic: the CRC catches it first
        (_flip(20), "CRC-32 mismatch"),  # inside the Roaring payload
        (_flip(42), "CRC-32 mismatch"),  # the CRC itself
        (lambda b: b[:30], "truncated"),
        (lambda b: b[:43], "truncated"),
        (lambda b: b[:3], "before the 4-byte size field"),
        (lambda b: bytearray(), "empty"),
    ],
    ids=["version", "size", "magic", "payload", "crc", "truncated-payload", "truncated-crc", "truncated-size", "empty"],
)
def test_file_corruptions(golden_table: Path, edit: Callable[[bytearray], bytearray], match: str) -> None:
    path = golden_table / GOLDEN_FILE
    assert load_deletion_vector(str(golden_table), GOLDEN_DV) == BitMap64([0, 1])
    _mutate(path, edit)
    with pytest.raises(DeletionVectorError, match=match) as info:
        load_deletion_vector(str(golden_table), GOLDEN_DV)
    assert GOLDEN_FILE in str(info.value), "message names the DV file"


def test_bad_magic_with_valid_crc(golden_table: Path) -> None:
    """A writer bug (wrong magic but consistent CRC) is caught by the bitmap check."""
    path = golden_table / GOLDEN_FILE
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF
    data[41:45] = struct.pack(">I", zlib.crc32(bytes(data[5:41])))
    path.write_bytes(bytes(data))
    with pytest.raises(DeletionVectorError, match="magic"):
        load_deletion_vector(str(golden_table), GOLDEN_DV)


def test_garbage_roaring_with_valid_crc(golden_table: Path) -> None:
    path = golden_table / GOLDEN_FILE
    data = bytearray(path.read_bytes())
    data[21:29] = b"\xff" * 8  # the 32-bit cookie and container count
    data[41:45] = struct.pack(">I", zlib.crc32(bytes(data[5:41])))
    path.write_bytes(bytes(data))
    with pytest.raises(DeletionVectorError, match="not a valid portable Roaring"):
        load_deletion_vector(str(golden_table), GOLDEN_DV)


def test_missing_file(golden_table: Path) -> None:
    os.unlink(golden_table / GOLDEN_FILE)
    with pytest.raises(DeletionVectorError, match="does not exist") as info:
        load_deletion_vector(str(golden_table), GOLDEN_DV)
    assert GOLDEN_FILE in str(info.value)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"cardinality": 3}, "cardinality 3 but the bitmap holds 2"),
        ({"size_in_bytes": 35}, "size field says 36 bytes but the descriptor's sizeInBytes is 35"),
        ({"offset": 2}, "size field says"),
        ({"offset": 45}, "before the 4-byte size field"),
        ({"offset": 0}, "offsets start at 1"),
        ({"size_in_bytes": 2}, "too small"),
        ({"path_or_inline_dv": "IjB3V2d3#qUP%s94R0WG"}, "does not exist"),
        ({"path_or_inline_dv": "IjB3V2d3#qUP%s94R0W"}, "20-character Z85 UUID"),
        ({"path_or_inline_dv": "IjB3V2d3#qUP%s94R0W~"}, "outside the Z85 alphabet"),
    ],
)
def test_descriptor_disagreeing_with_file(golden_table: Path, change: dict[str, object], match: str) -> None:
    dv = dataclasses.replace(GOLDEN_DV, **change)  # type: ignore[arg-type]
    with pytest.raises(DeletionVectorError, match=match):
        load_deletion_vector(str(golden_table), dv)


def test_row_index_beyond_num_records(golden_table: Path) -> None:
    assert load_deletion_vector(str(golden_table), GOLDEN_DV, num_records=2) == BitMap64([0, 1])
    with pytest.raises(DeletionVectorError, match="row index 1 but the data file has only 1 rows"):
        load_deletion_vector(str(golden_table), GOLDEN_DV, num_records=1)


def test_second_dv_in_packed_file_corrupted(tmp_path: Path) -> None:
    first, second = BitMap64([1, 2, 3]), BitMap64(range(100, 5000))
    d1, d2 = write_dv_file(str(tmp_path), [first, second])
    path = Path(absolute_dv_path(str(tmp_path), d2))
    assert d2.offset is not None
    _mutate(path, _flip(d2.offset + 4 + 10))
    assert load_deletion_vector(str(tmp_path), d1) == first, "the first DV is intact"
    with pytest.raises(DeletionVectorError, match=f"at offset {d2.offset}: CRC-32 mismatch"):
        load_deletion_vector(str(tmp_path), d2)


# --- inline -----------------------------------------------------------------------------------


def test_inline_size_disagreeing_with_text() -> None:
    good = inline_descriptor(BitMap64([1, 2, 3]))
    for wrong in (good.size_in_bytes + 4, good.size_in_bytes - 4, 0):
        with pytest.raises(DeletionVectorError, match="sizeInBytes"):
            load_deletion_vector("/t", dataclasses.replace(good, size_in_bytes=wrong))
    # a size inside the last (padded) group passes the Z85 check, but truncates the bitmap
    with pytest.raises(DeletionVectorError):
        load_deletion_vector("/t", dataclasses.replace(good, size_in_bytes=good.size_in_bytes - 1))


def test_inline_bad_chars_and_cardinality() -> None:
    good = inline_descriptor(BitMap64([1, 2, 3]))
    bad_text = good.path_or_inline_dv[:-1] + "~"
    with pytest.raises(DeletionVectorError, match="outside the Z85 alphabet"):
        load_deletion_vector("/t", dataclasses.replace(good, path_or_inline_dv=bad_text))
    with pytest.raises(DeletionVectorError, match="cardinality 4 but the bitmap holds 3"):
        load_deletion_vector("/t", dataclasses.replace(good, cardinality=4))
    with pytest.raises(DeletionVectorError, match="only 3 rows"):
        load_deletion_vector("/t", good, num_records=3)


def test_inline_wrong_magic() -> None:
    payload = bytearray(serialize_bitmap(BitMap64([7])))
    payload[0] ^= 0xFF
    dv = DeletionVectorDescriptor("i", z85_encode(bytes(payload)), len(payload), 1)
    with pytest.raises(DeletionVectorError, match="magic"):
        load_deletion_vector("/t", dv)


def test_read_dv_from_file_bytes_bounds() -> None:
    data = b"\x01" + struct.pack(">I", 12) + serialize_bitmap(BitMap64()) + b"\x00\x00\x00\x00"
    with pytest.raises(DeletionVectorError, match="beyond its end"):
        read_dv_from_file_bytes(data, 100, 12, "f.bin")
    with pytest.raises(DeletionVectorError, match="CRC"):
        read_dv_from_file_bytes(data, 1, 12, "f.bin")
    with pytest.raises(DeletionVectorError, match="format version 2"):
        read_dv_from_file_bytes(b"\x02" + data[1:], 1, 12, "f.bin")
