"""The actions of the Delta transaction log as immutable, typed values.

Each class mirrors one action of PROTOCOL.md ("Actions") with snake_case attributes and a
``to_json``/``from_json`` pair that speaks the log's camelCase JSON. Readers must tolerate
fields they do not know (Delta Spark checkpoints carry ``maxRowIndex`` in the DV struct, newer
writers add row-tracking fields), so ``from_json`` ignores unknown keys instead of failing.
Optional fields that are absent are omitted on write: the protocol forbids empty structs or
empty strings where a field is absent, and real readers broke on them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, TypeAlias, cast

from dvengine.errors import ProtocolError

JsonDict: TypeAlias = dict[str, Any]


def _require(obj: Mapping[str, Any], key: str, action: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise ProtocolError(f"{action} action is missing required field '{key}': {json.dumps(obj)[:300]}") from None


def _put_optional(out: JsonDict, key: str, value: Any) -> None:
    if value is not None:
        out[key] = value


def _str_map(value: Any) -> dict[str, str | None]:
    return {} if value is None else {str(k): (None if v is None else str(v)) for k, v in dict(value).items()}


# --- deletion vector descriptor ---------------------------------------------------------------

STORAGE_UUID = "u"
STORAGE_INLINE = "i"
STORAGE_PATH = "p"
STORAGE_TYPES = (STORAGE_UUID, STORAGE_INLINE, STORAGE_PATH)


@dataclass(frozen=True, slots=True)
class DeletionVectorDescriptor:
    """Where a file's deletion vector lives and how many rows it deletes.

    ``unique_id`` is what makes two logical files with the same path different: the log
    reconciles adds and removes on (path, unique id).
    """

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None
    max_row_index: int | None = None

    def __post_init__(self) -> None:
        if self.storage_type not in STORAGE_TYPES:
            raise ProtocolError(f"deletion vector storageType must be one of {STORAGE_TYPES}, got {self.storage_type!r}")
        if self.size_in_bytes < 0 or self.cardinality < 0:
            raise ProtocolError(
                f"deletion vector sizeInBytes and cardinality must be >= 0, got {self.size_in_bytes}, {self.cardinality}"
            )
        if self.storage_type == STORAGE_INLINE and self.offset is not None:
            raise ProtocolError("an inline deletion vector must not have an offset")

    @property
    def unique_id(self) -> str:
        base = self.storage_type + self.path_or_inline_dv
        return base if self.offset is None else f"{base}@{self.offset}"

    @property
    def is_inline(self) -> bool:
        return self.storage_type == STORAGE_INLINE

    def to_json(self) -> JsonDict:
        out: JsonDict = {"storageType": self.storage_type, "pathOrInlineDv": self.path_or_inline_dv}
        _put_optional(out, "offset", self.offset)
        out["sizeInBytes"] = self.size_in_bytes
        out["cardinality"] = self.cardinality
        _put_optional(out, "maxRowIndex", self.max_row_index)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DeletionVectorDescriptor:
        offset = obj.get("offset")
        max_row = obj.get("maxRowIndex")
        return cls(
            storage_type=str(_require(obj, "storageType", "deletionVector")),
            path_or_inline_dv=str(_require(obj, "pathOrInlineDv", "deletionVector")),
            size_in_bytes=int(_require(obj, "sizeInBytes", "deletionVector")),
            cardinality=int(_require(obj, "cardinality", "deletionVector")),
            offset=None if offset is None else int(offset),
            max_row_index=None if max_row is None else int(max_row),
        )


def dv_unique_id(dv: DeletionVectorDescriptor | None) -> str | None:
    return None if dv is None else dv.unique_id


def _dv_from(obj: Mapping[str, Any]) -> DeletionVectorDescriptor | None:
    raw = obj.get("deletionVector")
    # Some writers emitted an empty struct for "no DV"; treat it as absent rather than failing.
    if not raw or raw.get("storageType") in (None, ""):
        return None
    return DeletionVectorDescriptor.from_json(raw)


# --- file actions -------------------------------------------------------------------------------


@lru_cache(maxsize=65536)
def _num_records_of_stats(stats: str | None) -> int | None:
    if not stats:
        return None
    try:
        value = json.loads(stats).get("numRecords")
    except (json.JSONDecodeError, AttributeError) as exc:
        raise ProtocolError(f"add.stats is not a JSON object ({exc}): {stats[:200]}") from None
    return None if value is None else int(value)


@dataclass(frozen=True, slots=True)
class AddFile:
    """A data file that is part of the table, optionally with a deletion vector."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: Mapping[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        """The logical-file identity used by log replay: (path, DV unique id)."""
        return (self.path, dv_unique_id(self.deletion_vector))

    @property
    def deleted_row_count(self) -> int:
        return 0 if self.deletion_vector is None else self.deletion_vector.cardinality

    @property
    def num_records(self) -> int | None:
        """Physical rows of the data file from ``stats.numRecords`` (None when the writer gave none).

        The one place that reads it: DV row bounds, the rewrite threshold and live-row counts all
        start from here. Parsing is cached per stats string, since a file is asked many times.
        """
        return _num_records_of_stats(self.stats)

    @property
    def live_records(self) -> int | None:
        """Rows still visible (physical rows minus the DV's cardinality), None without stats."""
        physical = self.num_records
        return None if physical is None else physical - self.deleted_row_count

    def with_deletion_vector(self, dv: DeletionVectorDescriptor | None, stats: str | None) -> AddFile:
        return replace(self, deletion_vector=dv, stats=stats, data_change=True)

    def to_remove(self, deletion_timestamp: int, data_change: bool = True) -> RemoveFile:
        """The remove that retires exactly this logical file (same path and DV)."""
        return RemoveFile(
            path=self.path,
            deletion_timestamp=deletion_timestamp,
            data_change=data_change,
            extended_file_metadata=True,
            partition_values=dict(self.partition_values),
            size=self.size,
            stats=self.stats,
            tags=self.tags,
            deletion_vector=self.deletion_vector,
            base_row_id=self.base_row_id,
            default_row_commit_version=self.default_row_commit_version,
        )

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        _put_optional(out, "stats", self.stats)
        _put_optional(out, "tags", None if self.tags is None else dict(self.tags))
        _put_optional(out, "deletionVector", None if self.deletion_vector is None else self.deletion_vector.to_json())
        _put_optional(out, "baseRowId", self.base_row_id)
        _put_optional(out, "defaultRowCommitVersion", self.default_row_commit_version)
        _put_optional(out, "clusteringProvider", self.clustering_provider)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AddFile:
        tags = obj.get("tags")
        return cls(
            path=str(_require(obj, "path", "add")),
            partition_values=_str_map(obj.get("partitionValues")),
            size=int(_require(obj, "size", "add")),
            modification_time=int(obj.get("modificationTime") or 0),
            data_change=bool(obj.get("dataChange", True)),
            stats=obj.get("stats"),
            tags=None if tags is None else _str_map(tags),
            deletion_vector=_dv_from(obj),
            base_row_id=obj.get("baseRowId"),
            default_row_commit_version=obj.get("defaultRowCommitVersion"),
            clustering_provider=obj.get("clusteringProvider"),
        )


@dataclass(frozen=True, slots=True)
class RemoveFile:
    """A tombstone: the logical file (path, DV) is no longer part of the table."""

    path: str
    deletion_timestamp: int | None = None
    data_change: bool = True
    extended_file_metadata: bool | None = None
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: Mapping[str, str | None] | None = None
    deletion_vector: DeletionVectorDescriptor | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.path, dv_unique_id(self.deletion_vector))

    def to_json(self) -> JsonDict:
        out: JsonDict = {"path": self.path}
        _put_optional(out, "deletionTimestamp", self.deletion_timestamp)
        out["dataChange"] = self.data_change
        _put_optional(out, "extendedFileMetadata", self.extended_file_metadata)
        _put_optional(out, "partitionValues", None if self.partition_values is None else dict(self.partition_values))
        _put_optional(out, "size", self.size)
        _put_optional(out, "stats", self.stats)
        _put_optional(out, "tags", None if self.tags is None else dict(self.tags))
        _put_optional(out, "deletionVector", None if self.deletion_vector is None else self.deletion_vector.to_json())
        _put_optional(out, "baseRowId", self.base_row_id)
        _put_optional(out, "defaultRowCommitVersion", self.default_row_commit_version)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RemoveFile:
        pv = obj.get("partitionValues")
        tags = obj.get("tags")
        ts = obj.get("deletionTimestamp")
        size = obj.get("size")
        return cls(
            path=str(_require(obj, "path", "remove")),
            deletion_timestamp=None if ts is None else int(ts),
            data_change=bool(obj.get("dataChange", True)),
            extended_file_metadata=obj.get("extendedFileMetadata"),
            partition_values=None if pv is None else _str_map(pv),
            size=None if size is None else int(size),
            stats=obj.get("stats"),
            tags=None if tags is None else _str_map(tags),
            deletion_vector=_dv_from(obj),
            base_row_id=obj.get("baseRowId"),
            default_row_commit_version=obj.get("defaultRowCommitVersion"),
        )


