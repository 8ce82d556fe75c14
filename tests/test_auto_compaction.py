"""Auto compaction (dvengine/maintenance/auto_compact.py): thresholds, settings, commitInfo, conflicts,
and many rounds of upserts and deletes with compaction running, checked against a model and
against delta-rs and DuckDB reads. Without a SparkSession; the Spark executor's trigger is in
the last test."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from interop import rows_delta_rs, rows_duckdb, sort_rows

import dvengine
import dvengine.engine.local.auto_compaction as hook
from dvengine import DeltaTable
from dvengine.commands.options import env_key
from dvengine.errors import InvalidArgumentError
from dvengine.log import load_snapshot, read_commit_actions
from dvengine.maintenance import auto_compact as ac
from dvengine.protocol.actions import AddFile, CommitInfo, RemoveFile

ON = {ac.PROPERTY_AUTO_COMPACT: "true"}
COLS = ["id", "v", "p"]


@pytest.fixture(autouse=True)
def _small_threshold(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv(env_key(ac.CONF_MIN_NUM_FILES), "5")
    monkeypatch.delenv(env_key(ac.CONF_ENABLED), raising=False)
    yield


def _rows(ids: list[int], tag: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([tag] * len(ids)),
                     "p": pa.array([i % 2 for i in ids], pa.int64())})


def _model_rows(model: dict[int, str]) -> list[tuple[Any, ...]]:
    return sort_rows([(i, v, i % 2) for i, v in model.items()])


def _read(root: str) -> list[tuple[Any, ...]]:
    t = DeltaTable.forPath(None, root).toArrow()
    return sort_rows([tuple(r[c] for c in COLS) for r in t.to_pylist()])


def _last_op(root: str) -> tuple[CommitInfo, list[Any]]:
    actions = read_commit_actions(root, load_snapshot(root).version)
    info = next(a for a in actions if isinstance(a, CommitInfo))
    return info, actions


def _params(info: CommitInfo) -> dict[str, Any]:
    return dict(info.values.get("operationParameters") or {})


def _is_auto(info: CommitInfo) -> bool:
    return info.operation == "OPTIMIZE" and _params(info).get("auto") is True


def test_triggers_at_min_num_files_with_deltas_commit_info(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([0], "a"), root, configuration=ON)
    for i in range(1, 4):
        dvengine.write(_rows([i], "a"), root, mode="append")
        assert not _is_auto(_last_op(root)[0])
    assert len(load_snapshot(root).files) == 4
    before = load_snapshot(root).version
    dvengine.write(_rows([4], "a"), root, mode="append")  # the 5th small file: compaction follows
    info, actions = _last_op(root)
    assert load_snapshot(root).version == before + 2
    assert _is_auto(info)
    assert _params(info)["predicate"] == "[]"
    assert _params(info)["zOrderBy"] == "[]" and _params(info)["clusterBy"] == "[]"
    assert info.values.get("operationMetrics") is not None and info.values.get("operationMetrics")["numRemovedFiles"] == "5"
    files = [a for a in actions if isinstance(a, (AddFile, RemoveFile))]
    assert files and all(a.data_change is False for a in files)
    assert len(load_snapshot(root).files) == 1
    assert _read(root) == rows_delta_rs(root, COLS) == rows_duckdb(root, COLS) == _model_rows({i: "a" for i in range(5)})
    # DeltaOperations.Optimize: AUTO_COMPACTION_PARAMETER_KEY -> auto, a Boolean, so Delta Spark writes
    # "auto":true as a JSON boolean (Delta Kernel reads it since delta-io/delta#4182); delta-rs and
    # DuckDB read this table above.
    line = next(json.loads(x) for x in Path(root, "_delta_log", f"{before + 2:020d}.json").read_text().splitlines()
                if "commitInfo" in x)
    assert line["commitInfo"]["operationParameters"] == {"predicate": "[]", "zOrderBy": "[]", "clusterBy": "[]", "auto": True}
    assert line["commitInfo"]["isBlindAppend"] is False


def test_partitions_are_counted_separately_and_named_in_the_predicate(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([0], "a"), root, partitionBy=["p"], configuration=ON)
    for i in (2, 4, 6):  # partition p=0 reaches 4 files; p=1 none
        dvengine.write(_rows([i], "a"), root, mode="append")
    for i in (1, 3, 5, 7):
        dvengine.write(_rows([i], "a"), root, mode="append")
    assert not _is_auto(_last_op(root)[0])  # 4 + 4 files: neither partition has 5
    dvengine.write(_rows([9], "a"), root, mode="append")  # p=1 gets its 5th
    info, _ = _last_op(root)
    assert _is_auto(info)
    assert json.loads(_params(info)["predicate"]) == ["(p = '1')"]
    by_part: dict[str, int] = {}
    for f in load_snapshot(root).files:
        by_part[str(f.partition_values["p"])] = by_part.get(str(f.partition_values["p"]), 0) + 1
    assert by_part == {"0": 4, "1": 1}
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows({i: "a" for i in [0, 2, 4, 6, 1, 3, 5, 7, 9]})


def test_counts_files_other_writers_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = str(tmp_path / "t")
    monkeypatch.setenv(env_key(ac.CONF_ENABLED), "false")  # "another writer" with compaction off
    dvengine.write(_rows([0], "a"), root, configuration=ON)
    for i in range(1, 8):
        dvengine.write(_rows([i], "a"), root, mode="append")
    assert len(load_snapshot(root).files) == 8
    monkeypatch.delenv(env_key(ac.CONF_ENABLED))
    DeltaTable.forPath(None, root).delete("id = 3")  # this command adds no file, yet the table has 8
    assert _is_auto(_last_op(root)[0])
    assert len(load_snapshot(root).files) == 1
    assert _read(root) == _model_rows({i: "a" for i in range(8) if i != 3})


def test_settings_precedence_and_bad_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def enabled(conf: dict[str, str], props: dict[str, str]) -> bool:
        return ac.auto_compact_enabled(conf.get, props)

    assert enabled({}, {}) is False
    assert enabled({}, {ac.PROPERTY_AUTO_COMPACT: "true"}) is True
    assert enabled({}, {ac.PROPERTY_AUTO_OPTIMIZE: "true"}) is True  # deprecated property, honoured first
    assert enabled({}, {ac.PROPERTY_AUTO_OPTIMIZE: "false", ac.PROPERTY_AUTO_COMPACT: "true"}) is True
    assert enabled({ac.CONF_ENABLED: "false"}, {ac.PROPERTY_AUTO_COMPACT: "true"}) is False  # conf wins
    assert enabled({ac.CONF_ENABLED: "true"}, {}) is True
    with pytest.raises(InvalidArgumentError, match=r"spark.databricks.delta.autoCompact.enabled='yes'"):
        enabled({ac.CONF_ENABLED: "yes"}, {})
    with pytest.raises(InvalidArgumentError, match="minNumFiles must be at least 1"):
        ac.AutoCompactSettings.from_conf({ac.CONF_MIN_NUM_FILES: "0"}.get)
    s = ac.AutoCompactSettings.from_conf({ac.CONF_MAX_FILE_SIZE: "1000"}.get)
    assert (s.max_file_size, s.min_file_size, s.min_num_files) == (1000, 500, 50)
    # a bad table property is refused when the table is written, naming key and value
    with pytest.raises(InvalidArgumentError, match=r"delta.autoOptimize.autoCompact='sometimes'"):
        dvengine.write(_rows([0], "a"), str(tmp_path / "bad"), configuration={ac.PROPERTY_AUTO_COMPACT: "sometimes"})
    assert not (tmp_path / "bad" / "_delta_log").exists()


def test_off_means_no_compaction_and_size_threshold_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    off = str(tmp_path / "off")
    dvengine.write(_rows([0], "a"), off)
    for i in range(1, 7):
        dvengine.write(_rows([i], "a"), off, mode="append")
    assert len(load_snapshot(off).files) == 7  # no property, no conf: Delta's default, off
    on = str(tmp_path / "on")
    monkeypatch.setenv(env_key(ac.CONF_MIN_FILE_SIZE), "10")  # nothing is "small" any more
    dvengine.write(_rows([0], "a"), on, configuration=ON)
    for i in range(1, 7):
        dvengine.write(_rows([i], "a"), on, mode="append")
    assert len(load_snapshot(on).files) == 7


def test_dv_heavy_file_is_purged_alone(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(100)), "a"), root, configuration=ON)
    DeltaTable.forPath(None, root).delete("id < 3", mode="dv")  # 3 % deleted: under 5 %, DV stays
    snap = load_snapshot(root)
    assert [f.deletion_vector is not None for f in snap.files] == [True]
    DeltaTable.forPath(None, root).delete("id < 8", mode="dv")  # 8 %: over maxDeletedRowsRatio
    info, _ = _last_op(root)
    assert _is_auto(info)
    snap = load_snapshot(root)
    assert len(snap.files) == 1 and snap.files[0].deletion_vector is None
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows({i: "a" for i in range(8, 100)})


def _sized(sizes: list[int]) -> list[AddFile]:
    return [AddFile(f"f{i}.parquet", {}, size, 0, True, None) for i, size in enumerate(sizes)]


def test_tiered_pick_merges_small_tiers_and_keeps_the_file_bound() -> None:
    # five new 1-byte files reach half of the 10-byte tier, so it joins; the 100-byte file does not
    picked = ac.tiered_pick(_sized([100, 1, 1, 1, 1, 1, 10]), min_num_files=5)
    assert sorted(f.size for f in picked) == [1, 1, 1, 1, 1, 10]
    # tiers of similar size the new files cannot reach: the smallest are added until about half
    # of min_num_files remain, so the partition never keeps min_num_files small files
    picked = ac.tiered_pick(_sized([1000, 40, 40, 40, 1, 1, 1, 1, 1]), min_num_files=5)
    assert sorted(f.size for f in picked) == [1, 1, 1, 1, 1, 40, 40, 40]
    assert len(ac.tiered_pick(_sized([7] * 60), min_num_files=50)) == 60  # equal sizes: all join
    with pytest.raises(InvalidArgumentError, match="tierFraction must be positive"):
        ac.AutoCompactSettings.from_conf({ac.CONF_TIER_FRACTION: "0"}.get)


def test_compaction_cost_follows_the_small_files_not_the_table(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(100, 20_100)), "base"), root, configuration=ON)
    base = load_snapshot(root).files[0]
    model = {i: "base" for i in range(100, 20_100)}
    for i in range(4):  # the base file counts as small (< 64 MiB): the 4th append makes 5 and triggers
        dvengine.write(_rows([i], "a"), root, mode="append")
        model[i] = "a"
    info, actions = _last_op(root)
    assert _is_auto(info)
    removed = {a.path for a in actions if isinstance(a, RemoveFile)}
    assert len(removed) == 4 and base.path not in removed  # the compaction did not rewrite the base
    assert len(load_snapshot(root).files) == 2
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows(model)


def test_dv_heavy_stream_file_waits_for_its_tier_a_large_one_is_purged(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(1000, 21_000)), "base"), root, configuration=ON)
    base = load_snapshot(root).files[0].path
    model = {i: "base" for i in range(1000, 21_000)}
    for k in range(3):  # three 10-row files: with the base 4 small files, one short of the trigger
        ids = list(range(k * 10, k * 10 + 10))
        dvengine.write(_rows(ids, "s"), root, mode="append")
        model.update(dict.fromkeys(ids, "s"))
    DeltaTable.forPath(None, root).delete("id IN (0, 1)", mode="dv")  # 20 % of a 10-row file
    del model[0], model[1]
    assert not _is_auto(_last_op(root)[0])  # it waits: the next compaction of its tier merges it
    assert sum(f.deletion_vector is not None for f in load_snapshot(root).files) == 1
    DeltaTable.forPath(None, root).delete("id >= 1000 AND id < 2100", mode="dv")  # 5.5 % of the base
    for i in range(1000, 2100):
        del model[i]
    info, actions = _last_op(root)
    assert _is_auto(info)
    removed = [a for a in actions if isinstance(a, RemoveFile)]
    assert [r.path for r in removed] == [base]  # the base, alone
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows(model)


def test_conflict_with_a_concurrent_writer_loses_quietly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    root = str(tmp_path / "t")
    dvengine.write(_rows([0, 10], "a"), root, configuration=ON)
    for i in range(1, 4):
        dvengine.write(_rows([i, i + 10], "a"), root, mode="append")
    real = hook.rewrite_files
    raced: list[int] = []

    def racing(snapshot: Any, files: Any) -> Any:
        if not raced:  # a concurrent DELETE commits while the compaction is rewriting its files
            raced.append(1)
            monkeypatch.setenv(env_key(ac.CONF_ENABLED), "false")
            DeltaTable.forPath(None, root).delete("id = 2", mode="dv")
            monkeypatch.delenv(env_key(ac.CONF_ENABLED))
        return real(snapshot, files)

    monkeypatch.setattr(hook, "rewrite_files", racing)
    with caplog.at_level(logging.WARNING, logger="dvengine.maintenance.auto_compact"):
        metrics = DeltaTable.forPath(None, root).alias("t").merge(
            _rows([4, 14], "m"), "t.id = s.id", source_alias="s").whenNotMatchedInsertAll().execute()
    assert metrics["numTargetRowsInserted"] == 2 and metrics["version"] is not None
    assert raced and "lost to a concurrent writer" in caplog.text
    info, _ = _last_op(root)
    assert info.operation == "DELETE"  # the winner; no OPTIMIZE after it
    model = {i: "a" for i in [0, 10, 1, 11, 3, 13, 12]} | {4: "m", 14: "m"}
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows(model)
    # the files the losing compaction wrote were removed again: every parquet file is live or was
    live = {f.path for f in load_snapshot(root).files}
    on_disk = {p.name for p in Path(root).glob("*.parquet")}
    removed = {a.path for v in range(load_snapshot(root).version + 1) for a in read_commit_actions(root, v)
               if isinstance(a, RemoveFile)}
    assert on_disk <= live | removed


@pytest.mark.parametrize("partitioned", [False, True])
def test_many_rounds_equal_model_and_other_readers(tmp_path: Path, partitioned: bool) -> None:
    rng = random.Random(7 + partitioned)
    root = str(tmp_path / "t")
    model = {i: "a" for i in range(200)}
    dvengine.write(_rows(list(range(200)), "a"), root, partitionBy=["p"] if partitioned else None, configuration=ON)
    table = DeltaTable.forPath(None, root)
    compactions = 0
    next_id = 200
    for r in range(40):
        keys = [*rng.sample(sorted(model), 3), next_id, next_id + 1]
        next_id += 2
        (table.alias("t").merge(_rows(keys, f"r{r}"), "t.id = s.id", source_alias="s")
         .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
        model.update({k: f"r{r}" for k in keys})
        if r % 10 == 9:
            gone = rng.sample(sorted(model), 5)
            table.delete(f"id IN ({', '.join(map(str, gone))})")
            for k in gone:
                del model[k]
        compactions += _is_auto(_last_op(root)[0])
        if r % 8 == 0:
            assert _read(root) == _model_rows(model)
    assert compactions >= 5
    per_partition = 2 if partitioned else 1
    assert len(load_snapshot(root).files) < 1 + 5 * per_partition + 1
    expected = _model_rows(model)
    assert _read(root) == expected
    assert rows_delta_rs(root, COLS) == expected
    assert rows_duckdb(root, COLS) == expected


def test_spark_executor_commands_trigger_it(tmp_path: Path, spark: Any) -> None:
    from dml_helpers import spark_conf

    root = str(tmp_path / "t")
    dvengine.write(_rows([0], "a"), root)  # no property: the session conf turns it on
    for i in range(1, 6):
        dvengine.write(_rows([i], "a"), root, mode="append")
    assert len(load_snapshot(root).files) == 6
    with spark_conf(spark, ac.CONF_ENABLED, "true"), spark_conf(spark, ac.CONF_MIN_NUM_FILES, "5"):
        DeltaTable.forPath(spark, root).delete("length(v) = 1 AND id = 3", engine="spark")  # length(): Spark only
        info, _ = _last_op(root)
        assert _is_auto(info)  # 5 small files were left after the DELETE removed one: they qualified
    assert len(load_snapshot(root).files) == 1
    assert _read(root) == rows_delta_rs(root, COLS) == _model_rows({i: "a" for i in range(6) if i != 3})


def test_concurrent_reader_sees_only_committed_models(tmp_path: Path) -> None:
    """A reader thread reads whole versions while rounds and their compactions commit; every
    version it saw must equal the model of that version (compaction changes files, never rows)."""
    import threading

    root = str(tmp_path / "t")
    rng = random.Random(3)
    model = {i: "a" for i in range(100)}
    dvengine.write(_rows(list(range(100)), "a"), root, configuration=ON)
    models: dict[int, list[tuple[Any, ...]]] = {load_snapshot(root).version: _model_rows(model)}
    seen: list[tuple[int, list[tuple[Any, ...]]]] = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                v = load_snapshot(root).version
                t = DeltaTable.forPath(None, root).toArrow(version=v)
                seen.append((v, sort_rows([tuple(r[c] for c in COLS) for r in t.to_pylist()])))
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        next_id = 100
        for r in range(25):
            keys = [*rng.sample(sorted(model), 2), next_id]
            next_id += 1
            before = load_snapshot(root).version
            (DeltaTable.forPath(None, root).alias("t").merge(_rows(keys, f"r{r}"), "t.id = s.id", source_alias="s")
             .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())
            model.update({k: f"r{r}" for k in keys})
            for v in range(before + 1, load_snapshot(root).version + 1):
                models[v] = _model_rows(model)
    finally:
        stop.set()
        thread.join(timeout=60)
    assert not errors, errors
    assert any(_is_auto(info) for info in (
        next(a for a in read_commit_actions(root, v) if isinstance(a, CommitInfo)) for v in models))
    assert seen
    for v, rows in seen:
        assert rows == models[v], f"version {v}"


def test_tiny_file_trigger_is_opt_in_and_independent_of_deltas_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off by default (it lost over 10,000 soak rounds); on with minNumTinyFiles; Delta's
    minNumFiles then still counts as Delta's."""
    monkeypatch.delenv(env_key(ac.CONF_MIN_NUM_FILES))  # Delta's minNumFiles unset: default 50
    s = ac.AutoCompactSettings.from_conf({}.get)
    assert (s.min_num_files, s.min_num_tiny_files, s.tiny_file_size) == (50, 0, 1024 * 1024)
    assert ac.AutoCompactSettings.from_conf({ac.CONF_MIN_NUM_FILES: "50"}.get).min_num_tiny_files == 0
    both = {ac.CONF_MIN_NUM_FILES: "50", ac.CONF_MIN_NUM_TINY_FILES: "4"}
    assert ac.AutoCompactSettings.from_conf(both.get).min_num_tiny_files == 4
    with pytest.raises(InvalidArgumentError, match="minNumTinyFiles must be 0 \\(off\\) or at least 2, got 1"):
        ac.AutoCompactSettings.from_conf({ac.CONF_MIN_NUM_TINY_FILES: "1"}.get)
    with pytest.raises(InvalidArgumentError, match="tinyFileSize must not be negative"):
        ac.AutoCompactSettings.from_conf({ac.CONF_TINY_FILE_SIZE: "-1"}.get)
    root = str(tmp_path / "t")
    dvengine.write(_rows(list(range(100, 5_100)), "base"), root, configuration=ON)
    model = {i: "base" for i in range(100, 5_100)}
    monkeypatch.setenv(env_key(ac.CONF_TINY_FILE_SIZE), str(load_snapshot(root).files[0].size - 1))
    # default (off): 10 tiny files stay as they are
    off = str(tmp_path / "off")
    dvengine.write(_rows(list(range(100, 5_100)), "base"), off, configuration=ON)
    for i in range(10):
        dvengine.write(_rows([i], "a"), off, mode="append")
    assert len(load_snapshot(off).files) == 11 and not _is_auto(_last_op(off)[0])
    monkeypatch.setenv(env_key(ac.CONF_MIN_NUM_TINY_FILES), "10")
    for i in range(9):  # the base is not tiny: 9 appends make 9 tiny files, 10 in all is the 10th
        dvengine.write(_rows([i], "a"), root, mode="append")
        model[i] = "a"
    assert len(load_snapshot(root).files) == 10
    dvengine.write(_rows([9], "a"), root, mode="append")
    model[9] = "a"
    info, actions = _last_op(root)
    assert _is_auto(info)
    removed = {a.path for a in actions if isinstance(a, RemoveFile)}
    assert len(removed) >= 6 and all(f.num_records == 1 for f in load_snapshot(root, 10).files if f.path in removed)
    assert len(load_snapshot(root).files) < 10
    assert _read(root) == rows_delta_rs(root, COLS) == rows_duckdb(root, COLS) == _model_rows(model)
    # Delta's own threshold set, the tiny trigger not: only Delta's counts (tiny files stay until 50)
    monkeypatch.delenv(env_key(ac.CONF_MIN_NUM_TINY_FILES))
    other = str(tmp_path / "delta")
    monkeypatch.setenv(env_key(ac.CONF_MIN_NUM_FILES), "50")
    dvengine.write(_rows([0], "a"), other, configuration=ON)
    for i in range(1, 12):
        dvengine.write(_rows([i], "a"), other, mode="append")
    assert len(load_snapshot(other).files) == 12


