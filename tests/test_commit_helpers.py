"""Helpers shared by the commit tests (and importable by spawned worker processes); no tests here.

The truth the tests compare against is :func:`replay`, a deliberately naive in-memory model of
log replay written here independently of dvengine.log: a dict keyed by (path, DV unique id).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dvengine.commit.commit_info import delta_json
from dvengine.commit.transaction import Transaction
from dvengine.protocol.actions import (
    AddFile,
    DeletionVectorDescriptor,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Txn,
)
from dvengine.protocol.features import DEFAULT_NEW_TABLE_PROTOCOL

SCHEMA = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)
METADATA = Metadata(id="tbl-1", schema_string=SCHEMA, configuration={"delta.enableDeletionVectors": "true"})


@dataclass(frozen=True)
class FakeSnapshot:
    table_root: str
    version: int
    protocol: Protocol = DEFAULT_NEW_TABLE_PROTOCOL
    metadata: Metadata = METADATA
    app_transactions: Mapping[str, Txn] = field(default_factory=dict)
    domain_metadata: Mapping[str, DomainMetadata] = field(default_factory=dict)


def stats(n: int = 10, tight: bool = True) -> str:
    return json.dumps(
        {"numRecords": n, "minValues": {"id": 0}, "maxValues": {"id": n - 1}, "nullCount": {"id": 0}, "tightBounds": tight}
    )


def add(path: str, dv: DeletionVectorDescriptor | None = None) -> AddFile:
    return AddFile(path, {}, 100, 1, True, stats(tight=dv is None), deletion_vector=dv)


def dv(tag: str, cardinality: int = 1) -> DeletionVectorDescriptor:
    return DeletionVectorDescriptor("u", (tag * 20)[:20], 34, cardinality, offset=1)


def create_table(root: str, files: int = 6) -> int:
    txn = Transaction(root, None, "CREATE TABLE", {"mode": "ErrorIfExists"})
    txn.update_protocol(DEFAULT_NEW_TABLE_PROTOCOL)
    txn.update_metadata(METADATA)
    txn.add_actions(add(f"f{i}.parquet") for i in range(files))
    return txn.commit()


def redv(root: str, path: str, tag: str, read_version: int = 0) -> int:
    """A DELETE-by-DV of one file: read it (predicate selects only it), remove old, add new DV."""
    txn = Transaction(root, FakeSnapshot(root, read_version), "DELETE", {"predicate": delta_json([f"path = {path}"])})
    old = add(path)
    txn.record_read([old], lambda f: f.path == path)
    txn.add_actions([old.to_remove(1), add(path, dv(tag))])
    return txn.commit({"numDeletedRows": 1})


def append(root: str, path: str, read_version: int = 0) -> int:
    txn = Transaction(root, FakeSnapshot(root, read_version), "WRITE", {"mode": "Append", "partitionBy": delta_json([])})
    txn.add_actions([add(path)])
    return txn.commit({"numFiles": 1})


def log_versions(root: str) -> list[int]:
    return sorted(int(n[:20]) for n in os.listdir(os.path.join(root, "_delta_log")) if n.endswith(".json") and n[0] != ".")


def log_lines(root: str) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for v in log_versions(root):
        with open(os.path.join(root, "_delta_log", f"{v:020d}.json")) as fh:
            out.extend((v, json.loads(line)) for line in fh if line.strip())
    return out


def replay(root: str) -> dict[tuple[str, str | None], dict[str, Any]]:
    """Independent model of the live files: apply adds/removes in order, keyed by (path, dv id)."""
    live: dict[tuple[str, str | None], dict[str, Any]] = {}

    def key(obj: dict[str, Any]) -> tuple[str, str | None]:
        d = obj.get("deletionVector")
        dv_id = None if not d else d["storageType"] + d["pathOrInlineDv"] + (f"@{d['offset']}" if "offset" in d else "")
        return (obj["path"], dv_id)

    for _, line in log_lines(root):
        if "add" in line:
            live[key(line["add"])] = line["add"]
        elif "remove" in line:
            live.pop(key(line["remove"]), None)
    return live


def remove_of(path: str) -> RemoveFile:
    return add(path).to_remove(1)