@dataclass(frozen=True, slots=True)
class AddCDCFile:
    """A change-data file; it carries no table rows, so readers of the table skip it."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    data_change: bool = False
    tags: Mapping[str, str | None] | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "dataChange": self.data_change,
        }
        _put_optional(out, "tags", None if self.tags is None else dict(self.tags))
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> AddCDCFile:
        tags = obj.get("tags")
        return cls(
            path=str(_require(obj, "path", "cdc")),
            partition_values=_str_map(obj.get("partitionValues")),
            size=int(obj.get("size") or 0),
            data_change=bool(obj.get("dataChange", False)),
            tags=None if tags is None else _str_map(tags),
        )


# --- table-level actions -----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Protocol:
    """Reader/writer versions and, from reader 3 / writer 7 on, explicit feature lists."""

    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...] | None = None
    writer_features: tuple[str, ...] | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"minReaderVersion": self.min_reader_version, "minWriterVersion": self.min_writer_version}
        _put_optional(out, "readerFeatures", None if self.reader_features is None else list(self.reader_features))
        _put_optional(out, "writerFeatures", None if self.writer_features is None else list(self.writer_features))
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Protocol:
        rf = obj.get("readerFeatures")
        wf = obj.get("writerFeatures")
        return cls(
            min_reader_version=int(_require(obj, "minReaderVersion", "protocol")),
            min_writer_version=int(_require(obj, "minWriterVersion", "protocol")),
            reader_features=None if rf is None else tuple(str(f) for f in rf),
            writer_features=None if wf is None else tuple(str(f) for f in wf),
        )


@dataclass(frozen=True, slots=True)
class Format:
    provider: str = "parquet"
    options: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Metadata:
    """Table identity, schema (as the JSON string the log stores), partitioning and properties."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    format: Format = field(default_factory=Format)
    name: str | None = None
    description: str | None = None
    created_time: int | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"id": self.id}
        _put_optional(out, "name", self.name)
        _put_optional(out, "description", self.description)
        out["format"] = {"provider": self.format.provider, "options": dict(self.format.options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        _put_optional(out, "createdTime", self.created_time)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Metadata:
        fmt = obj.get("format") or {}
        created = obj.get("createdTime")
        return cls(
            id=str(_require(obj, "id", "metaData")),
            schema_string=str(_require(obj, "schemaString", "metaData")),
            partition_columns=tuple(str(c) for c in (obj.get("partitionColumns") or ())),
            configuration={str(k): str(v) for k, v in (obj.get("configuration") or {}).items() if v is not None},
            format=Format(
                provider=str(fmt.get("provider", "parquet")),
                options={str(k): str(v) for k, v in (fmt.get("options") or {}).items()},
            ),
            name=obj.get("name"),
            description=obj.get("description"),
            created_time=None if created is None else int(created),
        )


@dataclass(frozen=True, slots=True)
class Txn:
    """Application transaction watermark, used for idempotent writes by streaming jobs."""

    app_id: str
    version: int
    last_updated: int | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"appId": self.app_id, "version": self.version}
        _put_optional(out, "lastUpdated", self.last_updated)
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Txn:
        lu = obj.get("lastUpdated")
        return cls(
            app_id=str(_require(obj, "appId", "txn")),
            version=int(_require(obj, "version", "txn")),
            last_updated=None if lu is None else int(lu),
        )


@dataclass(frozen=True, slots=True)
class DomainMetadata:
    domain: str
    configuration: str
    removed: bool = False

    def to_json(self) -> JsonDict:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> DomainMetadata:
        return cls(
            domain=str(_require(obj, "domain", "domainMetadata")),
            configuration=str(obj.get("configuration") or ""),
            removed=bool(obj.get("removed", False)),
        )


@dataclass(frozen=True, slots=True)
class CommitInfo:
    """Provenance of a commit. Free-form by the protocol, so the raw mapping is kept whole."""

    values: Mapping[str, Any]

    @property
    def timestamp(self) -> int | None:
        ts = self.values.get("timestamp")
        return None if ts is None else int(ts)

    @property
    def in_commit_timestamp(self) -> int | None:
        ts = self.values.get("inCommitTimestamp")
        return None if ts is None else int(ts)

    @property
    def operation(self) -> str | None:
        op = self.values.get("operation")
        return None if op is None else str(op)

    @property
    def is_blind_append(self) -> bool:
        return bool(self.values.get("isBlindAppend", False))

    def to_json(self) -> JsonDict:
        return dict(self.values)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CommitInfo:
        return cls(values=dict(obj))


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """First action of a V2 checkpoint: which version it captures."""

    version: int
    tags: Mapping[str, str] | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"version": self.version}
        _put_optional(out, "tags", None if self.tags is None else dict(self.tags))
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> CheckpointMetadata:
        return cls(version=int(_require(obj, "version", "checkpointMetadata")), tags=obj.get("tags"))


