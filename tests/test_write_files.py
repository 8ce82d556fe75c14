"""Pure write helpers: partition folders and add paths, schema matching, new-table protocol."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dvengine.errors import InvalidArgumentError, InvalidPredicateError, SchemaMismatchError, UnsupportedFeatureError
from dvengine.protocol.actions import Protocol
from dvengine.protocol.schema import DecimalType, PrimitiveType, StructType, parse_schema
from dvengine.writing.constraints import constraint_texts, table_constraints
from dvengine.writing.files import (
    encode_relative_path,
    escape_partition_value,
    parse_partition_folders,
)
from dvengine.writing.schema_checks import (
    match_columns,
    new_table_protocol,
    not_null_paths,
    resolve_partition_columns,
)

STRING = PrimitiveType("string")


def _schema(*fields: tuple[str, object, bool]) -> StructType:
    return parse_schema(json.dumps({"type": "struct", "fields": [
        {"name": n, "type": t, "nullable": nullable, "metadata": {}} for n, t, nullable in fields]}))


@given(st.text(min_size=1))
def test_escape_roundtrip_and_folder_safety(value: str) -> None:
    escaped = escape_partition_value(value)
    assert "/" not in escaped and "=" not in escaped
    assert unquote(escaped) == value


def test_spark_escaping_examples() -> None:
    assert escape_partition_value("a b/c=d%") == "a b%2Fc%3Dd%25"
    assert encode_relative_path("p=a b%2Fc%3Dd%25/part-0.parquet") == "p=a%20b%252Fc%253Dd%2525/part-0.parquet"


def test_parse_partition_folders_types_and_nulls() -> None:
    types = [("s", STRING), ("i", PrimitiveType("integer")), ("d", PrimitiveType("date")), ("x", DecimalType(5, 2))]
    got = parse_partition_folders("s=a b%2Fc%3Dd%25/i=__HIVE_DEFAULT_PARTITION__/d=2024-02-29/x=1.50", types)
    assert got == {"s": "a b/c=d%", "i": None, "d": "2024-02-29", "x": "1.50"}


def test_parse_partition_timestamp_in_session_zone() -> None:
    got = parse_partition_folders("t=2024-01-01 10%3A00%3A00", [("t", PrimitiveType("timestamp"))], "Europe/Paris")
    assert got == {"t": "2024-01-01T09:00:00.000000Z"}


def test_parse_partition_folders_rejects_wrong_layout() -> None:
    from dvengine.errors import ProtocolError

    with pytest.raises(ProtocolError):
        parse_partition_folders("a=1", [("b", STRING)])
    with pytest.raises(ProtocolError):
        parse_partition_folders("", [("b", STRING)])


def test_match_columns() -> None:
    table = _schema(("a", "long", True), ("st", {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": True, "metadata": {}}]}, True))
    data = _schema(("ST", {"type": "struct", "fields": [
        {"name": "X", "type": "integer", "nullable": False, "metadata": {}}]}, True), ("A", "long", False))
    assert match_columns(table, data) == [("A", "a"), ("ST", "st")]
    with pytest.raises(SchemaMismatchError, match=r"missing \['st'\]"):
        match_columns(table, _schema(("a", "long", True)))
    with pytest.raises(SchemaMismatchError, match="st: table"):
        match_columns(table, _schema(("a", "long", True), ("st", "string", True)))
    with pytest.raises(SchemaMismatchError, match="twice"):
        match_columns(table, _schema(("a", "long", True), ("A", "long", True)))


def test_not_null_paths_and_partition_columns() -> None:
    s = _schema(("a", "long", False), ("st", {"type": "struct", "fields": [
        {"name": "x", "type": "integer", "nullable": False, "metadata": {}}]}, True), ("m", "binary", True))
    assert not_null_paths(s) == [("a",), ("st", "x")]
    assert resolve_partition_columns(s, ["A"]) == ("a",)
    for bad in (["zz"], ["st"], ["m"], ["a", "a"]):
        with pytest.raises(InvalidArgumentError):
            resolve_partition_columns(s, bad)


def test_new_table_protocol() -> None:
    plain = _schema(("a", "long", True))
    ntz = _schema(("t", "timestamp_ntz", True))
    on = {"delta.enableDeletionVectors": "true"}
    off = {"delta.enableDeletionVectors": "false"}
    assert new_table_protocol(plain, on) == Protocol(3, 7, ("deletionVectors",), ("deletionVectors",))
    assert new_table_protocol(plain, off) == Protocol(1, 2)
    assert new_table_protocol(ntz, off) == Protocol(3, 7, ("timestampNtz",), ("timestampNtz",))
    both = ("deletionVectors", "timestampNtz")
    assert new_table_protocol(ntz, on) == Protocol(3, 7, both, both)


def test_constraints_and_invariants_bound() -> None:
    s = _schema(("a", "long", True))
    (bound,) = table_constraints({"delta.constraints.pos": "a > 0", "other": "x"}, s)
    assert (bound.name, bound.sql, bound.predicate.columns) == ("pos", "a > 0", frozenset({"a"}))
    with pytest.raises(InvalidPredicateError, match=r"CHECK constraint bad \(b > 0\)"):
        table_constraints({"delta.constraints.bad": "b > 0"}, s)

    def field(name: str, type_: object, invariant: str | None) -> dict[str, object]:
        meta = {} if invariant is None else {"delta.invariants": json.dumps({"expression": {"expression": invariant}})}
        return {"name": name, "type": type_, "nullable": True, "metadata": meta}

    inner = {"type": "struct", "fields": [field("v", "long", "`s t`.v < 3"), field("w.x", "long", None)]}
    elem = {"type": "struct", "fields": [field("e", "long", "e > 0")]}  # inside an array: Delta never looks
    with_invariants = parse_schema(json.dumps({"type": "struct", "fields": [
        field("a", "long", "a > 0"), field("s t", inner, "`s t` IS NOT NULL"),
        field("xs", {"type": "array", "elementType": elem, "containsNull": True}, None)]}))
    rules = table_constraints({"delta.constraints.c": "a < 9"}, with_invariants)
    # Delta's order: CHECK constraints, then invariants (parents before children)
    assert [(r.name, r.sql) for r in rules] == [
        ("c", "a < 9"), ("invariant of column a", "a > 0"), ("invariant of column `s t`", "`s t` IS NOT NULL"),
        ("invariant of column `s t`.v", "`s t`.v < 3")]
    assert constraint_texts({"delta.constraints.c": "a < 9"}, with_invariants) == (("c", "a < 9"),)
    for stored in ('{"expression": "a > 0"}', "a > 0", '{"expression": {"expression": 1}}'):
        bad = parse_schema(json.dumps({"type": "struct", "fields": [
            {"name": "a", "type": "long", "nullable": True, "metadata": {"delta.invariants": stored}}]}))
        with pytest.raises(UnsupportedFeatureError, match="column 'a'.*DELTA_UNRECOGNIZED_INVARIANT"):
            table_constraints({}, bad)
