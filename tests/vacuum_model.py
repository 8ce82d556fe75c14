"""An independent model of what VACUUM (LITE and FULL) must keep and may delete, from the raw JSON log.

The model reads the commit files as JSON lines (not through dvengine's replay), keys logical files
as Delta does (path plus DV identity), and derives:

- what each version references (data files and DV files), hence what a reader time-travelling to
  any version inside the retention needs;
- what VACUUM LITE may take: the files named by the ``remove`` actions (deletionTimestamp before
  the cutoff) and the ``cdc`` actions of the commits it reads (Delta's
  ``VacuumCommand.getFilesFromDeltaLog``), minus what the window needs, and only if on disk.

Plus readers at a given version for the three independent implementations (dvengine, delta-rs,
DuckDB's delta extension), locally or on an S3 endpoint.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
from interop import sort_rows

from dvengine import DeltaTable
from dvengine.bench.verify import duckdb_delta_connection
from dvengine.dv.descriptor import dv_file_relative_path

Row = tuple[Any, ...]
Action = dict[str, Any]


def parse_commit(data: bytes) -> list[Action]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def dv_relpath(dv: Mapping[str, Any] | None) -> str | None:
    """The table-relative file of a ``u`` deletion vector (None: inline or none)."""
    if not dv or dv.get("storageType") != "u":
        assert not dv or dv.get("storageType") == "i", f"tests use u/i deletion vectors only, got {dv}"
        return None
    return dv_file_relative_path(dv["pathOrInlineDv"]).replace("\\", "/")


def _dv_key(dv: Mapping[str, Any] | None) -> str:
    return "" if not dv else f"{dv['storageType']}{dv['pathOrInlineDv']}@{dv.get('offset')}"


def _file_names(action: Mapping[str, Any]) -> set[str]:
    names = {unquote(action["path"])}
    dv = dv_relpath(action.get("deletionVector"))
    if dv is not None:
        names.add(dv)
    return names


class LogModel:
    """Versions -> raw actions, and the questions VACUUM's correctness depends on."""

    def __init__(self, commits: Mapping[int, list[Action]]) -> None:
        self.commits = dict(commits)
        self.latest = max(self.commits)

    @classmethod
    def read(cls, read_commit: Callable[[int], bytes], versions: Sequence[int]) -> LogModel:
        return cls({v: parse_commit(read_commit(v)) for v in versions})

    def files_at(self, version: int) -> set[str]:
        """Data and DV files version ``version`` references (replayed from version 0)."""
        live: dict[tuple[str, str], Action] = {}
        for v in range(version + 1):
            for action in self.commits[v]:
                if "add" in action:
                    a = action["add"]
                    live[(unquote(a["path"]), _dv_key(a.get("deletionVector")))] = a
                elif "remove" in action:
                    r = action["remove"]
                    live.pop((unquote(r["path"]), _dv_key(r.get("deletionVector"))), None)
        return set().union(*(_file_names(a) for a in live.values())) if live else set()

    def cdc_of(self, version: int) -> set[str]:
        return {unquote(a["cdc"]["path"]) for a in self.commits[version] if "cdc" in a}

    def needed_inside_window(self, boundary: int) -> set[str]:
        """Files some reader inside the window needs: every version from the one current at the
        cutoff to the latest, and the change feed of the commits after the cutoff."""
        needed: set[str] = set()
        for v in range(boundary, self.latest + 1):
            needed |= self.files_at(v)
        for v in range(boundary + 1, self.latest + 1):
            needed |= self.cdc_of(v)
        return needed

    def named_by_removes(self, start: int, end: int, cutoff_ms: int) -> set[str]:
        """Delta's LITE candidates: removes older than the cutoff and cdc files of commits start..end."""
        named: set[str] = set()
        for v in range(start, end + 1):
            for action in self.commits[v]:
                if "remove" in action and (action["remove"].get("deletionTimestamp") or 0) < cutoff_ms:
                    named |= _file_names(action["remove"])
                elif "cdc" in action:
                    named.add(unquote(action["cdc"]["path"]))
        return named

    def lite_deletes(self, start: int, end: int, cutoff_ms: int, on_disk: set[str]) -> set[str]:
        return (self.named_by_removes(start, end, cutoff_ms) - self.needed_inside_window(end)) & on_disk


    def delta_valid_files(self, cutoff_ms: int) -> set[str]:
        """Delta's ``getValidFilesFromSnapshot`` at the latest version: every live file and every
        tombstone whose deletionTimestamp is not before the cutoff, each path with the folders above
        it, plus their DV files (no folders for those)."""
        live: dict[tuple[str, str], Action] = {}
        tombstones: dict[tuple[str, str], Action] = {}
        for v in range(self.latest + 1):
            for action in self.commits[v]:
                if "add" in action:
                    a = action["add"]
                    key = (unquote(a["path"]), _dv_key(a.get("deletionVector")))
                    live[key] = a
                    tombstones.pop(key, None)
                elif "remove" in action:
                    r = action["remove"]
                    key = (unquote(r["path"]), _dv_key(r.get("deletionVector")))
                    live.pop(key, None)
                    tombstones[key] = r
        valid: set[str] = set()
        kept = [*live.values(), *(r for r in tombstones.values() if (r.get("deletionTimestamp") or 0) >= cutoff_ms)]
        for action in kept:
            path = unquote(action["path"])
            parts = path.split("/")
            valid.update({path, *("/".join(parts[:i]) for i in range(1, len(parts)))})
            dv = dv_relpath(action.get("deletionVector"))
            if dv is not None:
                valid.add(dv)
        return valid


