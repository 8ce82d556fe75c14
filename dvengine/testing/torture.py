"""Kill-9 torture run: random DML/maintenance in child processes, SIGKILLed at random moments.

``python -m dvengine.testing.torture [--kills N] [--seed S] [--rows R] [--out DIR] [--spark-every K]``

The parent keeps an in-memory model of the table (``id -> (part, value, name)``). Each step
picks an operation - DELETE (dv or rewrite), UPDATE, MERGE upsert, an explicit checkpoint or a
VACUUM with retention 0 - and runs it in a child process (``python -m dvengine.testing.torture --child
<op json>``). The child imports everything, prints ``READY``, runs the operation and prints
``DONE <seconds>``. The parent kills the child's process group with SIGKILL after a random delay
in ``[0, typical duration of that operation]`` (medians of un-killed runs; one calibration run
per operation kind first), or - on every ``--stage-every``-th DML kill - arms one of the
product's fault points (``DVENGINE_FAULT_INJECT``, see :mod:`dvengine.faults`) so the child
dies at an exact stage, cycling through ``commit.after_link``, ``commit.before_link``,
``dml.dv_files_written``, ``dml.data_files_written``.

After every kill the parent checks:

- the log loads, commit files are contiguous from 0 and every line of every commit is JSON
  (no torn commit), and dvengine and delta-rs agree on the latest version;
- the version either stayed (the table must equal the model before the operation) or advanced
  by exactly one (it must equal the model after it, computed in the parent from the operation's
  semantics), or for a VACUUM by one or two (its VACUUM START / END commits; same rows);
  anything else is a failure;
- dvengine (``toArrow``), delta-rs (``QueryBuilder``, its DV-aware path) and DuckDB
  (``delta_scan``) all return exactly that model;
- if the version advanced, time travel to the previous version (dvengine and delta-rs) still
  returns the model before the operation;
- the data files of the live snapshot, replayed independently from the JSON log, are exactly
  the ones delta-rs lists.

The observed state becomes the new model. Every ``--vacuum-every`` kills (and at the end) the
parent runs VACUUM (retention 0, not enforced) un-killed and checks that every file the live
snapshot references (data and DV files, from the independent log replay) still exists, that the
table still reads the same through all three readers, and that every orphan a killed writer left
(a visible file no commit ever named) was reclaimed. Hidden temp files (``.<v>.json.<uuid>.tmp``
in the log, ``.part-*.tmp`` data temps) are invisible to readers and never VACUUMed; they are
counted and reported.

A new table is created every ``--kills-per-table`` kills, alternating partitioned (by ``part``)
and unpartitioned layouts (the first chosen by the seed), each with a small
``delta.checkpointInterval`` so automatic checkpoints (and kills during them) happen often.

Results go to ``<out>/torture-report.json``, ``<out>/torture-report.md`` and
``<out>/torture-steps.jsonl`` (one line per step: the operation, how it was killed, the outcome).
The exit code is 1 when any check failed (the report names the seed and the step), else 0.
The operation sequence is a function of the seed and of the observed outcomes (whether each kill
landed before or after its commit), so the same seed replays the same run up to the first kill
that lands differently; ``torture-steps.jsonl`` records the exact sequence.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import selectors
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

COLUMNS = ("id", "part", "value", "name")
NUM_PARTS = 3
Row = tuple[str, int, str]  # part, value, name
Model = dict[int, Row]

KIND_DELETE = "delete"
KIND_UPDATE = "update"
KIND_MERGE = "merge"
KIND_CHECKPOINT = "checkpoint"
KIND_VACUUM = "vacuum"
# A VACUUM commits VACUUM START and VACUUM END (maintenance/vacuum_logging.py), no rows.
VACUUM_NEW_VERSIONS = 2
DML_KINDS = (KIND_DELETE, KIND_UPDATE, KIND_MERGE)
KINDS = (*DML_KINDS, KIND_CHECKPOINT, KIND_VACUUM)
MODES = ("dv", "dv", "rewrite", "auto")  # "auto": DV below dvengine.dml.rewriteThreshold, rewrite above
KIND_WEIGHTS = {KIND_DELETE: 30, KIND_UPDATE: 25, KIND_MERGE: 25, KIND_CHECKPOINT: 10, KIND_VACUUM: 10}

# Stage kills cycle in this order, so a short run reaches both sides of the commit first.
STAGE_CYCLE = ("commit.after_link", "commit.before_link", "dml.dv_files_written", "dml.data_files_written")

READY_TIMEOUT_S = 180.0  # a Spark child starts a JVM before it is ready
CHILD_TIMEOUT_S = 300.0
MIN_DELAY_S = 0.002


class TortureFailure(Exception):
    """A check failed: the table is not what a crash-safe writer may leave behind."""


# --- model and operations ------------------------------------------------------------------------


def part_of(row_id: int) -> str:
    return f"p{row_id % NUM_PARTS}"


def initial_rows(start: int, count: int) -> Model:
    return {i: (part_of(i), i * 10, f"n{i}") for i in range(start, start + count)}


def arrow_table(rows: Mapping[int, Row] | Sequence[Sequence[Any]]) -> Any:
    import pyarrow as pa

    items = [(k, *v) for k, v in rows.items()] if isinstance(rows, Mapping) else [tuple(r) for r in rows]
    schema = pa.schema([("id", pa.int64()), ("part", pa.string()), ("value", pa.int64()), ("name", pa.string())])
    return pa.table({c: [r[i] for r in items] for i, c in enumerate(COLUMNS)}, schema=schema)


def predicate_sql(spec: Sequence[Any]) -> str:
    kind = spec[0]
    if kind == "range":
        return f"id >= {spec[1]} AND id < {spec[2]}"
    if kind == "in":
        return f"id IN ({', '.join(str(i) for i in spec[1])})"
    if kind == "part_range":
        return f"part = '{spec[1]}' AND id >= {spec[2]} AND id < {spec[3]}"
    if kind == "value_range":
        return f"value >= {spec[1]} AND value < {spec[2]}"
    raise ValueError(f"unknown predicate spec {spec!r}")


def predicate_matches(spec: Sequence[Any], row_id: int, row: Row) -> bool:
    kind = spec[0]
    if kind == "range":
        return bool(spec[1] <= row_id < spec[2])
    if kind == "in":
        return row_id in spec[1]
    if kind == "part_range":
        return bool(row[0] == spec[1] and spec[2] <= row_id < spec[3])
    if kind == "value_range":
        return bool(spec[1] <= row[1] < spec[2])
    raise ValueError(f"unknown predicate spec {spec!r}")


def apply_op(model: Model, op: Mapping[str, Any]) -> Model:
    """The model after ``op`` commits (checkpoint and VACUUM change no rows)."""
    kind = op["kind"]
    if kind == KIND_DELETE:
        return {k: r for k, r in model.items() if not predicate_matches(op["pred"], k, r)}
    if kind == KIND_UPDATE:
        out = dict(model)
        for k, r in model.items():
            if predicate_matches(op["pred"], k, r):
                out[k] = (r[0], r[1] + op["delta"], op["tag"])
        return out
    if kind == KIND_MERGE:
        out = dict(model)
        for row_id, part, value, name in op["source"]:
            out[row_id] = (part, value, name)  # matched: update all; not matched: insert all
        return out
    return dict(model)


def random_predicate(rng: random.Random, model: Model) -> list[Any]:
    ids = sorted(model)
    shape = rng.choice(("range", "range", "in", "part_range", "value_range"))
    if shape == "in":
        return ["in", sorted(rng.sample(ids, min(len(ids), rng.randint(1, 25))))]
    lo = rng.choice(ids)
    width = rng.randint(1, 80)
    if shape == "part_range":
        return ["part_range", model[lo][0], lo, lo + 3 * width]
    if shape == "value_range":
        v = model[lo][1]
        return ["value_range", v, v + 10 * width]
    return ["range", lo, lo + width]


def choose_op(
    rng: random.Random, model: Model, next_id: int, step: int, root: str, force_kind: str | None = None
) -> dict[str, Any]:
    kinds = list(KIND_WEIGHTS)
    kind = force_kind or rng.choices(kinds, [KIND_WEIGHTS[k] for k in kinds])[0]
    if kind in (KIND_DELETE, KIND_UPDATE) and len(model) < 50:
        kind = KIND_MERGE  # keep the table from running dry
    op: dict[str, Any] = {"kind": kind, "root": root, "engine": "local", "step": step}
    if kind == KIND_DELETE:
        op["pred"] = random_predicate(rng, model)
        op["mode"] = rng.choice(MODES)
    elif kind == KIND_UPDATE:
        op["pred"] = random_predicate(rng, model)
        op["mode"] = rng.choice(MODES)
        op["delta"] = rng.randint(1, 9)
        op["tag"] = f"u{step}"
    elif kind == KIND_MERGE:
        matched = rng.sample(sorted(model), min(len(model), rng.randint(0, 40)))
        inserted = list(range(next_id, next_id + rng.randint(1, 40)))
        op["source"] = [[i, part_of(i), rng.randint(0, 100_000), f"m{step}"] for i in sorted(matched + inserted)]
        op["mode"] = rng.choice(MODES)
    return op


# --- the child -------------------------------------------------------------------------------------


def child_main(op_json: str) -> int:
    """Run one operation; print READY once everything is imported and DONE <seconds> after it."""
    op = json.loads(op_json)
    # Import the executors now, so the timed part is the operation, not module loading.
    from dvengine import DeltaTable
    from dvengine.log.checkpoint_writer import write_checkpoint  # noqa: F401

    spark = None
    if op["engine"] == "spark":
        from dvengine.engine.spark.session import get_or_create_session

        spark = get_or_create_session()
    table = DeltaTable.forPath(spark, op["root"])
    source = arrow_table(op["source"]) if op["kind"] == KIND_MERGE else None
    print("READY", flush=True)
    started = time.monotonic()
    execute_op(op, table, source)
    print(f"DONE {time.monotonic() - started:.6f}", flush=True)
    return 0


def execute_op(op: Mapping[str, Any], table: Any, source: Any) -> None:
    """Run ``op`` on ``table`` (a DeltaTable); ``source`` is the MERGE source as Arrow."""
    from dvengine.log import load_snapshot
    from dvengine.log.checkpoint_writer import write_checkpoint

    kind = op["kind"]
    if kind == KIND_DELETE:
        table.delete(predicate_sql(op["pred"]), mode=op["mode"], engine=op["engine"])
    elif kind == KIND_UPDATE:
        assignments = {"value": f"value + {op['delta']}", "name": f"'{op['tag']}'"}
        table.update(predicate_sql(op["pred"]), assignments, mode=op["mode"], engine=op["engine"])
    elif kind == KIND_MERGE:
        (
            table.alias("t")
            .merge(source, "t.id = s.id", source_alias="s")
            .whenMatchedUpdateAll()
            .whenNotMatchedInsertAll()
            .withMode(op["mode"])
            .withEngine(op["engine"])
            .executeMetrics()
        )
    elif kind == KIND_CHECKPOINT:
        write_checkpoint(load_snapshot(op["root"]))
    elif kind == KIND_VACUUM:
        table.vacuumReport(retentionHours=0, enforceRetention=False)
    else:
        raise ValueError(f"unknown operation kind {kind!r}")


@dataclass
class ChildResult:
    returncode: int
    done: bool  # the child reported the operation finished
    duration: float | None  # seconds of the operation, when done
    killed_by_parent: bool
    stderr: str


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (the child and, for Spark, its JVM)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def run_child(op: Mapping[str, Any], delay: float | None, stage: str | None) -> ChildResult:
    """Start the child for ``op``; SIGKILL it ``delay`` seconds after READY (None: let it run)."""
    import dvengine

    env = dict(os.environ)
    package_root = str(Path(dvengine.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    env.pop("DVENGINE_FAULT_INJECT", None)
    if stage is not None:
        env["DVENGINE_FAULT_INJECT"] = stage
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dvengine.testing.torture", "--child", json.dumps(op)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            start_new_session=True,
        )
        assert proc.stdout is not None
        killed = False
        out = b""
        try:
            sel = selectors.DefaultSelector()
            sel.register(proc.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + READY_TIMEOUT_S
            while b"READY\n" not in out and time.monotonic() < deadline:
                if sel.select(timeout=0.5):
                    chunk = os.read(proc.stdout.fileno(), 65536)
                    if not chunk:
                        break  # the child exited (or died) before READY
                    out += chunk
            sel.close()
            if delay is not None and b"READY\n" in out:
                time.sleep(delay)
                _kill_group(proc.pid)
                killed = True
            rest, _ = proc.communicate(timeout=CHILD_TIMEOUT_S)
            out += rest
        finally:
            if proc.poll() is None:
                _kill_group(proc.pid)
                proc.wait()
            _kill_group(proc.pid)  # a Spark child's JVM outlives the Python process it belongs to
        err.seek(0)
        stderr = err.read().decode("utf-8", "replace")
    duration = None
    done = False
    for line in out.decode("utf-8", "replace").splitlines():
        if line.startswith("DONE"):
            done = True
            duration = float(line.split()[1])
    return ChildResult(proc.returncode, done, duration, killed, stderr)


# --- independent views of the table ----------------------------------------------------------------


def sort_rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in rows)


def model_rows(model: Model) -> list[tuple[Any, ...]]:
    return sort_rows([(k, *v) for k, v in model.items()])


def _arrow_rows(table: Any) -> list[tuple[Any, ...]]:
    cols = [table.column(c).to_pylist() for c in COLUMNS]
    return sort_rows(list(zip(*cols, strict=True)))


def rows_dvengine(root: str, version: int | None = None) -> list[tuple[Any, ...]]:
    from dvengine import DeltaTable

    return _arrow_rows(DeltaTable.forPath(None, root).toArrow(version=version))


def rows_delta_rs(root: str, version: int | None = None) -> list[tuple[Any, ...]]:
    import pyarrow as pa
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    table = RsTable(root) if version is None else RsTable(root, version=version)
    cols = ", ".join(f'"{c}"' for c in COLUMNS)
    reader = QueryBuilder().register("t", table).execute(f"select {cols} from t")
    return _arrow_rows(pa.table(reader.read_all()))


def rows_duckdb(root: str) -> list[tuple[Any, ...]]:
    from dvengine.bench.verify import duckdb_delta_connection

    with duckdb_delta_connection() as con:
        if con is None:
            raise RuntimeError("duckdb-ext-delta is not installed (pip install duckdb-ext-delta)")
        cols = ", ".join(f'"{c}"' for c in COLUMNS)
        return _arrow_rows(con.execute(f"select {cols} from delta_scan('{root}')").fetch_arrow_table())


def describe_diff(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> str:
    g = {r[0]: r for r in got}
    w = {r[0]: r for r in want}
    missing = sorted(set(w) - set(g))
    extra = sorted(set(g) - set(w))
    changed = sorted(k for k in set(g) & set(w) if g[k] != w[k])
    dupes = len(got) - len(g)
    parts = [f"{len(got)} rows vs {len(want)} expected"]
    if missing:
        parts.append(f"missing ids {missing[:10]}{'...' if len(missing) > 10 else ''} ({len(missing)})")
    if extra:
        parts.append(f"unexpected ids {extra[:10]}{'...' if len(extra) > 10 else ''} ({len(extra)})")
    if changed:
        k = changed[0]
        parts.append(f"{len(changed)} changed rows, e.g. got {g[k]} want {w[k]}")
    if dupes:
        parts.append(f"{dupes} duplicate ids")
    return "; ".join(parts)


def _commit_versions(root: str) -> list[int]:
    log = os.path.join(root, "_delta_log")
    return sorted(int(n[:20]) for n in os.listdir(log) if len(n) == 25 and n.endswith(".json") and n[:20].isdigit())


def check_log(root: str) -> int:
    """Commit files 0..v with no gap, every line JSON with one action; returns v."""
    versions = _commit_versions(root)
    if versions != list(range(len(versions))):
        raise TortureFailure(f"commit files are not contiguous from 0: {versions}")
    for v in versions:
        path = os.path.join(root, "_delta_log", f"{v:020d}.json")
        with open(path, "rb") as fh:
            data = fh.read()
        if not data.endswith(b"\n"):
            raise TortureFailure(f"commit {v} does not end with a newline (torn write?)")
        for n, line in enumerate(data.splitlines()):
            try:
                action = json.loads(line)
            except ValueError as exc:
                raise TortureFailure(f"commit {v} line {n} is not JSON (torn commit): {exc}") from None
            if not isinstance(action, dict) or len(action) != 1:
                raise TortureFailure(f"commit {v} line {n} is not a single action: {line[:200]!r}")
    return versions[-1]


def _dv_relpath(root: str, dv: Mapping[str, Any] | None) -> str | None:
    from dvengine.dv.descriptor import dv_file_relative_path

    if not dv or dv.get("storageType") == "i":
        return None
    if dv["storageType"] == "u":
        return os.path.normpath(dv_file_relative_path(dv["pathOrInlineDv"]))
    return os.path.relpath(unquote(dv["pathOrInlineDv"].removeprefix("file://")), root)


def _dv_key(dv: Mapping[str, Any] | None) -> str:
    if not dv:
        return ""
    return f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def replay_log(root: str) -> tuple[set[str], set[str], set[str]]:
    """(live data files, live DV files, every file any commit ever named), replayed from the JSON log."""
    live: dict[tuple[str, str], dict[str, Any]] = {}
    ever: set[str] = set()
    for v in _commit_versions(root):
        with open(os.path.join(root, "_delta_log", f"{v:020d}.json"), "rb") as fh:
            for line in fh.read().splitlines():
                action = json.loads(line)
                for kind in ("add", "remove"):
                    if kind not in action:
                        continue
                    a = action[kind]
                    path = os.path.normpath(unquote(a["path"]))
                    ever.add(path)
                    dv_path = _dv_relpath(root, a.get("deletionVector"))
                    if dv_path is not None:
                        ever.add(dv_path)
                    key = (path, _dv_key(a.get("deletionVector")))
                    if kind == "add":
                        live[key] = a
                    else:
                        live.pop(key, None)
    data = {k[0] for k in live}
    dvs = {p for a in live.values() if (p := _dv_relpath(root, a.get("deletionVector"))) is not None}
    return data, dvs, ever


def scan_files(root: str) -> tuple[set[str], set[str]]:
    """(visible files VACUUM considers, hidden leftovers) relative to ``root``; the log's own files excluded."""
    visible: set[str] = set()
    hidden: set[str] = set()
    log = os.path.join(root, "_delta_log")
    for dirpath, _dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if dirpath == log:
                if name.startswith("."):
                    hidden.add(rel)  # a killed commit/checkpoint's temp file
                continue
            parts = rel.split(os.sep)
            if any(p.startswith((".", "_")) and not p.startswith("part=") for p in parts):
                hidden.add(rel)
            else:
                visible.add(rel)
    return visible, hidden


