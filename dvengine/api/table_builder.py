"""delta-spark's ``DeltaTableBuilder``: ``DeltaTable.create(spark).tableName(...).addColumn(...).execute()``.

Argument checks mirror delta-spark's Python layer (TypeError/ValueError at call time, with the
same wording where its tests match on it), so a script fails on the same line it would with
delta-spark. Types are parsed at ``addColumn`` time (Spark's parser would fail at ``execute``);
either way nothing is written. The commit itself is :mod:`dvengine.commands.create_table`;
names resolve through :mod:`dvengine.storage.catalog`.

Generated columns (``generatedAlwaysAs="expr"``) and identity columns (``IdentityGenerator``) are
stored as Delta stores them (field metadata, the ``generatedColumns`` / ``identityColumns``
features); see :mod:`dvengine.writing.generated` and :mod:`dvengine.writing.identity`. ``clusterBy``
makes a liquid-clustered table (:mod:`dvengine.maintenance.clustering`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from dvengine.api.table_support import active_session, warehouse_of
from dvengine.commands.create_table import (
    CREATE,
    CREATE_IF_NOT_EXISTS,
    CREATE_OR_REPLACE,
    REPLACE,
    TableDefinition,
    create_table,
)
from dvengine.commands.options import session_conf
from dvengine.errors import InvalidArgumentError
from dvengine.protocol.ddl import from_spark_field, from_spark_type, parse_ddl_type
from dvengine.protocol.schema import DataType, StructField, StructType
from dvengine.storage import catalog, normalize_table_path
from dvengine.writing.generated import GENERATION_EXPRESSION
from dvengine.writing.identity import identity_field_metadata

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from dvengine.api.table import DeltaTable

# How a builder opens the table it made: DeltaTable(spark, root, name=...). Passed in by
# DeltaTable.create() and friends, so that this module needs the class only for type checking.
TableOpener = Callable[["SparkSession | None", str, "str | None"], "DeltaTable"]


@dataclass
class IdentityGenerator:
    """delta-spark's identity column spec: ``generatedAlwaysAs=IdentityGenerator(start, step)`` (GENERATED
    ALWAYS AS IDENTITY) or ``generatedByDefaultAs=...`` (BY DEFAULT: given values are accepted)."""

    start: int = 1
    step: int = 1


def _is_spark_type(value: object, class_name: str | None = None) -> bool:
    cls = type(value)
    if not cls.__module__.startswith("pyspark."):
        return False
    if class_name is None:
        return any(base.__name__ == "DataType" for base in cls.__mro__)
    return cls.__name__ == class_name


class DeltaTableBuilder:
    """Collects a table definition; :meth:`execute` creates/replaces the table and returns it."""

    def __init__(self, spark: SparkSession | None, mode: str, open_table: TableOpener) -> None:
        self._spark = spark
        self._mode = mode
        self._open_table = open_table
        self._name: str | None = None
        self._location: str | None = None
        self._comment: str | None = None
        self._fields: list[StructField] = []
        self._partitions: list[str] = []
        self._properties: dict[str, str] = {}
        self._clustering: list[str] = []

    @staticmethod
    def _raise_type_error(msg: str, objs: list[Any]) -> NoReturn:
        for obj in objs:
            msg += f" Found {obj} with type {type(obj)}"
        raise TypeError(msg)

    def tableName(self, identifier: str) -> DeltaTableBuilder:
        if type(identifier) is not str:
            self._raise_type_error("Identifier must be str.", [identifier])
        catalog.split_name(identifier)  # InvalidArgumentError now for a malformed name
        self._name = identifier
        return self

    def location(self, location: str) -> DeltaTableBuilder:
        if type(location) is not str:
            self._raise_type_error("Location must be str.", [location])
        self._location = location
        return self

    def comment(self, comment: str) -> DeltaTableBuilder:
        if type(comment) is not str:
            self._raise_type_error("Table comment must be str.", [comment])
        self._comment = comment
        return self

    def addColumn(
        self,
        colName: str,
        dataType: str | Any,
        nullable: bool = True,
        generatedAlwaysAs: str | IdentityGenerator | None = None,
        generatedByDefaultAs: IdentityGenerator | None = None,
        comment: str | None = None,
    ) -> DeltaTableBuilder:
        if type(colName) is not str:
            self._raise_type_error("Column name must be str.", [colName])
        if type(dataType) is not str and not _is_spark_type(dataType):
            self._raise_type_error("Column data type must be str or DataType.", [dataType])
        if type(nullable) is not bool:
            self._raise_type_error("Column nullable must be bool.", [nullable])
        if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
            raise ValueError("generatedByDefaultAs and generatedAlwaysAs cannot both be set.")
        for generator in (generatedAlwaysAs, generatedByDefaultAs):
            if isinstance(generator, IdentityGenerator) and generator.step == 0:
                raise ValueError("Column identity generation requires step to be non-zero.")
        if generatedAlwaysAs is not None and type(generatedAlwaysAs) is not str and not isinstance(
            generatedAlwaysAs, IdentityGenerator
        ):
            self._raise_type_error("Generated always as expression must be str or IdentityGenerator.", [generatedAlwaysAs])
        if generatedByDefaultAs is not None and not isinstance(generatedByDefaultAs, IdentityGenerator):
            self._raise_type_error("Generated by default expression must be IdentityGenerator.", [generatedByDefaultAs])
        if comment is not None and type(comment) is not str:
            self._raise_type_error("Column comment must be str.", [comment])
        data_type: DataType = parse_ddl_type(dataType) if isinstance(dataType, str) else from_spark_type(dataType)
        metadata: dict[str, Any] = {} if comment is None else {"comment": comment}
        identity = generatedAlwaysAs if isinstance(generatedAlwaysAs, IdentityGenerator) else generatedByDefaultAs
        if identity is not None:  # PROTOCOL.md "Identity Columns": start, step, allowExplicitInsert in the field
            metadata.update(identity_field_metadata(identity.start, identity.step, generatedByDefaultAs is not None))
        if isinstance(generatedAlwaysAs, str):  # PROTOCOL.md "Generated Columns": the expression in the field
            metadata[GENERATION_EXPRESSION] = generatedAlwaysAs
        self._fields.append(StructField(colName, data_type, nullable, metadata))
        return self

    def addColumns(self, cols: Any) -> DeltaTableBuilder:
        if isinstance(cols, list):
            for col in cols:
                if not _is_spark_type(col, "StructField") and not isinstance(col, StructField):
                    self._raise_type_error("Column in existing schema must be StructField.", [col])
            fields = list(cols)
        elif _is_spark_type(cols, "StructType") or isinstance(cols, StructType):
            fields = list(cols.fields)
        else:
            self._raise_type_error("Schema must be StructType or a list of StructField.", [cols])
        for f in fields:
            self._fields.append(f if isinstance(f, StructField) else from_spark_field(f))
        return self

    @staticmethod
    def _column_names(cols: tuple[Any, ...], what: str) -> list[str]:
        names: tuple[Any, ...] = tuple(cols[0]) if len(cols) == 1 and isinstance(cols[0], (list, tuple)) else cols
        for c in names:
            if type(c) is not str:
                DeltaTableBuilder._raise_type_error(f"{what} column must be str.", [c])
        return [str(c) for c in names]

    def partitionedBy(self, *cols: Any) -> DeltaTableBuilder:
        self._partitions = self._column_names(cols, "Partitioning")
        return self

    def clusterBy(self, *cols: Any) -> DeltaTableBuilder:
        """Liquid clustering by these columns (checked at ``execute``, as Delta does)."""
        self._clustering = self._column_names(cols, "Clustering")
        return self

    def property(self, key: str, value: str) -> DeltaTableBuilder:
        if type(key) is not str or type(value) is not str:
            self._raise_type_error("Key and value of property must be string.", [key, value])
        self._properties[key] = value
        return self

    # --- execution ------------------------------------------------------------------------------

    def _resolve_location(self) -> tuple[str, bool]:
        """(table root, managed): the given location, else the registered one, else the warehouse's."""
        if self._name is None and self._location is None:
            raise InvalidArgumentError("Table name or location has to be specified (tableName() or location())")
        warehouse = warehouse_of(self._spark)
        registered = None if self._name is None else catalog.lookup_table(self._name, warehouse)
        if self._location is not None:
            root = normalize_table_path(self._location)
            if registered is not None and os.path.abspath(registered) != os.path.abspath(root):
                raise InvalidArgumentError(
                    f"table {self._name} is registered at {registered}, not at the given location {root}"
                )
            return root, False
        if registered is not None:
            return normalize_table_path(registered), False
        assert self._name is not None
        return normalize_table_path(catalog.default_location(self._name, warehouse)), True

    def execute(self) -> DeltaTable:
        root, managed = self._resolve_location()
        label = self._name if self._name is not None else f"delta.`{root}`"
        definition = TableDefinition(
            location=root, label=label, schema=StructType(tuple(self._fields)),
            partition_columns=tuple(self._partitions), properties=dict(self._properties),
            description=self._comment, managed=managed, clustering_columns=tuple(self._clustering),
        )
        create_table(definition, self._mode, session_conf(self._spark))
        if self._name is not None:
            catalog.register_table(self._name, root, warehouse_of(self._spark))
        return self._open_table(self._spark, root, self._name)


def new_builder(spark: SparkSession | None, mode: str, open_table: TableOpener) -> DeltaTableBuilder:
    """A builder on ``spark``, else on the active session as delta-spark does, else session-less."""
    return DeltaTableBuilder(spark if spark is not None else active_session(), mode, open_table)


__all__ = ["CREATE", "CREATE_IF_NOT_EXISTS", "CREATE_OR_REPLACE", "REPLACE", "DeltaTableBuilder", "IdentityGenerator", "new_builder"]
