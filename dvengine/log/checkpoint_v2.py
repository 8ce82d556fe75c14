"""Writing UUID-named V2 checkpoints with a sidecar (PROTOCOL.md "V2 Checkpoint Table Feature",
"V2 Spec", "UUID-named checkpoint", "Sidecar Files").

Used when the table supports ``v2Checkpoint`` (reader and writer feature) and its property
``delta.checkpointPolicy`` is ``v2`` (what Delta sets when the feature is enabled). Layout:
- ``_delta_log/_sidecars/<uuid>.parquet``: every add and unexpired remove (``add`` and ``remove``
  columns only), written first; none when there are no file actions;
- ``_delta_log/<version>.checkpoint.<uuid>.parquet``: exactly one ``checkpointMetadata``
  (``version``, tags ``sidecarNumActions``/``sidecarSizeInBytes``/``numOfAddFiles``), protocol,
  metaData, txn, domainMetadata, and one ``sidecar`` action per sidecar file (its bare name, size,
  time). The protocol forbids splitting file actions between the top file and sidecars, so all
  of them go to the sidecar.
Both files are written atomically (temp file + rename); the top file last, so a reader that sees
it finds its sidecar. A crash between the two leaves an unreferenced sidecar, which no reader
looks at (cleanup of ``_sidecars`` is not implemented yet, as for sidecars written by others).
A fresh UUID per attempt means racing writers never overwrite each other's files.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from dvengine.log.checkpoint_schema import STRING_MAP
from dvengine.log.filenames import SIDECAR_DIR_NAME, VERSION_DIGITS
from dvengine.log.snapshot import Snapshot
from dvengine.protocol.actions import Protocol
from dvengine.protocol.feature_catalog import with_feature
from dvengine.protocol.features import V2_CHECKPOINT, reader_features, writer_features
from dvengine.storage.logstore import LogStore
from dvengine.storage.uris import join

CHECKPOINT_POLICY = "delta.checkpointPolicy"
CHECKPOINT_METADATA = pa.struct([("version", pa.int64()), ("tags", STRING_MAP)])
SIDECAR = pa.struct(
    [("path", pa.string()), ("sizeInBytes", pa.int64()), ("modificationTime", pa.int64()), ("tags", STRING_MAP)]
)


def uses_v2_checkpoints(snapshot: Snapshot) -> bool:
    """The table supports ``v2Checkpoint`` and asks for V2 checkpoints (``delta.checkpointPolicy=v2``)."""
    supported = V2_CHECKPOINT in writer_features(snapshot.protocol) and V2_CHECKPOINT in reader_features(snapshot.protocol)
    return supported and snapshot.configuration.get(CHECKPOINT_POLICY, "classic").strip().lower() == "v2"


def protocol_for_policy(protocol: Protocol, configuration: Mapping[str, str]) -> Protocol:
    """``protocol`` with ``v2Checkpoint`` when the configuration asks for V2 checkpoints (Delta adds it too)."""
    if configuration.get(CHECKPOINT_POLICY, "classic").strip().lower() != "v2" or V2_CHECKPOINT in writer_features(protocol):
        return protocol
    return with_feature(protocol, V2_CHECKPOINT)


def v2_checkpoint_file_name(version: int, checkpoint_id: str) -> str:
    return f"{version:0{VERSION_DIGITS}d}.checkpoint.{checkpoint_id}.parquet"


def _parquet(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), sink, compression="snappy")
    return bytes(sink.getvalue().to_pybytes())


def write_v2_checkpoint(
    snapshot: Snapshot,
    store: LogStore,
    log_path: str,
    table_rows: list[dict[str, Any]],
    file_rows: list[dict[str, Any]],
    schema: pa.Schema,
    now_ms: int | None = None,
) -> tuple[str, int, int, int]:
    """Write the sidecar and the top file; (top file path, actions in the checkpoint, bytes, adds).

    ``schema`` is the classic checkpoint schema of the table (so ``add`` keeps the columns the
    table needs, e.g. ``clusteringProvider``); the top file adds ``checkpointMetadata`` and
    ``sidecar`` columns to it.
    """
    written_ms = int(time.time() * 1000) if now_ms is None else now_ms
    sidecars: list[dict[str, Any]] = []
    sidecar_bytes = 0
    if file_rows:
        name = f"{uuid.uuid4()}.parquet"
        data = _parquet(file_rows, pa.schema([schema.field("add"), schema.field("remove")]))
        store.write(join(join(log_path, SIDECAR_DIR_NAME), name), data)
        sidecar_bytes = len(data)
        sidecars.append({"sidecar": {"path": name, "sizeInBytes": len(data), "modificationTime": written_ms, "tags": None}})
    num_adds = sum(1 for r in file_rows if "add" in r)
    tags = {"sidecarNumActions": str(len(file_rows)), "sidecarSizeInBytes": str(sidecar_bytes), "numOfAddFiles": str(num_adds)}
    top_rows = [{"checkpointMetadata": {"version": snapshot.version, "tags": list(tags.items())}}, *table_rows, *sidecars]
    top_schema = schema.append(pa.field("checkpointMetadata", CHECKPOINT_METADATA)).append(pa.field("sidecar", SIDECAR))
    top = _parquet(top_rows, top_schema)
    path = join(log_path, v2_checkpoint_file_name(snapshot.version, str(uuid.uuid4())))
    store.write(path, top)
    return path, len(top_rows) + len(file_rows), len(top) + sidecar_bytes, num_adds
