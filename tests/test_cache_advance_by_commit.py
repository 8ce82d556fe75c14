"""After a commit, the process's cached snapshot moves to the committed version by the winners the
commit caught up with and its own bytes (loader.advance_by_commit), so the next load parses none
of them again. The truth is a listing-based load with the cache switched off, and the readers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from dml_helpers import assert_every_reader_sees, record_calls

import dvengine
from dvengine import DeltaTable
from dvengine.log import load_snapshot, snapshot_cache
from dvengine.log import loader as loader_module

Row = tuple[Any, ...]


def _table(path: Path, n: int = 40) -> tuple[str, dict[int, Row]]:
    rows = [(i, i * 10) for i in range(n)]
    dvengine.write(pa.table({"id": pa.array([r[0] for r in rows], pa.int64()),
                             "v": pa.array([r[1] for r in rows], pa.int64())}), str(path))
    return str(path), {r[0]: r for r in rows}


def _other_process_deletes(uri: str, ids: list[int]) -> None:
    """Another writer (a process of its own, so this one's caches learn nothing of it)."""
    code = (
        "import sys\nfrom dvengine import DeltaTable\n"
        "t = DeltaTable.forPath(None, sys.argv[1])\n"
        "for x in sys.argv[2:]:\n    t.delete(f'id = {x}', mode='dv')\n"
    )
    subprocess.run([sys.executable, "-c", code, uri, *map(str, ids)], check=True)


def _listed(uri: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as uncached:
        uncached.setenv(snapshot_cache.ENV_SWITCH, "false")
        return load_snapshot(uri)


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the commits the loader parses from now on."""
    return record_calls(monkeypatch, loader_module, "parse_actions", 1)


def _stale_delete(uri: str, stale: Any, condition: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A DELETE planned on ``stale`` (as a writer whose load came before the winners)."""
    from dvengine.api import dml

    with monkeypatch.context() as patched:
        patched.setattr("dvengine.commands.replan.blind_snapshot", lambda *args: None)
        patched.setattr(dml, "load_snapshot", lambda root: stale)
        return DeltaTable.forPath(None, uri).deleteMetrics(condition, mode="dv", engine="local")


def test_a_rebased_commit_moves_the_cache_by_its_winners_and_the_next_load_parses_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, model = _table(tmp_path / "t")
    stale = load_snapshot(uri)
    _other_process_deletes(uri, [5, 7])  # versions 1 and 2: DV updates of the one file we change too
    for x in (5, 7, 1):
        del model[x]
    metrics = _stale_delete(uri, stale, "id = 1", monkeypatch)
    assert (metrics["version"], metrics["numCommitAttempts"], metrics["numRebasedFiles"]) == (3, 2, 1)
    entry = snapshot_cache.get(uri)
    assert entry is not None and entry.version == 3
    assert entry.verified_at is None  # a lost race: another writer is active, the next DML lists
    listed = _listed(uri, monkeypatch)
    assert (entry.snapshot.files, entry.snapshot.metadata, entry.snapshot.protocol) == (
        listed.files, listed.metadata, listed.protocol)
    parsed = _count_parses(monkeypatch)
    assert load_snapshot(uri).version == 3
    assert parsed == []  # no winner, and not our own commit, parsed again
    assert_every_reader_sees(Path(uri), ["id", "v"], list(model.values()))


def test_a_clean_commit_is_shown_latest_and_commits_after_it_are_still_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, model = _table(tmp_path / "t")
    table = DeltaTable.forPath(None, uri)
    table.deleteMetrics("id = 3", mode="dv", engine="local")
    del model[3]
    entry = snapshot_cache.get(uri)
    own = snapshot_cache.last_own_commit(uri)
    assert entry is not None and own is not None and entry.version == own.version == 1
    assert entry.verified_at == own.sent_at  # its put-if-absent showed it latest, as blind_snapshot takes it
    _other_process_deletes(uri, [4])  # version 2, unknown to this process
    del model[4]
    parsed = _count_parses(monkeypatch)
    assert load_snapshot(uri).version == 2
    assert [Path(p).name for p in parsed] == [f"{2:020d}.json"]  # only the newer commit
    assert_every_reader_sees(Path(uri), ["id", "v"], list(model.values()))


def test_the_cache_is_left_alone_when_it_is_not_at_the_read_version_or_the_commit_is_large(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri, model = _table(tmp_path / "t")
    stale = load_snapshot(uri)
    _other_process_deletes(uri, [5])
    load_snapshot(uri)  # the cache is at version 1 now, past the command's read version 0
    assert _stale_delete(uri, stale, "id = 6", monkeypatch)["version"] == 2
    entry = snapshot_cache.get(uri)
    assert entry is not None and entry.version == 1  # not moved from a version it was not read at
    monkeypatch.setattr(loader_module, "ADVANCE_MAX_COMMIT_BYTES", 10)
    assert load_snapshot(uri).version == 2
    DeltaTable.forPath(None, uri).deleteMetrics("id = 8", mode="dv", engine="local")
    entry = snapshot_cache.get(uri)
    assert entry is not None and entry.version == 2  # a commit above the bound is left to the next load
    for x in (5, 6, 8):
        del model[x]
    assert load_snapshot(uri).version == 3
    assert_every_reader_sees(Path(uri), ["id", "v"], list(model.values()))
