"""Bound expressions back to Spark SQL text, with columns renamed for the DataFrame at hand.

The engine evaluates conditions with ``F.expr(text)`` over DataFrames whose column names may
differ from the table's logical names (physical names under column mapping, prefixed names in a
MERGE join). Rewriting the bound tree, rather than the user's text, guarantees every reference is
renamed and nothing else is touched.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.expressions.bind import BoundExpression
from dvengine.expressions.refs import column_node, ref_of


def to_spark_sql(expr: BoundExpression, rename: Mapping[str, str] | None = None) -> str:
    """Spark SQL for ``F.expr``. ``rename`` maps ``name`` (unqualified refs) or ``alias.name``
    (qualified refs) to a replacement column identifier, emitted back-quoted without qualifier;
    keys match case-insensitively. Unmapped columns keep their (qualified) logical spelling."""
    lookup = {key.lower(): value for key, value in (rename or {}).items()}
    tree = expr.tree.copy()
    for node in list(tree.walk()):
        ref = ref_of(node)
        if ref is None:
            continue
        replacement = lookup.get(ref.key.lower())
        if replacement is not None:
            parts = [replacement, *ref.path[1:]]
        else:
            parts = ([ref.qualifier] if ref.qualifier else []) + list(ref.path)
        new = column_node(parts)
        if node is tree:
            tree = new
        else:
            node.replace(new)
    return str(tree.sql(dialect="spark", comments=False))
