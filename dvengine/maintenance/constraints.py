"""ALTER TABLE ... ADD CONSTRAINT name CHECK (expr) / DROP CONSTRAINT [IF EXISTS] name, as Delta does them.

ADD checks the existing rows first: if any live row makes the expression FALSE or NULL the
constraint is refused (Delta's DELTA_NEW_CHECK_CONSTRAINT_VIOLATION, with the count) and nothing
is committed. The commit then holds the new metadata (``delta.constraints.<name>``) and, when the
protocol lacks it, the ``checkConstraints`` feature (writer 3 on a legacy protocol). It reads the
whole table, so a concurrent append that could hold violating rows makes it conflict and retry
or fail rather than slip past the check. DROP removes the property; the feature stays, as in Delta.

Both log the name as the statement spelled it (``AddConstraint(name, exprText)`` /
``DropConstraint(name, oldExprText)`` in delta-io/delta ``alterDeltaTableCommands.scala``) while
the configuration key is lower-cased (``Constraints.checkConstraintPropertyName``). DROP CONSTRAINT
IF EXISTS of an absent constraint still commits, as Delta's does: ``AlterTableDropConstraintDeltaCommand``
commits the unchanged metadata with ``DropConstraint(name, None)``, parameters
``{"name", "existed": "false"}`` (``CheckConstraintsSuite`` "delta history for constraints"), so the
history shows the statement ran.
"""

from __future__ import annotations

from collections.abc import Callable

from dvengine.commit.commit_info import ParameterValue
from dvengine.commit.conf import ConfLookup
from dvengine.commit.transaction import Transaction
from dvengine.errors import ConstraintError, InvalidPredicateError, NotLocallyEvaluableError
from dvengine.expressions import to_pyarrow_expression
from dvengine.expressions.arrow_plans import filter_table
from dvengine.log import Snapshot, load_snapshot
from dvengine.protocol.features import check_writable
from dvengine.read import scan_snapshot_arrow
from dvengine.writing.constraints import (
    CheckConstraint,
    protocol_with_check_constraints,
    with_constraint,
    without_constraint,
)

# How many live rows of a snapshot break a constraint (FALSE or NULL); the default reads with Arrow.
ViolationCounter = Callable[[Snapshot, CheckConstraint], int]


def count_violations_arrow(snapshot: Snapshot, constraint: CheckConstraint) -> int:
    """Live rows breaking ``constraint``, read in-process (only the columns it names, DVs applied)."""
    try:
        condition = to_pyarrow_expression(constraint.predicate)
    except InvalidPredicateError as exc:
        raise NotLocallyEvaluableError(
            f"CHECK constraint {constraint.name} ({constraint.sql}) cannot be checked without Spark ({exc}); "
            "run the ALTER TABLE through dvengine.sql with a SparkSession"
        ) from exc
    rows = scan_snapshot_arrow(snapshot, columns=sorted(constraint.predicate.columns) or None)
    return int(rows.num_rows - filter_table(rows, condition).num_rows)


def add_constraint(
    table_root: str, name: str, expression: str, count_violations: ViolationCounter | None = None,
    conf: ConfLookup | None = None,
) -> int:
    """Add CHECK constraint ``name`` after checking every live row; returns the committed version."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    metadata, constraint = with_constraint(snapshot.metadata, snapshot.schema, name, expression)
    bad = (count_violations or count_violations_arrow)(snapshot, constraint)
    if bad:
        raise ConstraintError(
            f"{bad} row(s) in {table_root} violate the new CHECK constraint {constraint.name} ({expression}) "
            "(DELTA_NEW_CHECK_CONSTRAINT_VIOLATION); nothing was changed"
        )
    txn = Transaction(snapshot.table_root, snapshot, "ADD CONSTRAINT", {"name": name, "expr": expression}, conf=conf)
    txn.record_read(snapshot.files, None)
    txn.update_metadata(metadata)
    protocol = protocol_with_check_constraints(snapshot.protocol)
    if protocol != snapshot.protocol:
        txn.update_protocol(protocol)
    return txn.commit()


def drop_constraint(table_root: str, name: str, if_exists: bool = False, conf: ConfLookup | None = None) -> int:
    """Drop CHECK constraint ``name``; returns the committed version. An absent one is an error
    unless ``if_exists``, which commits the unchanged metadata with ``existed`` "false" (Delta's)."""
    snapshot = load_snapshot(table_root)
    check_writable(snapshot.protocol, snapshot.metadata)
    dropped = without_constraint(snapshot.metadata, name, if_exists)
    # DeltaOperations.DropConstraint: "existed" is a String ("true" / "false"), "expr" only when it existed
    params: dict[str, ParameterValue] = {"name": name, "existed": "false"}
    metadata = snapshot.metadata
    if dropped is not None:
        metadata, expression = dropped
        params = {"name": name, "expr": expression, "existed": "true"}
    txn = Transaction(snapshot.table_root, snapshot, "DROP CONSTRAINT", params, conf=conf)
    txn.record_read([], None)
    txn.update_metadata(metadata)
    return txn.commit()
