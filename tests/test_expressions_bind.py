"""Binding, normalization and rejection of bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dvengine.errors import InvalidPredicateError
from dvengine.expressions import is_partition_only, parse_predicate, parse_value_expression, to_spark_sql
from dvengine.protocol.schema import PrimitiveType, StructField, StructType, parse_schema

SCHEMA = StructType(
    (
        StructField("Id", PrimitiveType("long")),
        StructField("name", PrimitiveType("string")),
        StructField("amount", PrimitiveType("double")),
        StructField("d", PrimitiveType("date")),
        StructField("ts", PrimitiveType("timestamp")),
        StructField("flag", PrimitiveType("boolean")),
        StructField("part", PrimitiveType("string")),
        StructField("addr", StructType((StructField("City", PrimitiveType("string")),))),
        StructField("weird col", PrimitiveType("integer")),
    )
)
SOURCE = StructType((StructField("ID", PrimitiveType("long")), StructField("value", PrimitiveType("string"))))


@pytest.mark.parametrize(
    ("text", "sql", "columns"),
    [
        ("id < 10 AND part IN ('a','b')", "`Id` < 10 AND `part` IN ('a', 'b')", {"Id", "part"}),
        ("NAME LIKE 'x%'", "`name` LIKE 'x%'", {"name"}),
        ("ts >= '2024-01-01'", "`ts` >= '2024-01-01'", {"ts"}),
        ("d >= DATE '2024-01-01'", "`d` >= CAST('2024-01-01' AS DATE)", {"d"}),
        ("NOT (id = 1 OR name <> 'b')", "NOT (`Id` = 1 OR `name` <> 'b')", {"Id", "name"}),
        ("id BETWEEN 3 AND 9", "`Id` BETWEEN 3 AND 9", {"Id"}),
        ("upper(name) = 'A'", "UPPER(`name`) = 'A'", {"name"}),
        ("amount * 2 > 10", "`amount` * 2 > 10", {"amount"}),
        ("id = '5'", "`Id` = '5'", {"Id"}),
        ("addr.city = 'Oslo'", "`addr`.`City` = 'Oslo'", {"addr"}),
        ("`weird col` = 1", "`weird col` = 1", {"weird col"}),
        ("flag", "`flag`", {"flag"}),
        ("x IS NULL".replace("x", "name"), "`name` IS NULL", {"name"}),
        ("1 = 1", "1 = 1", set()),
    ],
)
def test_binding_normalizes_to_schema_spelling(text: str, sql: str, columns: set[str]) -> None:
    bound = parse_predicate(text, SCHEMA)
    assert bound.sql == sql
    assert bound.columns == frozenset(columns)
    # the normalized text binds to the same thing (idempotent)
    assert parse_predicate(bound.sql, SCHEMA).sql == sql


def test_references_only_and_partition_only() -> None:
    bound = parse_predicate("part = 'a' AND id > 1", SCHEMA)
    assert bound.references_only(["PART", "id"])
    assert not bound.references_only(["part"])
    assert is_partition_only(parse_predicate("part = 'a' OR part IS NULL", SCHEMA), ["part"])
    assert not is_partition_only(bound, ["part"])


def test_merge_aliases_bind_each_side() -> None:
    bound = parse_predicate("t.id = s.id AND value = 'x' AND part = 'p'", SCHEMA, {"t": SCHEMA, "s": SOURCE})
    assert bound.sql == "`t`.`Id` = `s`.`ID` AND `s`.`value` = 'x' AND `t`.`part` = 'p'"
    assert bound.qualified_columns == {("t", "Id"), ("s", "ID"), ("s", "value"), ("t", "part")}
    assert bound.columns == {"Id", "ID", "value", "part"}
    assert bound.references_only(["t.part", "t.id", "s.id", "s.value"])
    assert not bound.references_only(["part", "id", "value"])  # qualified refs need alias.name
    renamed = to_spark_sql(bound, {"t.id": "__t_id", "s.Id": "__s_id"})
    assert renamed == "`__t_id` = `__s_id` AND `s`.`value` = 'x' AND `t`.`part` = 'p'"


def test_merge_unqualified_name_in_both_sides_is_ambiguous() -> None:
    with pytest.raises(InvalidPredicateError, match="ambiguous.*t.Id or s.ID"):
        parse_predicate("id = 1", SCHEMA, {"t": SCHEMA, "s": SOURCE})


def test_value_expression_need_not_be_boolean() -> None:
    expr = parse_value_expression("amount * 2 + id", SCHEMA)
    assert expr.sql == "`amount` * 2 + `Id`"
    assert expr.columns == {"amount", "Id"}
    assert to_spark_sql(expr, {"amount": "col_3"}) == "`col_3` * 2 + `Id`"
    merge_value = parse_value_expression("concat(s.value, t.name)", SCHEMA, {"t": SCHEMA, "s": SOURCE})
    assert merge_value.qualified_columns == {("s", "value"), ("t", "name")}


def test_to_spark_sql_keeps_literals_and_renames_nested() -> None:
    bound = parse_predicate("addr.city = 'it''s' AND ts > '2024-01-01T00:00:00Z' AND id = 1L", SCHEMA)
    assert to_spark_sql(bound, {"addr": "col-7"}).startswith("`col-7`.`City` = ")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("id <", "syntax error"),
        ("id = = 1", "syntax error"),
        ("'unterminated", "syntax error"),
        ("id = 1; id = 2", "2 statements"),
        ("nope = 1", "column 'nope' does not exist; available columns: Id, name"),
        ("addr.zip = 1", "has no field 'zip'; its fields are: City"),
        ("name.x = 1", "not a struct"),
        ("count(id) > 1", "aggregate function count"),
        ("sum(amount) > 1", "aggregate"),
        ("every(flag)", "aggregate"),
        ("row_number() OVER (ORDER BY id) = 1", "window functions"),
        ("id IN (SELECT 1)", "subqueries"),
        ("EXISTS (SELECT 1)", "subqueries"),
        ("SELECT 1", "subqueries"),
        ("DELETE FROM t", "statements"),
        ("id = 1 AS x", "aliases"),
        ("id = ?", "parameters"),
        ("id = 'abc'", "is numeric but 'abc' is not a number"),
        ("amount > 'x1'", "not a number"),
        ("d >= 'yesterday'", "not a date/timestamp"),
        ("ts < 'soon'", "not a date/timestamp"),
        ("DATE 'nope' = d", "not a valid date literal"),
        ("flag = 'maybe'", "not 'true' or 'false'"),
        ("name * 2 > 1", "arithmetic on string"),
        ("name + 1 = 2", "arithmetic on string"),
        ("id + 1", "must be boolean, but `Id` \\+ 1 is numeric"),
        ("name", "must be boolean"),
        ("id AND flag", "operand of AND must be boolean"),
        ("NOT id", "operand of NOT must be boolean"),
        ("d = 5", "cannot compare `d` \\(date\\) with 5 \\(numeric\\)"),
        ("flag = 1", "cannot compare"),
        ("id = flag", "cannot compare"),
        # Spark types an IN by one common type for the value and all items (DATATYPE_MISMATCH)
        ("name NOT IN (true, 1e3, 'true')", "no common type: TRUE is boolean, 1e3 is numeric"),
        ("name IN (d, 5)", "no common type: `d` is date, 5 is numeric"),
    ],
)
def test_invalid_predicates_are_rejected_with_reason(text: str, message: str) -> None:
    with pytest.raises(InvalidPredicateError, match=message):
        parse_predicate(text, SCHEMA)


@pytest.mark.parametrize(
    "text",
    [
        "name IN ('a', 1, NULL)",  # strings adapt to the other items, NULL to anything
        "name IN (true, 'x')",
        "id IN (1, 2.5, 1e3, NULL)",
        "d IN (DATE '2024-01-01', TIMESTAMP '2024-01-01 10:00:00')",
        "ts IN (d, '2024-01-01')",
        "flag IN (true, 'false')",
    ],
)
def test_in_lists_with_one_common_type_are_accepted(text: str) -> None:
    assert parse_predicate(text, SCHEMA).sql


@pytest.mark.parametrize(
    "call",
    [
        "rand()",
        "rand(42)",
        "random()",
        "randn()",
        "uuid()",
        "current_timestamp()",
        "current_timestamp",
        "now()",
        "current_date()",
        "current_date",
        "curdate()",
        "monotonically_increasing_id()",
        "spark_partition_id()",
        "input_file_name()",
        "unix_timestamp()",
        "localtimestamp()",
    ],
)
def test_non_deterministic_functions_are_rejected(call: str) -> None:
    with pytest.raises(InvalidPredicateError, match="non-deterministic"):
        parse_predicate(f"{call} IS NOT NULL AND id > 0", SCHEMA)
    with pytest.raises(InvalidPredicateError, match="non-deterministic"):
        parse_value_expression(f"coalesce({call}, 1)", SCHEMA)


def test_shuffle_is_rejected() -> None:
    with pytest.raises(InvalidPredicateError, match="non-deterministic"):
        parse_predicate("size(shuffle(array(1, 2))) = 2", SCHEMA)


def test_non_string_input_is_rejected() -> None:
    with pytest.raises(InvalidPredicateError, match="must be SQL text"):
        parse_predicate(42, SCHEMA)  # type: ignore[arg-type]


def test_deterministic_functions_and_lambdas_bind() -> None:
    assert parse_predicate("unix_timestamp(ts) > 0", SCHEMA).columns == {"ts"}
    bound = parse_predicate("exists(array(id, 2), e -> e > 1)", SCHEMA)
    assert bound.columns == {"Id"}


_TOKENS = [
    "id",
    "name",
    "d",
    "flag",
    "addr.city",
    "nope",
    "1",
    "'a'",
    "'2024-01-01'",
    "NULL",
    "(",
    ")",
    ",",
    "=",
    "<",
    "+",
    "*",
    "AND",
    "OR",
    "NOT",
    "IN",
    "LIKE",
    "IS",
    "BETWEEN",
    "rand()",
    "count(",
    "SELECT",
    ";",
    "`",
    "'",
    "CAST(",
    "AS",
    "INT",
]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=30), st.lists(st.sampled_from(_TOKENS), max_size=8).map(" ".join)))
def test_arbitrary_text_raises_only_invalid_predicate_error(text: str) -> None:
    """Whatever the input, the only failure is InvalidPredicateError (no parser or key errors leak)."""
    try:
        bound = parse_predicate(text, SCHEMA)
    except InvalidPredicateError:
        return
    assert parse_predicate(bound.sql, SCHEMA).sql == bound.sql


@pytest.mark.parametrize("text", ["x = 0E", "x > 1e", "x < 2E+"])
def test_malformed_number_literals_raise_invalid_predicate(text: str) -> None:
    # Found by the fuzz test: sqlglot tokenizes "0E" as a number that Python cannot convert.
    schema = parse_schema('{"type":"struct","fields":[{"name":"x","type":"double","nullable":true,"metadata":{}}]}')
    with pytest.raises(InvalidPredicateError):
        parse_predicate(text, schema)
