"""LocalStorage.read_bytes reads whole files through raw descriptors (commit races read every
winner's commit): the bytes equal what Python's buffered file read gives, at every size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dvengine.storage.local import LocalStorage


@pytest.mark.parametrize("size", [0, 1, 2_000, (1 << 20) + 7, (3 << 20) + 1])
def test_read_bytes_returns_the_whole_file(tmp_path: Path, size: int) -> None:
    path = tmp_path / "f.bin"
    data = os.urandom(size)
    path.write_bytes(data)
    assert LocalStorage().read_bytes(str(path)) == data


def test_read_bytes_of_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    # the commit loop reads the next version this way: "not found" means nobody committed it
    with pytest.raises(FileNotFoundError):
        LocalStorage().read_bytes(str(tmp_path / "00000000000000000007.json"))