def delta_hidden(name: str, partition_columns: Sequence[str]) -> bool:
    """Delta's ``DeltaTableUtils.isHiddenDirectory``: ``.``/``_`` names are hidden except
    ``_delta_index``, ``_change_data`` and partition folders."""
    return name.startswith((".", "_")) and not name.startswith(("_delta_index", "_change_data")) and not any(
        name.startswith(f"{c}=") for c in partition_columns
    )


def delta_gc_diff(root: Path, partition_columns: Sequence[str], cutoff_ms: int, valid: set[str]) -> tuple[set[str], set[str]]:
    """Delta's VACUUM FULL diff, written out from ``VacuumCommand.gc``: (files, folders), relative.

    One row per listed folder and file (hidden names not listed); a file older than the cutoff adds
    a row for itself and for each folder above it; rows grouped by path; the valid paths taken
    away; the paths seen exactly once remain."""
    rows: Counter[str] = Counter()
    folders: set[str] = set()
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if not delta_hidden(d, partition_columns)]
        here = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if here == "." else here + "/"
        for d in dirnames:
            rows[prefix + d] += 1
            folders.add(prefix + d)
        for name in names:
            if delta_hidden(name, partition_columns):
                continue
            if int(os.stat(os.path.join(dirpath, name)).st_mtime * 1000) < cutoff_ms:
                path = prefix + name
                parts = path.split("/")
                rows.update([path, *("/".join(parts[:i]) for i in range(1, len(parts)))])
    diff = {p for p, n in rows.items() if n == 1 and p not in valid}
    return diff - folders, diff & folders


def after_delta_deletes(root: Path, files: set[str], folders: set[str]) -> set[str]:
    """Every path (files and folders, hidden ones too) left once ``files`` are deleted and then each
    of ``folders`` deepest first when nothing is left inside it (Hadoop's non-recursive delete)."""
    left = {p.relative_to(root).as_posix() for p in root.rglob("*")} - files
    for folder in sorted(folders, key=lambda f: (-f.count("/"), f)):
        if not any(p.startswith(folder + "/") for p in left):
            left.discard(folder)
    return left


# --- readers at a version -------------------------------------------------------------------------


def _rows(table: pa.Table, columns: Sequence[str]) -> list[Row]:
    return sort_rows([tuple(d[c] for c in columns) for d in table.to_pylist()])


def rows_dvengine(path: str, version: int, columns: Sequence[str], options: Mapping[str, str] | None = None) -> list[Row]:
    table = DeltaTable.forPath(None, path, storage_options=dict(options) if options else None)
    return _rows(table.toArrow(version=version), columns)


def rows_delta_rs(path: str, version: int, columns: Sequence[str], options: Mapping[str, str] | None = None) -> list[Row]:
    from deltalake import DeltaTable as RsTable
    from deltalake import QueryBuilder

    table = RsTable(path, version=version, storage_options=dict(options) if options else None)
    cols = ", ".join(f'"{c}"' for c in columns)
    reader = QueryBuilder().register("t", table).execute(f"select {cols} from t")
    return _rows(pa.table(reader.read_all()), columns)


def rows_duckdb(path: str, version: int, columns: Sequence[str], options: Mapping[str, str] | None = None) -> list[Row]:
    """DuckDB's delta extension (delta-kernel-rs) at ``version``: ``ATTACH ... (TYPE delta, VERSION n)``."""
    with duckdb_delta_connection(options) as con:
        assert con is not None, "duckdb with duckdb-ext-delta (and duckdb-ext-httpfs for S3) must be installed"
        con.execute(f"ATTACH '{path}' AS t (TYPE delta, VERSION {version})")
        cols = ", ".join(f'"{c}"' for c in columns)
        return _rows(con.execute(f"select {cols} from t").fetch_arrow_table(), columns)


READERS = {"dvengine": rows_dvengine, "delta-rs": rows_delta_rs, "duckdb": rows_duckdb}


def assert_versions_read(
    path: str,
    expected: Mapping[int, Sequence[Row]],
    versions: Sequence[int],
    columns: Sequence[str],
    options: Mapping[str, str] | None = None,
) -> None:
    """Each reader returns the model's rows at each of ``versions``."""
    for version in versions:
        want = sort_rows(expected[version])
        for name, read in READERS.items():
            got = read(path, version, columns, options)
            assert got == want, f"{name} at version {version}: {len(got)} rows, the model has {len(want)}"
