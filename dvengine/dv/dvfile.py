"""The on-disk DV file container (``deletion_vector_<uuid>.bin``).

Layout: one version byte ``1``; then, for each DV packed in the file: u32 **big-endian** size,
the serialized bitmap (magic included, ``size`` bytes), u32 big-endian CRC-32 of exactly those
bytes. A descriptor's ``offset`` points at the size field, so the first DV has offset 1.

Packing several DVs in one file matters: a DELETE touching thousands of data files would
otherwise create thousands of tiny objects. Readers must therefore honour offsets and must not
assume one DV per file. The big-endian framing (unlike the little-endian bitmap inside) comes
from Java's ``DataOutputStream`` in Delta Spark.
"""

from __future__ import annotations

import struct
import zlib

from dvengine.errors import DeletionVectorError

FORMAT_VERSION = 1
# Descriptor offset and sizeInBytes are Java ints (checkpoint schema "integer").
MAX_INT32 = 2**31 - 1
_FRAME_OVERHEAD = 8  # size field + CRC


class DVFileWriter:
    """Accumulates serialized bitmaps into the bytes of one DV file, in memory.

    DV files are small (Delta Spark caps them around 2 MiB), so building them in memory and
    writing once keeps the I/O edge (``store.write_dv_file``) atomic and simple.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = [bytes([FORMAT_VERSION])]
        self._length = 1

    def add(self, serialized: bytes) -> tuple[int, int]:
        """Append one serialized bitmap; return ``(offset, size_in_bytes)`` for its descriptor."""
        size = len(serialized)
        offset = self._length
        if size > MAX_INT32 or offset + size + _FRAME_OVERHEAD > MAX_INT32:
            raise DeletionVectorError(
                f"DV file would exceed {MAX_INT32} bytes (offset {offset}, DV of {size} bytes); "
                "Delta stores offsets and sizes as 32-bit ints"
            )
        self._parts.append(struct.pack(">I", size))
        self._parts.append(serialized)
        self._parts.append(struct.pack(">I", zlib.crc32(serialized)))
        self._length += size + _FRAME_OVERHEAD
        return offset, size

    def to_bytes(self) -> bytes:
        return b"".join(self._parts)


def check_version_byte(first: bytes, path_for_errors: str) -> None:
    """Raise unless ``first`` (the file's first byte) is the supported format version."""
    if len(first) < 1:
        raise DeletionVectorError(f"deletion vector file {path_for_errors} is empty; expected version byte 1")
    if first[0] != FORMAT_VERSION:
        raise DeletionVectorError(
            f"deletion vector file {path_for_errors} has format version {first[0]}, expected {FORMAT_VERSION}"
        )


def check_dv_record(record: bytes, offset: int, size_in_bytes: int, path_for_errors: str) -> bytes:
    """Validate one framed DV (size field, payload, CRC) read at ``offset``; return the payload.

    ``record`` is the bytes starting at ``offset``; it may be shorter than a full frame when the
    file is truncated, which is reported as such.
    """
    where = f"deletion vector file {path_for_errors} at offset {offset}"
    if len(record) < 4:
        raise DeletionVectorError(f"{where}: file ends before the 4-byte size field (truncated?)")
    stored_size = struct.unpack_from(">I", record)[0]
    if stored_size != size_in_bytes:
        raise DeletionVectorError(
            f"{where}: size field says {stored_size} bytes but the descriptor's sizeInBytes is {size_in_bytes}"
        )
    needed = size_in_bytes + _FRAME_OVERHEAD
    if len(record) < needed:
        raise DeletionVectorError(
            f"{where}: file ends {needed - len(record)} bytes short of the {size_in_bytes}-byte DV and its CRC (truncated?)"
        )
    payload = record[4 : 4 + size_in_bytes]
    stored_crc = struct.unpack_from(">I", record, 4 + size_in_bytes)[0]
    actual_crc = zlib.crc32(payload)
    if stored_crc != actual_crc:
        raise DeletionVectorError(
            f"{where}: CRC-32 mismatch, stored {stored_crc:#010x} but the {size_in_bytes} DV bytes hash to {actual_crc:#010x}"
        )
    return payload


def check_descriptor_range(offset: int, size_in_bytes: int, path_for_errors: str) -> None:
    """Reject offsets and sizes no valid DV file can have, before any read."""
    if offset < 1:
        raise DeletionVectorError(
            f"deletion vector in {path_for_errors} has offset {offset}; offsets start at 1 (after the version byte)"
        )
    if size_in_bytes < 4:
        raise DeletionVectorError(
            f"deletion vector in {path_for_errors} has sizeInBytes {size_in_bytes}, too small to hold the magic number"
        )


def read_dv_from_file_bytes(data: bytes, offset: int, size_in_bytes: int, path_for_errors: str) -> bytes:
    """Return the serialized bitmap stored at ``offset`` in the DV file ``data``.

    Validates the version byte, bounds, that the size field equals ``size_in_bytes`` and the CRC.
    The bitmap itself (magic, structure) is validated by ``bitmap.deserialize_bitmap``.
    """
    check_version_byte(data[:1], path_for_errors)
    check_descriptor_range(offset, size_in_bytes, path_for_errors)
    if offset >= len(data):
        raise DeletionVectorError(
            f"deletion vector file {path_for_errors} is {len(data)} bytes, offset {offset} is beyond its end"
        )
    return check_dv_record(
        data[offset : offset + size_in_bytes + _FRAME_OVERHEAD], offset, size_in_bytes, path_for_errors
    )
