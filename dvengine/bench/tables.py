"""Base tables, fresh per-measurement copies, and what an operation wrote (folder and log diffs).

Every measurement runs on its own copy of a pristine base table, so no operation sees another's
deletion vectors or rewritten files. Copies hard-link the data files and copy only
``_delta_log``: Delta data files are immutable (both engines write new, uniquely named files
and never modify one in place), so a link is as good as a copy and costs nothing even at 10M
rows. Where linking is impossible (another filesystem) the file is copied.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.bench.data import Layout

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG_DIR = "_delta_log"


def build_dvengine_base(spark: SparkSession, sources: Sequence[str], dest: str, partitioned: bool) -> None:
    """Write the base table with dvengine's ``write()``: one data file per source file.

    The source is read by Spark with each file alone in its own split (open cost and split size
    set huge), so the writer's tasks map 1:1 to source files and every data file keeps one id
    block: the same file count and ranges as the delta-rs base.
    """
    from dvengine.engine.spark.write_api import write
    from dvengine.engine.spark.writer import session_conf

    huge = str(1 << 40)
    with session_conf(spark, {"spark.sql.files.maxPartitionBytes": huge, "spark.sql.files.openCostInBytes": huge}):
        df = spark.read.parquet(*sources)
        write(df, dest, mode="error", partitionBy=["cat"] if partitioned else None, spark=spark)


def build_deltars_base(sources: Sequence[str], dest: str, partitioned: bool) -> None:
    """Write the delta-rs base with ``write_deltalake``: one call per source file, so one file each.

    A single call would cut files by ``target_file_size`` (compressed bytes), which cannot
    reproduce the id blocks exactly; the first call creates the table, the others append.
    """
    from deltalake import write_deltalake

    for i, source in enumerate(sources):
        write_deltalake(
            dest,
            pq.read_table(source),
            mode="error" if i == 0 else "append",
            partition_by=["cat"] if partitioned else None,
        )


def fresh_copy(base: str, dest: str) -> str:
    """A private copy of ``base`` at ``dest``: data files hard-linked, the log copied."""
    for directory, _, names in os.walk(base):
        rel = os.path.relpath(directory, base)
        target_dir = os.path.normpath(os.path.join(dest, rel))
        os.makedirs(target_dir, exist_ok=True)
        in_log = rel.split(os.sep)[0] == LOG_DIR
        for name in names:
            src, dst = os.path.join(directory, name), os.path.join(target_dir, name)
            if in_log:
                shutil.copy2(src, dst)
                continue
            try:
                os.link(src, dst)
            except OSError:
                shutil.copy2(src, dst)
    return dest


def folder_state(root: str) -> dict[str, int]:
    """Relative path -> size of every file under ``root``."""
    state: dict[str, int] = {}
    for directory, _, names in os.walk(root):
        for name in names:
            full = os.path.join(directory, name)
            state[os.path.relpath(full, root)] = os.path.getsize(full)
    return state


def fingerprint(root: str) -> dict[str, tuple[int, int]]:
    """Path -> (size, mtime ns): used to prove a base table stayed pristine during a run."""
    out: dict[str, tuple[int, int]] = {}
    for directory, _, names in os.walk(root):
        for name in names:
            st = os.stat(os.path.join(directory, name))
            out[os.path.relpath(os.path.join(directory, name), root)] = (st.st_size, st.st_mtime_ns)
    return out


@dataclass(frozen=True)
class WriteFootprint:
    """What one operation added to a table folder and to its log."""

    data_files_written: int
    dv_files_written: int
    log_files_written: int
    bytes_written: int  # data + DV files (the log is reported separately)
    log_bytes_written: int
    files_removed: int  # distinct data files the new commits removed (files "touched")
    files_added: int  # add actions in the new commits (re-adds with a DV count too)


def _is_log(rel: str) -> bool:
    return rel.split(os.sep)[0] == LOG_DIR


def _is_dv(rel: str) -> bool:
    return os.path.basename(rel).startswith("deletion_vector_")


def footprint(root: str, before: dict[str, int], since_version: int) -> WriteFootprint:
    """Diff the folder against ``before`` and read the commits after ``since_version``."""
    after = folder_state(root)
    new = {rel: size for rel, size in after.items() if rel not in before and not os.path.basename(rel).startswith(".")}
    data = [rel for rel in new if not _is_log(rel) and not _is_dv(rel) and rel.endswith(".parquet")]
    dvs = [rel for rel in new if not _is_log(rel) and _is_dv(rel)]
    logs = [rel for rel in new if _is_log(rel)]
    removed: set[str] = set()
    added = 0
    for version in committed_versions(root):
        if version <= since_version:
            continue
        with open(os.path.join(root, LOG_DIR, f"{version:020d}.json")) as fh:
            for line in fh:
                if not line.strip():
                    continue
                action = json.loads(line)
                if "remove" in action:
                    removed.add(action["remove"]["path"])
                elif "add" in action:
                    added += 1
    return WriteFootprint(
        data_files_written=len(data),
        dv_files_written=len(dvs),
        log_files_written=len(logs),
        bytes_written=sum(new[r] for r in data + dvs),
        log_bytes_written=sum(new[r] for r in logs),
        files_removed=len(removed),
        files_added=added,
    )


def committed_versions(root: str) -> list[int]:
    names = os.listdir(os.path.join(root, LOG_DIR))
    return sorted(int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit())


def latest_version(root: str) -> int:
    return committed_versions(root)[-1]


def data_file_ranges(root: str) -> list[tuple[int, int, int]]:
    """(min id, max id, rows) of each Parquet file of a freshly written base."""
    ranges = []
    for directory, _, names in os.walk(root):
        if _is_log(os.path.relpath(directory, root)):
            continue
        for name in names:
            if name.endswith(".parquet"):
                ids = pq.read_table(os.path.join(directory, name), columns=["id"]).column("id")
                low_high = pc.min_max(ids)
                ranges.append((int(low_high["min"].as_py()), int(low_high["max"].as_py()), len(ids)))
    return sorted(ranges)


def check_base_layout(root: str, layout: Layout) -> None:
    """Fail early unless a base table has one file per id block (the premise of every prediction).

    Only each file's id range and row count must match: delta-rs writes a file's record batches
    in parallel, so ids within a file need not be in order, and nothing here depends on it.
    """
    expected = [
        (layout.start(b), layout.start(b + 1) - 1, layout.start(b + 1) - layout.start(b)) for b in range(layout.files)
    ]
    found = data_file_ranges(root)
    if found != expected:
        raise RuntimeError(
            f"base table {root} does not have one file per id block: {found[:5]}... vs {expected[:5]}..."
        )
