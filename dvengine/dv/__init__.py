"""Deletion-vector codec: Z85, portable Roaring bitmaps, DV files, descriptors and local I/O.

Pure Python on top of pyroaring (no pyspark); the functions are top-level and picklable so the
Spark engine can run them on executors.
"""

from __future__ import annotations

from dvengine.dv.bitmap import MAGIC, bitmap_from_row_indexes, deserialize_bitmap, outside, serialize_bitmap
from dvengine.dv.descriptor import (
    absolute_dv_path,
    dv_file_relative_path,
    inline_descriptor,
    inline_descriptor_from_serialized,
    new_dv_file_id,
)
from dvengine.dv.dvfile import FORMAT_VERSION, DVFileWriter, read_dv_from_file_bytes
from dvengine.dv.store import encode_deletion_vectors, load_deletion_vector, write_dv_file
from dvengine.dv.z85 import z85_decode, z85_encode

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "DVFileWriter",
    "absolute_dv_path",
    "bitmap_from_row_indexes",
    "deserialize_bitmap",
    "dv_file_relative_path",
    "encode_deletion_vectors",
    "inline_descriptor",
    "inline_descriptor_from_serialized",
    "load_deletion_vector",
    "new_dv_file_id",
    "outside",
    "read_dv_from_file_bytes",
    "serialize_bitmap",
    "write_dv_file",
    "z85_decode",
    "z85_encode",
]
