"""Generated columns (the ``generatedColumns`` writer feature): which columns are generated, and the
rules writers apply to them.

PROTOCOL.md: a generated column carries its SQL expression in the field metadata key
``delta.generationExpression``; writers must store, in every row they write, the value the
expression gives for that row (they may compute it, or check a provided one). Delta Spark computes
missing values on insert, recomputes them in UPDATE and MERGE, and enforces provided values with a
CHECK constraint ``col <=> expr`` whose violation is reported like any constraint's.

dvengine follows that design: :func:`generation_constraint_texts` turns every generated column
into such a constraint (written null-safely with ``=`` / ``IS NULL``, which the in-process
evaluator can also evaluate), so every path that checks CHECK constraints checks generated values
too; the write paths compute values the data lacks, and UPDATE adds the assignments
:func:`with_generated_assignments` derives.
"""

from __future__ import annotations

from collections.abc import Mapping

from dvengine.errors import InvalidArgumentError, InvalidPredicateError
from dvengine.expressions import parse_value_expression
from dvengine.expressions.identifiers import quote_identifier
from dvengine.expressions.substitute import substitute_paths
from dvengine.planning.generated_partitions import GENERATION_EXPRESSION as GENERATION_EXPRESSION  # one spelling
from dvengine.protocol.schema import DataType, DecimalType, PrimitiveType, StructType

GENERATED_COLUMNS = "generatedColumns"


def generation_expressions(schema: StructType) -> dict[str, str]:
    """Top-level column name -> generation expression, in schema order."""
    return {f.name: str(f.metadata[GENERATION_EXPRESSION]) for f in schema.fields if GENERATION_EXPRESSION in f.metadata}


def check_generation_expressions(schema: StructType) -> None:
    """Each expression binds to the table and reads only non-generated columns (as Delta requires);
    InvalidArgumentError / InvalidPredicateError naming the column otherwise."""
    generated = generation_expressions(schema)
    lowered = {n.lower() for n in generated}
    for name, text in generated.items():
        try:
            bound = parse_value_expression(text, schema)
        except InvalidPredicateError as exc:
            raise type(exc)(f"generated column {name!r} ({text}): {exc}") from exc
        uses = sorted(c for c in bound.columns if c.lower() in lowered)
        if uses:
            raise InvalidArgumentError(
                f"generated column {name!r} ({text}) reads generated column(s) {uses}; a generation expression may "
                "read only non-generated columns"
            )


def generation_constraint_texts(schema: StructType) -> tuple[tuple[str, str], ...]:
    """(name, expression) of the constraint each generated column implies: its value equals the
    expression's, NULL only when the expression is NULL (Delta's ``col <=> expr``)."""
    out = []
    for name, text in generation_expressions(schema).items():
        col = quote_identifier(name)
        out.append((f"generated column {name}", f"({col} = ({text})) OR ({col} IS NULL AND ({text}) IS NULL)"))
    return tuple(out)


def with_generated_assignments(
    schema: StructType,
    assignments: Mapping[str, str],
    values: Mapping[tuple[str, ...], str] | None = None,
    rebuilt: Mapping[tuple[str, ...], str] | None = None,
) -> dict[str, str]:
    """UPDATE's ``set`` plus, for every generated column not assigned whose inputs are, its expression
    over the new values (``c = a * 2`` under ``a = a + 1`` adds ``c = (a + 1) * 2``). ``values`` and
    ``rebuilt`` (``writing.nested_assignments.FoldedAssignments``) give nested assignments per path,
    so ``g = s.x + 1`` under ``s.x = 5`` becomes ``(5) + 1``; without them each assigned column's text stands for it."""
    out = dict(assignments)
    assigned: dict[str, str] = {}
    for key, value in assignments.items():
        field = schema.find(key) if isinstance(key, str) else None
        if field is not None:
            assigned[field.name] = value
    paths: dict[tuple[str, ...], str] = (
        dict(values) if values is not None else {(name.lower(),): text for name, text in assigned.items()}
    )
    paths = {path: stored_value_text(schema, path, text) for path, text in paths.items()}
    for name, text in generation_expressions(schema).items():
        if name in assigned:
            continue  # a given value is checked against the expression like any write
        bound = parse_value_expression(text, schema)
        if any(c in assigned for c in bound.columns):
            out[name] = substitute_paths(bound, paths, rebuilt)
    return out


def stored_value_text(schema: StructType, path: tuple[str, ...], text: str) -> str:
    """An assigned value as the column stores it: ``CAST((text) AS type)`` for a scalar field.

    Delta computes a generated column from the *updated* row, i.e. from the value after its cast to
    the column's type (``UpdateExpressionsSupport``: ``castIfNeeded``, then the generation
    expression over the new attributes): ``a = 2.7`` on an INT ``a`` stores 2, and ``g = a * 2``
    must be 4, not 5 from the raw 2.7. Structs and other complex values are rebuilt field by field
    (``writing.nested_assignments``) and left as they are."""
    kind: DataType = schema
    for part in path:
        found = kind.find(part) if isinstance(kind, StructType) else None
        if found is None:
            return text
        kind = found.type
    if isinstance(kind, (PrimitiveType, DecimalType)):
        return f"CAST(({text}) AS {kind.simple_string()})"
    return text
