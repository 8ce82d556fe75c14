"""Cold snapshot loads that start from ``_last_checkpoint`` instead of listing the whole log
(dvengine/log/loader._latest_from_hint, listing.probe_log_from / list_log_from), and the
column-wise checkpoint row conversion (checkpoint_reader._struct_rows).

Truth: the listing-based replay of the same log (which test_log_golden checks against delta-rs),
delta-rs's own version and file list, and pyarrow's ``to_pylist`` for the row conversion.
"""

from __future__ import annotations

import dataclasses
import glob
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from dml_helpers import count_log_listings

import dvengine
from dvengine import DeltaTable
from dvengine.log import Snapshot, clear_snapshot_cache, load_snapshot, loader
from dvengine.log.checkpoint_reader import ACTION_COLUMNS, _struct_rows
from dvengine.log.listing import list_log
from dvengine.storage.registry import storage_for

GOLDEN_CHECKPOINT = "/work/shared/golden/tables/dv-partitioned-with-checkpoint/_delta_log/00000000000000000010.checkpoint.parquet"


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    clear_snapshot_cache()
    yield
    clear_snapshot_cache()


def _rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "p": pa.array([i % 2 for i in ids], pa.int64())})


def _table(root: str, commits: int) -> None:
    """A partitioned DV table with a checkpoint every 3 versions, appends and DV deletes."""
    dvengine.write(_rows(list(range(40))), root, partitionBy=["p"],
                   configuration={"delta.checkpointInterval": "3", "delta.enableDeletionVectors": "true"})
    for v in range(1, commits):
        if v % 2:
            dvengine.write(_rows([1000 + v]), root, mode="append")
        else:
            DeltaTable.forPath(None, root).delete(f"id = {v}", mode="dv")
    dvengine.wait_for_checkpoints()  # written on a background thread
    clear_snapshot_cache()


def _state(s: Snapshot) -> tuple[Any, ...]:
    files = tuple(dataclasses.replace(f, data_change=True) for f in s.files)  # checkpoints store false
    return (s.version, s.protocol, s.metadata, files, dict(s.app_transactions), dict(s.domain_metadata), s.timestamp_ms)


def _full(root: str) -> Snapshot:
    store = storage_for(root)
    listing = list_log(store, root)
    return loader._snapshot_at(store, listing, listing.latest_version)


def _check(root: str, monkeypatch: pytest.MonkeyPatch, listed: bool) -> None:
    expected = _state(_full(root))
    clear_snapshot_cache()
    calls = count_log_listings(monkeypatch)
    got = load_snapshot(root)
    assert _state(got) == expected
    assert bool(calls) == listed
    rs = RsTable(root)
    assert got.version == rs.version()
    rs_files = sorted(os.path.relpath(u.removeprefix("file://"), root) for u in rs.file_uris())
    assert sorted(f.path for f in got.files) == rs_files


def _last_checkpoint_version(root: str) -> int:
    return int(Path(root, "_delta_log", "_last_checkpoint").read_text().split('"version":')[1].split(",")[0])


def test_tail_after_the_hinted_checkpoint_is_probed_without_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _table(root, 11)  # checkpoint at 9, commit 10 after it
    assert _last_checkpoint_version(root) == 9
    _check(root, monkeypatch, listed=False)


def test_nothing_after_the_checkpoint_lists_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _table(root, 10)  # latest = 9 = the checkpoint
    _check(root, monkeypatch, listed=False)


def test_stale_hint_finds_newer_versions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _table(root, 14)  # checkpoints 3, 6, 9, 12
    Path(root, "_delta_log", "_last_checkpoint").write_text('{"version":6,"size":3}')
    _check(root, monkeypatch, listed=False)


def test_stale_hint_whose_next_commits_were_cleaned_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _table(root, 14)
    Path(root, "_delta_log", "_last_checkpoint").write_text('{"version":6,"size":3}')
    for v in range(12):  # cleanup kept checkpoint 6 but removed the commits after it up to 12
        os.unlink(Path(root, "_delta_log", f"{v:020d}.json"))
    got = load_snapshot(root)
    assert got.version == 13  # not 6: probing found no commit 7, so only the versions from 6 on were listed
    assert _state(got) == _state(_full(root))


def test_hint_at_a_missing_checkpoint_falls_back_to_the_listing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    _table(root, 11)
    Path(root, "_delta_log", "_last_checkpoint").write_text('{"version":8,"size":3}')  # 8 has none
    _check(root, monkeypatch, listed=True)


def _checkpoints(tmp_path: Path) -> list[str]:
    root = str(tmp_path / "dv")
    _table(root, 8)
    rs_root = str(tmp_path / "rs")
    from deltalake import write_deltalake

    write_deltalake(rs_root, _rows(list(range(10))), partition_by=["p"])
    write_deltalake(rs_root, _rows([20, 21]), mode="append")
    RsTable(rs_root).create_checkpoint()
    return [GOLDEN_CHECKPOINT, *glob.glob(f"{root}/_delta_log/*.checkpoint.parquet"),
            *glob.glob(f"{rs_root}/_delta_log/*.checkpoint.parquet")]


def test_checkpoint_rows_convert_as_pyarrow_does(tmp_path: Path) -> None:
    paths = _checkpoints(tmp_path)
    assert len(paths) >= 4
    seen: set[str] = set()
    for path in paths:
        table = pq.read_table(path)
        for name in ACTION_COLUMNS:
            if name not in table.column_names:
                continue
            for chunk in table.column(name).chunks:
                valid = chunk.filter(pc.is_valid(chunk))
                if len(valid):
                    seen.add(name)
                    assert _struct_rows(valid) == valid.to_pylist(maps_as_pydicts="lossy"), (path, name)
    assert {"add", "remove", "metaData", "protocol"} <= seen
