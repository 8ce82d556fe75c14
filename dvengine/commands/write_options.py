"""Write options named as the DataFrameWriter's Delta options, and Delta's auto-merge conf key.

``mergeSchema``, ``overwriteSchema``, ``replaceWhere`` and ``partitionOverwriteMode`` arrive from ``dvengine.write`` and from
a ``format("delta")`` data source, where every option is a string; both spellings (bool or
``"true"``/``"false"``, any case) are accepted, anything else is refused naming the option.
``spark.databricks.delta.schema.autoMerge.enabled`` turns schema merging on for appends and
MERGE when the option is not given (session-less: the ``SPARK_DATABRICKS_DELTA_SCHEMA_AUTOMERGE_ENABLED``
environment variable, see :mod:`dvengine.commands.options`).
``userMetadata`` (any string, logged as ``commitInfo.userMetadata``; it wins over the session conf
``spark.databricks.delta.commitInfo.userMetadata``) and ``dataChange`` (``false``: the write only
rearranges rows already in the table, Delta's ``rearrangeOnly``) are Delta's options of the same names.
"""

from __future__ import annotations

from dataclasses import dataclass

from dvengine.commands.app_txn import AppTransaction, app_transaction_from_conf, parse_app_transaction
from dvengine.commands.options import ConfLookup, no_conf
from dvengine.commands.partition_overwrite import check_option_type
from dvengine.errors import InvalidArgumentError

CONF_AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"


def parse_bool_option(name: str, value: object) -> bool | None:
    """``value`` as a boolean (None when not given); InvalidArgumentError naming the option otherwise."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise InvalidArgumentError(f"option {name} must be true or false, got {value!r}")


def _java_char_upper(char: str) -> str:
    """Java's ``Character.toUpperCase(char)``: one char to one char (Python's ``upper`` may give
    two, 'ß' -> 'SS', where Java keeps the char)."""
    upper = char.upper()
    return upper if len(upper) == 1 else char


def _java_char_lower(char: str) -> str:
    """Java's ``Character.toLowerCase(char)``: one char to one char (see :func:`_java_char_upper`)."""
    lower = char.lower()
    return lower if len(lower) == 1 else char


def java_equals_ignore_case(text: str, other: str) -> bool:
    """Java's ``String.equalsIgnoreCase``: same length, and char by char equal, or equal upper
    cased, or equal lower cased after upper casing. No trimming, and no full Unicode case
    folding: 'FALSE' and 'falſe' (long s, upper case 'S') equal 'false', ' false' does not."""
    if len(text) != len(other):
        return False
    for a, b in zip(text, other, strict=True):
        if a == b:
            continue
        upper_a, upper_b = _java_char_upper(a), _java_char_upper(b)
        if upper_a != upper_b and _java_char_lower(upper_a) != _java_char_lower(upper_b):
            return False
    return True


def scala_to_boolean(text: str) -> bool | None:
    """Scala's ``StringOps.toBoolean``, which Delta's ``DeltaOptionParser.toBoolean`` calls: "true"
    or "false" by ``equalsIgnoreCase``, untrimmed; None where Scala throws."""
    if java_equals_ignore_case(text, "true"):
        return True
    if java_equals_ignore_case(text, "false"):
        return False
    return None


def parse_data_change(value: object) -> bool:
    """The ``dataChange`` option (True when not given), read as Delta reads it: ``DeltaOptions.scala``,
    ``DeltaWriteOptionsImpl.rearrangeOnly`` = ``options.get(DATA_CHANGE_OPTION).exists(!toBoolean(_,
    DATA_CHANGE_OPTION))``, where ``DeltaOptionParser.toBoolean`` is ``Try(input.toBoolean)`` (Scala:
    "true" / "false" case-insensitively, nothing trimmed) or else
    ``DeltaErrors.illegalDeltaOptionException``: DELTA_ILLEGAL_OPTION, "Invalid value '<input>' for
    option 'dataChange', must be 'true' or 'false'" (an IllegalArgumentException there,
    InvalidArgumentError / ValueError here). So " false" or "false " is refused, not trimmed."""
    if value is None or isinstance(value, bool):
        return value is None or value
    parsed = scala_to_boolean(value) if isinstance(value, str) else None
    if parsed is None:
        raise InvalidArgumentError(
            f"Invalid value '{value}' for option 'dataChange', must be 'true' or 'false' (DELTA_ILLEGAL_OPTION)"
        )
    return parsed