# --- the parent --------------------------------------------------------------------------------------


@dataclass
class Stats:
    kills_attempted: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    ops: dict[str, Counter[str]] = field(default_factory=dict)
    stages: dict[str, Counter[str]] = field(default_factory=dict)
    orphans_found: set[str] = field(default_factory=set)
    orphans_reclaimed: set[str] = field(default_factory=set)
    tombstoned_reclaimed: int = 0
    hidden_leftovers: set[str] = field(default_factory=set)
    vacuum_runs: int = 0
    steps: int = 0
    tables: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    durations: dict[str, list[float]] = field(default_factory=dict)

    def count(self, kind: str, outcome: str) -> None:
        self.ops.setdefault(kind, Counter())[outcome] += 1


class Torture:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(args.seed)
        self.out = Path(args.out).resolve()
        self.stats = Stats()
        self.model: Model = {}
        self.next_id = 0
        self.root = ""
        self.dml_ops = 0
        self.dml_kills = 0
        self.stage_kills = 0
        self.step_log = (self.out / "torture-steps.jsonl").open("w", encoding="utf-8")

    # -- table lifecycle --

    def new_table(self, index: int) -> None:
        import dvengine

        partitioned = (self.args.seed + index) % 2 == 0
        if self.args.layout != "alternate":
            partitioned = self.args.layout == "partitioned"
        self.root = str(self.out / "tables" / f"t{index}")
        shutil.rmtree(self.root, ignore_errors=True)
        interval = self.rng.randint(3, 8)
        files = self.rng.randint(3, 6)
        per_file = max(1, self.args.rows // files)
        self.model = {}
        for n in range(files):
            chunk = initial_rows(n * per_file, per_file)
            self.model.update(chunk)
            dvengine.write(
                arrow_table(chunk),
                self.root,
                mode="append" if n else "error",
                partitionBy=["part"] if partitioned else None,
                configuration={"delta.checkpointInterval": str(interval)} if n == 0 else None,
            )
        self.next_id = files * per_file
        self.stats.tables.append(
            {"path": self.root, "partitioned": partitioned, "checkpointInterval": interval, "initialFiles": files,
             "initialRows": len(self.model)}
        )
        self.verify(self.model, self.model, check_log(self.root), "create")

    # -- checks --

    def verify(self, before: Model, after: Model, v_before: int, what: str, new_versions: int = 1) -> tuple[int, Model]:
        """Check the table is ``before`` at ``v_before`` or ``after`` at ``v_before + 1``; return (version, model).

        ``new_versions``: how many commits the operation may add. A VACUUM adds up to two rows-less
        ones (VACUUM START and END, Delta's logging, on for local folders), so it passes 2 with
        ``after == before``: any version in between holds the same rows."""
        from deltalake import DeltaTable as RsTable

        from dvengine import DeltaTable

        v_log = check_log(self.root)
        try:
            v = DeltaTable.forPath(None, self.root).version()
        except Exception as exc:
            raise TortureFailure(f"{what}: dvengine cannot load the log: {type(exc).__name__}: {exc}") from exc
        if v != v_log:
            raise TortureFailure(f"{what}: dvengine says version {v}, the newest commit file is {v_log}")
        v_rs = RsTable(self.root).version()
        if v_rs != v:
            raise TortureFailure(f"{what}: delta-rs says version {v_rs}, dvengine {v}")
        if v == v_before:
            expected = before
        elif v_before < v <= v_before + new_versions:
            expected = after
        else:
            raise TortureFailure(
                f"{what}: version went from {v_before} to {v} (expected {v_before} .. {v_before + new_versions})"
            )
        want = model_rows(expected)
        for name, read in (("dvengine", rows_dvengine), ("delta-rs", rows_delta_rs), ("duckdb", rows_duckdb)):
            try:
                got = read(self.root)
            except Exception as exc:
                raise TortureFailure(f"{what}: {name} cannot read version {v}: {type(exc).__name__}: {exc}") from exc
            if got != want:
                state = "after" if expected is after and v != v_before else "before"
                raise TortureFailure(f"{what}: {name} at version {v} != model {state} the operation: {describe_diff(got, want)}")
        if v > v_before >= 0:
            want_prev = model_rows(before)
            for name, read_v in (("dvengine", rows_dvengine), ("delta-rs", rows_delta_rs)):
                try:
                    got = read_v(self.root, v_before)
                except Exception as exc:
                    raise TortureFailure(f"{what}: {name} time travel to {v_before} fails: {type(exc).__name__}: {exc}") from exc
                if got != want_prev:
                    raise TortureFailure(f"{what}: {name} time travel to {v_before} != model before: {describe_diff(got, want_prev)}")
        data, dvs, _ = replay_log(self.root)
        missing = sorted(p for p in data | dvs if not os.path.exists(os.path.join(self.root, p)))
        if missing:
            raise TortureFailure(f"{what}: files the live snapshot references are missing: {missing[:5]}")
        import pyarrow as pa

        rs_paths = {os.path.normpath(unquote(p)) for p in pa.table(RsTable(self.root).get_add_actions(flatten=True)).column("path").to_pylist()}
        if rs_paths != data:
            raise TortureFailure(
                f"{what}: live files from the JSON log replay and delta-rs differ: only replay {sorted(data - rs_paths)[:5]}, "
                f"only delta-rs {sorted(rs_paths - data)[:5]}"
            )
        return v, expected

    def track_files(self) -> None:
        """Record new orphans (visible files no commit ever named) and those gone since (a VACUUM took them)."""
        visible, hidden = scan_files(self.root)
        _, _, ever = replay_log(self.root)
        present = {f"{self.root}/{p}" for p in visible}
        prefix = f"{self.root}/"
        self.stats.orphans_reclaimed.update(
            o for o in self.stats.orphans_found if o.startswith(prefix) and o not in present
        )
        self.stats.orphans_found.update(f"{self.root}/{p}" for p in visible - ever)
        self.stats.hidden_leftovers.update(f"{self.root}/{p}" for p in hidden)

    def vacuum_check(self, what: str) -> None:
        """VACUUM (retention 0) un-killed: nothing live deleted, orphans reclaimed, table unchanged."""
        from dvengine import DeltaTable

        self.track_files()
        data, dvs, ever = replay_log(self.root)
        visible, _ = scan_files(self.root)
        orphans = visible - ever
        tombstoned = visible - data - dvs - orphans
        v = check_log(self.root)
        time.sleep(0.05)  # VACUUM's cutoff is "now": let the newest orphan get older than it
        report = DeltaTable.forPath(None, self.root).vacuumReport(retentionHours=0, enforceRetention=False)
        self.stats.vacuum_runs += 1
        deleted = {os.path.normpath(p) for p in report["files"]}
        if deleted & (data | dvs):
            raise TortureFailure(f"{what}: VACUUM deleted live files {sorted(deleted & (data | dvs))[:5]}")
        gone = sorted(p for p in data | dvs if not os.path.exists(os.path.join(self.root, p)))
        if gone:
            raise TortureFailure(f"{what}: files the live snapshot references are missing after VACUUM: {gone[:5]}")
        after_visible, _ = scan_files(self.root)
        left = orphans & after_visible
        if left:
            raise TortureFailure(f"{what}: VACUUM (retention 0) left orphan files behind: {sorted(left)[:5]}")
        self.track_files()
        self.stats.tombstoned_reclaimed += len(tombstoned - after_visible)
        self.verify(self.model, self.model, v, what, VACUUM_NEW_VERSIONS)

    # -- one step --

    def log_step(self, record: Mapping[str, Any]) -> None:
        self.step_log.write(json.dumps(record, sort_keys=True) + "\n")
        self.step_log.flush()

    def typical(self, key: str) -> float | None:
        samples = self.stats.durations.get(key)
        return statistics.median(samples) if samples else None

    def step(self, kill: bool, force_kind: str | None = None) -> None:
        self.stats.steps += 1
        step = self.stats.steps
        op = choose_op(self.rng, self.model, self.next_id, step, self.root, force_kind)
        if op["kind"] in DML_KINDS:
            self.dml_ops += 1
            if self.args.spark_every and self.dml_ops % self.args.spark_every == 0:
                op["engine"] = "spark"
        key = f"{op['kind']}/{op['engine']}"
        typical = self.typical(key)
        stage: str | None = None
        delay: float | None = None
        how = "calibration"
        if kill and typical is not None:
            if op["kind"] in DML_KINDS:
                if self.args.stage_every and self.dml_kills % self.args.stage_every == 0:
                    stage = STAGE_CYCLE[self.stage_kills % len(STAGE_CYCLE)]
                    self.stage_kills += 1
                self.dml_kills += 1
            if stage is None:
                delay = self.rng.uniform(0.0, max(typical, MIN_DELAY_S))
                how = "timed"
            else:
                how = "stage"
            self.stats.kills_attempted += 1
        before = self.model
        after = apply_op(before, op)
        v_before = check_log(self.root)
        step_started = time.monotonic()
        result = run_child(op, delay, stage)
        if result.done and result.duration is not None:
            self.stats.durations.setdefault(key, []).append(result.duration)
        record: dict[str, Any] = {
            "step": step, "seed": self.args.seed, "op": {k: v for k, v in op.items() if k != "source"},
            "sourceRows": len(op.get("source", [])), "how": how, "stage": stage, "delay": delay,
            "returncode": result.returncode, "done": result.done, "versionBefore": v_before,
        }
        try:
            if result.returncode not in (0, -signal.SIGKILL):
                raise TortureFailure(f"child failed with exit code {result.returncode}: {result.stderr[-3000:]}")
            if how == "calibration" and result.returncode != 0:
                raise TortureFailure(f"un-killed child did not finish (exit {result.returncode}): {result.stderr[-3000:]}")
            new_versions = VACUUM_NEW_VERSIONS if op["kind"] == KIND_VACUUM else 1
            v, self.model = self.verify(before, after, v_before, f"step {step} ({key}, {how})", new_versions)
        except TortureFailure as exc:
            record["failure"] = str(exc)
            self.log_step(record)
            raise
        if op["kind"] == KIND_MERGE:
            self.next_id = max(self.next_id, max(r[0] for r in op["source"]) + 1)
        # A kill that arrives after the child printed DONE (during interpreter exit) missed the operation.
        killed = result.returncode == -signal.SIGKILL and not result.done
        if op["kind"] in DML_KINDS:
            outcome = "after_commit" if v == v_before + 1 else "before_commit"
            if not killed:
                outcome = "completed" if v == v_before + 1 or after == before else "completed_without_commit"
        else:
            outcome = "killed" if killed else "completed"
        if how == "calibration":
            outcome = "calibration"
        record.update({"version": v, "outcome": outcome, "seconds": round(time.monotonic() - step_started, 3)})
        self.log_step(record)
        if how != "calibration":
            self.stats.outcomes[outcome if op["kind"] in DML_KINDS else f"{op['kind']}_{outcome}"] += 1
        self.stats.count(op["kind"] if op["engine"] == "local" else f"{op['kind']} (spark)", outcome)
        if stage is not None:
            self.stats.stages.setdefault(stage, Counter())[outcome] += 1
        self.track_files()

    # -- the run --

    def run(self) -> None:
        table_index = 0
        self.new_table(table_index)
        for kind in KINDS:  # calibration: one un-killed run of each kind learns how long it takes
            self.step(kill=False, force_kind=kind)
        kills_on_table = 0
        while self.stats.kills_attempted < self.args.kills:
            if kills_on_table >= self.args.kills_per_table:
                self.vacuum_check(f"final VACUUM of table {table_index}")
                table_index += 1
                kills_on_table = 0
                self.new_table(table_index)
            before = self.stats.kills_attempted
            self.step(kill=True)
            if self.stats.kills_attempted > before:
                kills_on_table += 1
                if self.args.vacuum_every and self.stats.kills_attempted % self.args.vacuum_every == 0:
                    self.vacuum_check(f"VACUUM after kill {self.stats.kills_attempted}")
        self.vacuum_check(f"final VACUUM of table {table_index}")


def report(t: Torture, wall: float, argv: Sequence[str]) -> dict[str, Any]:
    s = t.stats
    hidden = sorted(s.hidden_leftovers)
    return {
        "seed": t.args.seed,
        "killsRequested": t.args.kills,
        "killsAttempted": s.kills_attempted,
        "killsLandedBeforeCommit": s.outcomes.get("before_commit", 0),
        "killsLandedAfterCommit": s.outcomes.get("after_commit", 0),
        "killsMissedChildCompleted": sum(n for k, n in s.outcomes.items() if k.endswith(("completed", "completed_without_commit"))),
        "outcomes": dict(sorted(s.outcomes.items())),
        "operationsByKind": {k: dict(sorted(v.items())) for k, v in sorted(s.ops.items())},
        "faultStages": {k: dict(v) for k, v in sorted(s.stages.items())},
        "steps": s.steps,
        "orphanFilesFound": len(s.orphans_found),
        "orphanFilesReclaimedByVacuum": len(s.orphans_reclaimed),  # by the killed VACUUM ops or the checks
        "orphanFilesRemaining": len(s.orphans_found - s.orphans_reclaimed),
        "tombstonedFilesReclaimedByVacuum": s.tombstoned_reclaimed,
        "vacuumRuns": s.vacuum_runs,
        "hiddenTempLeftovers": len(hidden),
        "hiddenTempLeftoversInLog": sum(1 for h in hidden if "/_delta_log/" in h),
        "hiddenTempLeftoverExamples": [os.path.relpath(h, t.out) for h in hidden[:5]],
        "typicalDurationsMs": {k: round(statistics.median(v) * 1000, 1) for k, v in sorted(s.durations.items())},
        "tables": s.tables,
        "failures": s.failures,
        "wallTimeSeconds": round(wall, 1),
        "command": " ".join(["python -m dvengine.testing.torture", *argv]),
    }


def markdown(r: Mapping[str, Any]) -> str:
    lines = [
        "# dvengine kill-9 torture run",
        "",
        (
            f"Seed {r['seed']}, {r['killsAttempted']} kills in {r['steps']} steps, {r['wallTimeSeconds']} s wall time. "
            f"**{'FAILED' if r['failures'] else 'No failures'}.**"
        ),
        "",
        f"`{r['command']}`",
        "",
        "| | count |",
        "|---|---|",
        f"| kills attempted | {r['killsAttempted']} |",
        f"| DML kills landed before commit (table at the previous version) | {r['killsLandedBeforeCommit']} |",
        f"| DML kills landed after commit (table at the new version) | {r['killsLandedAfterCommit']} |",
        f"| kills that arrived after the child finished | {r['killsMissedChildCompleted']} |",
        f"| checkpoint / VACUUM children killed | {r['outcomes'].get('checkpoint_killed', 0)} / {r['outcomes'].get('vacuum_killed', 0)} |",
        f"| orphan files left by killed writers | {r['orphanFilesFound']} |",
        f"| orphan files reclaimed by VACUUM | {r['orphanFilesReclaimedByVacuum']} |",
        f"| orphan files remaining at the end | {r['orphanFilesRemaining']} |",
        f"| tombstoned files reclaimed by VACUUM | {r['tombstonedFilesReclaimedByVacuum']} |",
        f"| un-killed VACUUM checks | {r['vacuumRuns']} |",
        f"| hidden temp files left (not VACUUMed; invisible to readers) | {r['hiddenTempLeftovers']} ({r['hiddenTempLeftoversInLog']} in _delta_log) |",
        "",
        "## Operations by kind and outcome",
        "",
        "| operation | outcomes |",
        "|---|---|",
    ]
    for kind, outcomes in r["operationsByKind"].items():
        lines.append(f"| {kind} | {', '.join(f'{k}: {v}' for k, v in outcomes.items())} |")
    lines += ["", "## Fault-injection stages", "", "| stage | outcomes |", "|---|---|"]
    for stage, outcomes in r["faultStages"].items():
        lines.append(f"| `{stage}` | {', '.join(f'{k}: {v}' for k, v in outcomes.items())} |")
    lines += ["", "Typical operation durations (ms, median of un-killed runs): "
              + ", ".join(f"{k} {v}" for k, v in r["typicalDurationsMs"].items()), ""]
    if r["failures"]:
        lines += ["## Failures", ""]
        for f in r["failures"]:
            lines.append(f"- seed {f['seed']} step {f['step']}: {f['message']}")
            lines.append(f"  - reproduce: `{f['reproduce']}`; the table is kept at `{f['table']}`")
        lines.append("")
    return "\n".join(lines)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m dvengine.testing.torture", description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=20, help="kills to attempt (default 20)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: random, printed in the report)")
    p.add_argument("--rows", type=int, default=3000, help="rows in each new table (default 3000)")
    p.add_argument("--out", default="torture-results", help="folder for tables and reports (default torture-results)")
    p.add_argument("--spark-every", type=int, default=0, help="every K-th DML runs with engine='spark' (0: never)")
    p.add_argument("--stage-every", type=int, default=4,
                   help="every K-th DML kill uses a fault-injection stage instead of a timed kill (0: never; default 4)")
    p.add_argument("--vacuum-every", type=int, default=5, help="un-killed VACUUM check every K kills (default 5)")
    p.add_argument("--kills-per-table", type=int, default=15, help="start a fresh table after K kills (default 15)")
    p.add_argument("--layout", choices=("alternate", "partitioned", "flat"), default="alternate")
    p.add_argument("--keep-tables", action="store_true", help="keep the tables after a successful run")
    p.add_argument("--child", metavar="OP_JSON", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1_000_000)
    if args.kills < 0 or args.kills_per_table < 1:
        p.error("--kills must be >= 0 and --kills-per-table >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.child is not None:
        return child_main(args.child)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()

    def terminate(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)  # unwinds run_child's finally, which kills the child's process group

    try:
        previous: Any = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: no handler, the caller owns signals
        previous = None
    torture = Torture(args)
    try:
        torture.run()
    except Exception as exc:
        import traceback

        message = str(exc) if isinstance(exc, TortureFailure) else f"unexpected {type(exc).__name__}: {exc}\n{traceback.format_exc()}"
        torture.stats.failures.append({
            "seed": args.seed, "step": torture.stats.steps, "message": message, "table": torture.root,
            "reproduce": f"python -m dvengine.testing.torture --seed {args.seed} --kills {args.kills} --rows {args.rows} "
                         f"--spark-every {args.spark_every} --stage-every {args.stage_every} "
                         f"--vacuum-every {args.vacuum_every} --kills-per-table {args.kills_per_table} --layout {args.layout}",
        })
    finally:
        torture.step_log.close()
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    result = report(torture, time.monotonic() - started, argv)
    (out / "torture-report.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    (out / "torture-report.md").write_text(markdown(result), encoding="utf-8")
    if not result["failures"] and not args.keep_tables:
        shutil.rmtree(out / "tables", ignore_errors=True)
    print(
        f"torture: seed {args.seed}: {result['killsAttempted']} kills ({result['killsLandedBeforeCommit']} before commit, "
        f"{result['killsLandedAfterCommit']} after), {result['orphanFilesFound']} orphans "
        f"({result['orphanFilesReclaimedByVacuum']} reclaimed), {len(result['failures'])} failures, "
        f"{result['wallTimeSeconds']} s; report in {out}"
    )
    for f in result["failures"]:
        print(f"FAILURE at step {f['step']}: {f['message']}\n  reproduce: {f['reproduce']}", file=sys.stderr)
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
