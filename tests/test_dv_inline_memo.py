"""The memo of decoded inline DVs (dv/store.py): a hit must be exactly what decoding returns.

The truth is the independent Roaring parser of test_dv_bitmap applied to the Z85-decoded text,
so a memo that returned another DV's rows (a wrong key) or a bitmap a caller had mutated fails.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from pyroaring import BitMap64
from test_dv_bitmap import parse_dv_bitmap

from dvengine.dv import encode_deletion_vectors, load_deletion_vector, z85_decode
from dvengine.dv import store as dv_store
from dvengine.errors import DeletionVectorError


def _rows(seed: int, n: int = 300) -> BitMap64:
    return BitMap64(np.random.default_rng(seed).choice(100_000, n, replace=False).tolist())


def _truth(descriptor: object) -> list[int]:
    return sorted(parse_dv_bitmap(z85_decode(descriptor.path_or_inline_dv, descriptor.size_in_bytes)))  # type: ignore[attr-defined]


def test_hits_equal_a_fresh_decode_and_are_private_copies(tmp_path: object) -> None:
    bitmaps = [_rows(1), _rows(2)]
    descriptors = encode_deletion_vectors(str(tmp_path), bitmaps, inline_max_bytes=4096)
    assert all(d.is_inline for d in descriptors)
    for d in descriptors:  # seeded by the encode: served from the memo
        assert dv_store._decoded_inline(dv_store._inline_key(d)) is not None
    for bitmap, d in zip(bitmaps, descriptors, strict=True):
        first = load_deletion_vector(str(tmp_path), d, num_records=100_000)
        assert sorted(first) == _truth(d) == sorted(bitmap)
        first.add(99_999_999)  # a caller mutating its copy must not change what others get
        bitmap.add(88_888_888)  # nor the caller that encoded it
        assert sorted(load_deletion_vector(str(tmp_path), d, num_records=100_000)) == _truth(d)


def test_a_hit_still_checks_the_row_bound(tmp_path: object) -> None:
    (d,) = encode_deletion_vectors(str(tmp_path), [BitMap64([5, 70_000])], inline_max_bytes=4096)
    load_deletion_vector(str(tmp_path), d, num_records=70_001)
    with pytest.raises(DeletionVectorError, match="only 100 rows"):
        load_deletion_vector(str(tmp_path), d, num_records=100)


def test_a_wrong_cardinality_is_never_served_from_the_memo(tmp_path: object) -> None:
    (d,) = encode_deletion_vectors(str(tmp_path), [_rows(3)], inline_max_bytes=4096)
    load_deletion_vector(str(tmp_path), d)
    with pytest.raises(DeletionVectorError, match="cardinality"):
        load_deletion_vector(str(tmp_path), replace(d, cardinality=d.cardinality + 1))


def test_misses_decode_and_the_memo_stays_bounded(tmp_path: object) -> None:
    dv_store._INLINE_MEMO.clear()
    descriptors = [encode_deletion_vectors(str(tmp_path), [_rows(10 + i, 20)], inline_max_bytes=4096)[0] for i in range(100)]
    assert len(dv_store._INLINE_MEMO) == dv_store._INLINE_MEMO_ENTRIES
    dv_store._INLINE_MEMO.clear()  # every load below is a miss: decoded from the text
    for d in descriptors:
        assert sorted(load_deletion_vector(str(tmp_path), d)) == _truth(d)
    assert len(dv_store._INLINE_MEMO) == dv_store._INLINE_MEMO_ENTRIES