def parse_user_metadata(value: object) -> str | None:
    """The ``userMetadata`` option: any string (empty too, as Delta logs it), None when not given."""
    if value is None or isinstance(value, str):
        return value
    raise InvalidArgumentError(f"option userMetadata must be a string, got {type(value).__name__}: {value!r}")


def auto_merge_enabled(conf: ConfLookup | None = None) -> bool:
    """Whether ``spark.databricks.delta.schema.autoMerge.enabled`` is on (the default is off)."""
    raw = (conf or no_conf)(CONF_AUTO_MERGE)
    return bool(parse_bool_option(CONF_AUTO_MERGE, raw))


@dataclass(frozen=True)
class SchemaWriteOptions:
    """What a write may do to the table's schema and which rows an overwrite replaces."""

    merge_schema: bool = False
    overwrite_schema: bool = False
    replace_where: str | None = None
    conf: ConfLookup = no_conf  # where replaceWhere's DELETE half reads dvengine.api.dml.* / dvengine.dv.*
    app_transaction: AppTransaction | None = None  # txnAppId / txnVersion: an idempotent write
    # the partitionOverwriteMode option as given (None: the session conf decides); checked by
    # plan_write only where Delta checks it (dvengine.commands.partition_overwrite)
    partition_overwrite_mode: str | None = None
    user_metadata: str | None = None  # userMetadata: commitInfo.userMetadata (None: the session conf's)
    data_change: bool = True  # dataChange=false: every add and remove of the write logs dataChange=false


def resolve_write_options(
    mergeSchema: object = None,  # the DataFrameWriter option's name
    overwriteSchema: object = None,
    replaceWhere: object = None,
    conf: ConfLookup | None = None,
    txnAppId: object = None,
    txnVersion: object = None,
    partitionOverwriteMode: object = None,
    userMetadata: object = None,
    dataChange: object = None,
) -> SchemaWriteOptions:
    """Options from the call, ``mergeSchema`` defaulting to the auto-merge conf key.

    ``conf`` is also where ``spark.sql.sources.partitionOverwriteMode`` is read when the
    ``partitionOverwriteMode`` option is not given."""
    user_metadata = parse_user_metadata(userMetadata)
    data_change = parse_data_change(dataChange)
    merge = parse_bool_option("mergeSchema", mergeSchema)
    overwrite = parse_bool_option("overwriteSchema", overwriteSchema)
    if replaceWhere is not None and (not isinstance(replaceWhere, str) or not replaceWhere.strip()):
        raise InvalidArgumentError(f"option replaceWhere must be a non-empty SQL predicate string, got {replaceWhere!r}")
    return SchemaWriteOptions(
        merge_schema=auto_merge_enabled(conf) if merge is None else merge,
        overwrite_schema=bool(overwrite),
        replace_where=replaceWhere,
        conf=conf or no_conf,
        app_transaction=_app_transaction(txnAppId, txnVersion, conf or no_conf),
        partition_overwrite_mode=check_option_type(partitionOverwriteMode),
        user_metadata=user_metadata,
        data_change=data_change,
    )


def _app_transaction(app_id: object, version: object, conf: ConfLookup) -> AppTransaction | None:
    """The options when given, else the session confs (as Delta: the writer options win)."""
    if app_id is None and version is None:
        return app_transaction_from_conf(conf)
    return parse_app_transaction(app_id, version)
