"""Column invariants (the legacy ``invariants`` writer feature, implied by writer versions 2 to 6):
where a schema declares them, turned into row rules the CHECK-constraint machinery enforces.

PROTOCOL.md "Column Invariants": a field's metadata may hold ``delta.invariants``, a JSON string
``{"expression": {"expression": "<SQL>"}}``; writers must abort a transaction adding a row for
which the expression is FALSE or NULL. The expression is written over the table's columns from
the root (``top.value < 3`` for a field ``value`` inside struct ``top``).

Delta Spark (``Invariants.getFromSchema``) reads them from top-level fields and from fields of
structs reached through structs only (``filterRecursively(schema, checkComplexTypes = false)``):
fields of structs inside arrays or maps are not looked at, so neither are their invariants. It
then checks each as a ``Constraints.Check``, exactly as a CHECK constraint, and a value of any other
shape fails (DELTA_UNRECOGNIZED_INVARIANT). dvengine does the same through
:func:`invariant_texts`, whose (name, expression) pairs join the table's constraints
(``writing.constraints.row_rule_texts``), so every path that checks constraints (Arrow, Spark SQL
for Spark appends, the Spark DML tasks) checks invariants with the same evaluators and refusals.

One deliberate difference: Delta Spark keeps only the NOT NULL check of a NOT NULL field that also
has an invariant (its ``getFromSchema`` matches ``!field.nullable`` first); dvengine enforces the
invariant as well, as the protocol requires and delta-rs does (``spec_notes/writer-features.md``).
"""

from __future__ import annotations

import json
import re

from dvengine.errors import UnsupportedFeatureError
from dvengine.protocol.schema import StructField, StructType

INVARIANTS_KEY = "delta.invariants"

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def column_path_text(parts: tuple[str, ...]) -> str:
    """A nested column's path for messages: dotted, a part back-quoted when it is not a plain name."""
    return ".".join(p if _PLAIN.fullmatch(p) else "`" + p.replace("`", "``") + "`" for p in parts)


def invariant_name(parts: tuple[str, ...]) -> str:
    """The name an invariant's violation reports. Delta names it ``EXPRESSION(<Catalyst's debug
    text of the parsed expression>)``, which only Spark's parser can spell; dvengine names the column
    whose metadata holds it, which is also where a user finds and drops it."""
    return f"invariant of column {column_path_text(parts)}"


def _expression(field: StructField, parts: tuple[str, ...]) -> str:
    """The SQL of ``field``'s invariant; UnsupportedFeatureError for any other shape (Delta's
    DELTA_UNRECOGNIZED_INVARIANT, or its JSON parser's error for a value that is not JSON)."""
    raw = field.metadata[INVARIANTS_KEY]
    try:
        parsed = json.loads(raw) if isinstance(raw, str) else None
    except json.JSONDecodeError:
        parsed = None
    inner = parsed.get("expression") if isinstance(parsed, dict) else None
    sql = inner.get("expression") if isinstance(inner, dict) else None
    if not isinstance(sql, str) or not sql.strip():
        raise UnsupportedFeatureError(
            f"column {column_path_text(parts)!r} has an invariant dvengine does not recognize: {INVARIANTS_KEY} = {raw!r}; "
            'expected {"expression": {"expression": "<SQL>"}} (DELTA_UNRECOGNIZED_INVARIANT); nothing was written'
        )
    return sql


def invariant_texts(schema: StructType) -> tuple[tuple[str, str], ...]:
    """(name, expression) of every column invariant of ``schema``, parents before children in
    schema order, looking through structs only (Delta's walk; see the module docstring)."""
    out: list[tuple[str, str]] = []

    def walk(struct: StructType, parents: tuple[str, ...]) -> None:
        for f in struct.fields:
            parts = (*parents, f.name)
            if INVARIANTS_KEY in f.metadata:
                out.append((invariant_name(parts), _expression(f, parts)))
            if isinstance(f.type, StructType):
                walk(f.type, parts)

    walk(schema, ())
    return tuple(out)
