"""Reading checkpoints: classic single-part, multi-part, and V2 (JSON or Parquet with sidecars).

Checkpoint Parquet files are written by many engines with slightly different schemas: Delta
Spark adds ``maxRowIndex`` to the DV struct and ``partitionValues_parsed`` / ``stats_parsed``
to ``add``, some writers omit ``txn`` or ``domainMetadata`` columns entirely. So only the
top-level action columns that are present are read, unknown struct fields are ignored by the
action parsers, and ``stats_parsed`` is used only when the JSON ``stats`` string is missing.
Any Parquet or schema failure is a LogCorruptedError naming the file, which lets the caller
fall back to an older checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dvengine.errors import LogCorruptedError, ProtocolError
from dvengine.log.commit_file import parse_actions
from dvengine.log.filenames import SIDECAR_DIR_NAME, LogFileKind
from dvengine.log.listing import CheckpointFiles
from dvengine.protocol.actions import Action, RemoveFile, Sidecar, action_from_json
from dvengine.storage.logstore import LogStore

ACTION_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata", "add", "remove", "checkpointMetadata", "sidecar")
_DERIVED_FIELDS = ("partitionValues_parsed", "stats_parsed")


def _drop_derived(arr: pa.StructArray) -> tuple[pa.StructArray, pa.Array | None]:
    """Remove ``*_parsed`` fields (typed copies we do not need); return stats_parsed if useful."""
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    if not any(n in _DERIVED_FIELDS for n in names):
        return arr, None
    children = arr.flatten()
    keep = [i for i, n in enumerate(names) if n not in _DERIVED_FIELDS]
    stats_parsed = None
    if "stats_parsed" in names:
        stats_idx = names.index("stats") if "stats" in names else None
        if stats_idx is None or children[stats_idx].null_count > 0:
            stats_parsed = children[names.index("stats_parsed")]
    rebuilt = pa.StructArray.from_arrays([children[i] for i in keep], names=[names[i] for i in keep])
    return rebuilt, stats_parsed


def _map_rows(arr: pa.MapArray) -> list[dict[Any, Any] | None]:
    """``to_pylist(maps_as_pydicts="lossy")`` of a map array, built from its flat keys and items.

    pyarrow's own conversion costs ~7 µs per row even for empty maps (7 ms for the
    ``partitionValues`` of 1,000 adds, half of a checkpoint's decode); the offsets make it a slice
    per row. A repeated key keeps its last value, as "lossy" does.
    """
    if len(arr.keys) == 0:
        return [None if not valid else {} for valid in arr.is_valid().to_pylist()]
    offsets = arr.offsets.to_pylist()
    keys = arr.keys.to_pylist()
    items = _values(arr.items)
    valid_rows = arr.is_valid().to_pylist()
    return [dict(zip(keys[offsets[i]:offsets[i + 1]], items[offsets[i]:offsets[i + 1]])) if valid_rows[i] else None
            for i in range(len(arr))]


def _values(arr: pa.Array) -> list[Any]:
    """Python values of ``arr`` with maps as dicts, as ``to_pylist(maps_as_pydicts="lossy")``."""
    if arr.null_count == len(arr):
        return [None] * len(arr)
    if isinstance(arr, pa.MapArray):
        return _map_rows(arr)
    if isinstance(arr, pa.StructArray):
        return _struct_rows(arr)
    values: list[Any] = arr.to_pylist(maps_as_pydicts="lossy")
    return values


def _struct_rows(arr: pa.StructArray) -> list[dict[str, Any] | None]:
    """Rows of a struct array, converted column by column (children all null cost nothing)."""
    names = [arr.type.field(i).name for i in range(arr.type.num_fields)]
    columns = [_values(child) for child in arr.flatten()]
    rows: list[dict[str, Any] | None] = [dict(zip(names, values)) for values in zip(*columns)] if columns \
        else [{} for _ in range(len(arr))]
    if arr.null_count:
        rows = [row if valid else None for row, valid in zip(rows, arr.is_valid().to_pylist())]
    return rows


def _rows(column: pa.ChunkedArray) -> Iterable[tuple[dict[str, Any], dict[str, Any] | None]]:
    for chunk in column.chunks:
        valid = chunk.filter(pc.is_valid(chunk))
        if len(valid) == 0:
            continue
        arr, stats_parsed = _drop_derived(valid)
        rows = _struct_rows(arr)
        parsed = None if stats_parsed is None else _values(stats_parsed)
        for i, row in enumerate(rows):
            assert row is not None  # invalid rows were filtered out above
            yield row, None if parsed is None else parsed[i]


def actions_from_parquet(data: bytes, path: str, with_removes: bool = True) -> list[Action]:
    """Every action row of one checkpoint (or sidecar) Parquet file.

    ``with_removes=False`` skips the tombstone column: a checkpoint is reconciled, so its removes
    never cancel its adds, and only VACUUM / checkpoint writing need them.
    """
    try:
        pf = pq.ParquetFile(pa.BufferReader(data))
        present = [c for c in ACTION_COLUMNS if c in pf.schema_arrow.names and (with_removes or c != "remove")]
        table = pf.read(columns=present)
    except (pa.ArrowException, OSError) as exc:
        raise LogCorruptedError(f"checkpoint file {path} is not readable Parquet: {exc}") from None
    out: list[Action] = []
    for name in present:
        for row, stats_parsed in _rows(table.column(name)):
            if name == "add" and row.get("stats") is None and stats_parsed is not None:
                row["stats"] = json.dumps(stats_parsed, separators=(",", ":"), default=str)
            try:
                action = action_from_json({name: row})
            except ProtocolError as exc:
                raise LogCorruptedError(f"checkpoint file {path}: malformed {name} row: {exc}") from exc
            if action is not None:
                out.append(action)
    return out


def sidecar_path(log_path: str, sidecar: Sidecar) -> str:
    """Sidecar paths are relative to ``_delta_log/_sidecars`` unless they are absolute URIs."""
    if "://" in sidecar.path or sidecar.path.startswith("file:"):
        return unquote(urlparse(sidecar.path).path)
    return os.path.join(log_path, SIDECAR_DIR_NAME, unquote(sidecar.path))


def _read(store: LogStore, path: str) -> bytes:
    try:
        return store.read_bytes(path)
    except FileNotFoundError:
        raise LogCorruptedError(f"checkpoint file {path} disappeared while reading the log") from None


def read_checkpoint(
    store: LogStore, checkpoint: CheckpointFiles, log_path: str, with_removes: bool = True
) -> list[Action]:
    """All actions of a complete checkpoint, sidecars expanded; Sidecar actions are dropped."""
    actions: list[Action] = []
    for info in checkpoint.files:
        data = _read(store, info.path)
        if checkpoint.kind is LogFileKind.CHECKPOINT_V2 and info.path.endswith(".json"):
            actions.extend(a for a in parse_actions(data, info.path) if with_removes or not isinstance(a, RemoveFile))
        else:
            actions.extend(actions_from_parquet(data, info.path, with_removes))
    out: list[Action] = []
    for action in actions:
        if isinstance(action, Sidecar):
            path = sidecar_path(log_path, action)
            if not store.exists(path):
                raise LogCorruptedError(
                    f"checkpoint of version {checkpoint.version} references sidecar {path}, which does not exist"
                )
            out.extend(a for a in actions_from_parquet(_read(store, path), path, with_removes) if not isinstance(a, Sidecar))
        else:
            out.append(action)
    return out