def test_compaction_takes_the_files_a_merge_keyed_from_the_column_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bin's files that the MERGE rounds hold in the column cache are not read again
    (executor.live_file_rows); one the cache does not hold still is; either way the rows equal
    the model and delta-rs / DuckDB reads (DVs applied from the cached physical rows)."""
    from dvengine.engine.local.column_cache import clear_column_cache
    from dvengine.read import arrow_reader

    root = str(tmp_path / "t")
    model: dict[int, str] = {}
    for f in range(4):  # four small files of 30 rows
        ids = list(range(f * 100, f * 100 + 60, 2))
        dvengine.write(_rows(ids, f"f{f}"), root, mode="append" if f else "error")
        model.update(dict.fromkeys(ids, f"f{f}"))
    (DeltaTable.forPath(None, root).alias("t").merge(_rows([2, 102, 1, 351], "u"), "t.id = s.id", source_alias="s")
     .whenMatchedUpdateAll().whenNotMatchedInsertAll().execute())  # DVs on two files, a new file spanning all
    model.update(dict.fromkeys([2, 102, 1, 351], "u"))
    DeltaTable.forPath(None, root).delete("id = 204")
    model.pop(204)
    disk_reads: list[str] = []
    real = arrow_reader.opened_for_read

    def counted(snapshot: Any, add: AddFile) -> Any:
        disk_reads.append(add.path)
        return real(snapshot, add)

    monkeypatch.setattr(arrow_reader, "opened_for_read", counted)  # every read_file_arrow opens through it
    files = load_snapshot(root).files
    assert any(f.deletion_vector is not None for f in files) and len(files) >= 4
    # keys in every file's range that no row holds: every file is keyed (its columns cached), nothing changes
    DeltaTable.forPath(None, root).alias("t").merge(_rows([3, 103, 203, 303], "no"), "t.id = s.id", source_alias="s") \
        .whenMatchedUpdateAll().execute()
    files = load_snapshot(root).files
    cached = DeltaTable.forPath(None, root).optimize().executeCompaction()
    assert disk_reads == [] and cached is not None
    expected = _model_rows(model)
    assert _read(root) == expected and rows_delta_rs(root, COLS) == expected and rows_duckdb(root, COLS) == expected
    assert len(load_snapshot(root).files) < len(files)
    # not cached: read from disk, same rows
    dvengine.write(_rows([101], "new"), root, mode="append")
    dvengine.write(_rows([103], "new"), root, mode="append")
    model.update({101: "new", 103: "new"})
    clear_column_cache()
    DeltaTable.forPath(None, root).optimize().executeCompaction()
    assert disk_reads, "files outside the column cache must be read from disk"
    assert _read(root) == _model_rows(model) and rows_delta_rs(root, COLS) == _model_rows(model)
