"""A ``_last_checkpoint`` that names an empty or missing checkpoint: the reader falls back, as Delta's.

What a power loss could leave before checkpoints were fsynced (spec_notes/crash-safety.md), and
what another writer's crash can still leave: the hint names version 10 but its checkpoint (or the
V2 checkpoint's sidecar) is zero bytes or absent. Delta Spark then reads another checkpoint or
the commits (``SnapshotManagement``: a missing one is looked up below the hint's version, an
unreadable one is retried with an older segment); dvengine must give the same rows. Truth: delta-rs
reading the table before the damage (delta-rs 1.6 itself refuses the damaged table: "Had a
_last_checkpoint hint but didn't find any checkpoints"), at the latest version and at version 10.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_arrow, sort_rows

import dvengine
from dvengine import DeltaTable
from dvengine.log import clear_snapshot_cache
from dvengine.log.background_checkpoints import wait_for_checkpoints
from dvengine.log.checkpoint_writer import last_checkpoint_json

COLUMNS = ["id", "v"]


def _rows_delta_rs(root: str, version: int | None = None) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    table = RsTable(root) if version is None else RsTable(root, version=version)
    reader = QueryBuilder().register("t", table).execute('select "id", "v" from t')
    return sort_rows([(r["id"], r["v"]) for r in pa.table(reader.read_all()).to_pylist()])


def _checkpointed_table(root: str, policy: str) -> None:
    """Versions 0-11 with DVs, a checkpoint at 10 (the default interval) named by _last_checkpoint."""
    ids = list(range(40))
    dvengine.write(pa.table({"id": ids, "v": ids}), root, configuration={"delta.checkpointPolicy": policy})
    for version in range(1, 12):
        if version % 2:
            DeltaTable.forPath(None, root).delete(f"id = {version}", mode="dv")
        else:
            dvengine.write(pa.table({"id": [100 + version], "v": [version]}), root, mode="append")
    wait_for_checkpoints()
    assert last_checkpoint_json(root)["version"] == 10  # type: ignore[index]


def _damage(log: Path, policy: str, what: str) -> None:
    tops = [p for p in log.iterdir() if p.name.startswith(f"{10:020d}.checkpoint.")]
    assert len(tops) == 1
    target = tops[0]
    if what.endswith("sidecar"):
        sidecars = list((log / "_sidecars").iterdir())
        assert len(sidecars) == 1
        target = sidecars[0]
    if what.startswith("empty"):
        target.write_bytes(b"")
    else:
        target.unlink()


@pytest.mark.parametrize(
    ("policy", "what"),
    [("classic", "empty"), ("classic", "missing"), ("v2", "empty"), ("v2", "missing"), ("v2", "empty sidecar"),
     ("v2", "missing sidecar")],
)
def test_reader_falls_back_when_last_checkpoint_names_a_broken_checkpoint(tmp_path: Path, policy: str, what: str) -> None:
    root = str(tmp_path / "t")
    _checkpointed_table(root, policy)
    latest, at_10 = _rows_delta_rs(root), _rows_delta_rs(root, 10)
    assert rows_arrow(root, COLUMNS) == latest  # the intact table first

    _damage(tmp_path / "t" / "_delta_log", policy, what)
    clear_snapshot_cache()  # a fresh process after the crash
    assert os.path.exists(os.path.join(root, "_delta_log", "_last_checkpoint"))
    assert rows_arrow(root, COLUMNS) == latest
    clear_snapshot_cache()
    table = DeltaTable.forPath(None, root).toArrow(version=10)
    assert sort_rows([(r["id"], r["v"]) for r in table.to_pylist()]) == at_10