@dataclass(frozen=True, slots=True)
class Sidecar:
    """A V2 checkpoint's pointer to a Parquet file of file actions under ``_delta_log/_sidecars``."""

    path: str
    size_in_bytes: int
    modification_time: int
    tags: Mapping[str, str] | None = None

    def to_json(self) -> JsonDict:
        out: JsonDict = {"path": self.path, "sizeInBytes": self.size_in_bytes, "modificationTime": self.modification_time}
        _put_optional(out, "tags", None if self.tags is None else dict(self.tags))
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Sidecar:
        return cls(
            path=str(_require(obj, "path", "sidecar")),
            size_in_bytes=int(obj.get("sizeInBytes") or 0),
            modification_time=int(obj.get("modificationTime") or 0),
            tags=obj.get("tags"),
        )


Action: TypeAlias = (
    AddFile
    | RemoveFile
    | AddCDCFile
    | Protocol
    | Metadata
    | Txn
    | DomainMetadata
    | CommitInfo
    | CheckpointMetadata
    | Sidecar
)

_ACTION_KEYS: dict[str, Any] = {
    "add": AddFile,
    "remove": RemoveFile,
    "cdc": AddCDCFile,
    "protocol": Protocol,
    "metaData": Metadata,
    "txn": Txn,
    "domainMetadata": DomainMetadata,
    "commitInfo": CommitInfo,
    "checkpointMetadata": CheckpointMetadata,
    "sidecar": Sidecar,
}
_KEY_OF_TYPE: dict[type, str] = {cls: key for key, cls in _ACTION_KEYS.items()}


def action_from_json(obj: Mapping[str, Any]) -> Action | None:
    """Parse one line of a commit file. Unknown action kinds return None (forward compatibility)."""
    for key, value in obj.items():
        cls = _ACTION_KEYS.get(key)
        if cls is not None and value is not None:
            return cast(Action, cls.from_json(value))
    return None


def action_to_json(action: Action) -> JsonDict:
    return {_KEY_OF_TYPE[type(action)]: action.to_json()}


def action_to_line(action: Action) -> str:
    return json.dumps(action_to_json(action), separators=(",", ":"))
