"""Column mapping in the protocol: the modes, which change of mode Delta allows, and the protocol
a mapped table needs (PROTOCOL.md "Column Mapping", delta-spark's ``DeltaColumnMapping``).

- Modes are ``none``, ``name`` and ``id`` (case-insensitive, as Delta's ``DeltaColumnMappingMode``
  parses them); another value is refused as Delta's DELTA_MODE_NOT_SUPPORTED.
- A new (or replaced) table may take any mode. An existing table may only go from ``none`` to
  ``name`` (Delta's ``allowMappingModeChange``: no data rewrite, the physical names are the
  logical ones); ``none`` -> ``id`` and ``name`` <-> ``id`` are refused as Delta refuses them
  (DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE). Delta 3.3+ removes mapping (``-> none``) by
  rewriting every data file under logical names (``RemoveColumnMappingCommand``); dvengine does
  not implement that rewrite and refuses the change with the same error class.
- ``columnMapping`` is a reader-writer feature with legacy versions (2, 5). A legacy protocol
  (writer < 7) becomes the legacy (2, max(5, writer)): (1, 2) -> (2, 5), (1, 6) -> (2, 6), as
  Delta 2.x wrote column-mapped tables. A table-features protocol (writer 7) gets it in both
  lists, on reader 3. Delta 3.x/4.x would normalize a (1, 2) table to (2, 7) listing
  ``appendOnly``, ``columnMapping`` and ``invariants`` with no reader list; delta-kernel-rs (the
  DuckDB ``delta`` extension, measured with 1.4.4) refuses that protocol ("Writer features must
  be Writer-only or also listed in reader features"), while every reader accepts (2, 5) and
  (3, 7) with the feature listed twice, so dvengine writes those. (2, 5) only *allows* the other
  writer-5 features; writers honour the ones the metadata uses, as for any legacy protocol.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.errors import InvalidArgumentError, UnsupportedFeatureError
from dvengine.protocol.actions import Protocol
from dvengine.protocol.features import COLUMN_MAPPING, reader_features, writer_features

MODE_KEY = "delta.columnMapping.mode"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
NONE, NAME, ID = "none", "name", "id"
MODES = (NONE, NAME, ID)


def requested_mode(configuration: Mapping[str, str]) -> str:
    """The mode ``configuration`` asks for (``none`` when unset), lower-cased; a value that is no
    mode is refused naming it (Delta's DELTA_MODE_NOT_SUPPORTED, an IllegalArgumentException)."""
    raw = configuration.get(MODE_KEY, NONE)
    mode = str(raw).strip().lower()
    if mode not in MODES:
        raise InvalidArgumentError(
            f"Specified mode '{raw}' is not supported for table property {MODE_KEY} (DELTA_MODE_NOT_SUPPORTED). "
            f"Supported modes are: {', '.join(MODES)}"
        )
    return mode


def max_column_id(configuration: Mapping[str, str]) -> int:
    """``delta.columnMapping.maxColumnId`` (0 when unset); a value that is no non-negative integer is refused."""
    raw = configuration.get(MAX_COLUMN_ID_KEY, "0")
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = -1
    if value < 0:
        raise InvalidArgumentError(f"table property {MAX_COLUMN_ID_KEY}={raw!r} must be a non-negative integer")
    return value


def check_mode_change(old: str, new: str, table: str) -> None:
    """Refuse a change of an existing table's mode that Delta refuses (see the module docstring)."""
    if old == new or (old == NONE and new == NAME):
        return
    why = (
        "Delta removes column mapping by rewriting every data file under its logical names, which dvengine "
        "does not implement"
        if new == NONE
        else "an existing table can only be upgraded from 'none' to 'name'"
    )
    raise UnsupportedFeatureError(
        f"Changing column mapping mode from '{old}' to '{new}' is not supported "
        f"(DELTA_UNSUPPORTED_COLUMN_MAPPING_MODE_CHANGE): {why}; table {table} was not changed"
    )


def with_column_mapping(protocol: Protocol) -> Protocol:
    """``protocol`` supporting ``columnMapping``, every feature it supported kept (module docstring)."""
    readers, writers = reader_features(protocol), writer_features(protocol)
    if COLUMN_MAPPING in readers and COLUMN_MAPPING in writers:
        return protocol
    if protocol.min_writer_version < 7:
        return Protocol(max(2, protocol.min_reader_version), max(5, protocol.min_writer_version))
    return Protocol(3, 7, tuple(sorted(readers | {COLUMN_MAPPING})), tuple(sorted(writers | {COLUMN_MAPPING})))
