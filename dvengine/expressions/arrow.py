"""Bound predicates to ``pyarrow.compute`` expressions, for filtering Parquet scans without Spark.

Only a subset maps faithfully: comparisons, IN, BETWEEN, IS [NOT] NULL, LIKE, AND/OR/NOT,
``+ - * / % div``, casts and the functions of :mod:`dvengine.expressions.arrow_calls` (string,
math, conditional and date/time functions). SQL's three-valued logic is preserved: Arrow's ``&``/``|`` are Kleene operators and
IN is built so that ``x IN (1, NULL)`` is NULL (not FALSE) when ``x`` is not 1, which matters
under NOT. Anything else raises InvalidPredicateError rather than risk a different answer.

Zone-less timestamp literals are read as UTC (dvengine's Spark session runs in UTC).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dvengine.errors import InvalidPredicateError
from dvengine.expressions.arrow_calls import CallTranslator
from dvengine.expressions.arrow_types import Refused, Val, store
from dvengine.expressions.bind import BoundExpression, BoundPredicate
from dvengine.expressions.kinds import Kind, is_integral, kind_of
from dvengine.expressions.literals import (
    Lit,
    TimestampText,
    literal_of,
    parse_date_text,
    parse_number_text,
    parse_timestamp_text,
)
from dvengine.expressions.refs import ColumnRef, ref_of
from dvengine.protocol.schema import DataType, PrimitiveType, StructField, StructType, to_arrow_type

_NULL_BOOL = pc.scalar(pa.scalar(None, pa.bool_()))
_COMPARE = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
}
_ARITH = {exp.Add: "add_checked", exp.Sub: "subtract_checked", exp.Mul: "multiply_checked"}


@dataclass(frozen=True, slots=True)
class _Typed:
    """An Arrow expression with the schema type it carries (None when it is computed)."""

    expr: Any
    kind: Kind
    data_type: DataType | None


class _Translator(CallTranslator):
    def __init__(self, pred: BoundExpression, rename: Mapping[str, str] | None) -> None:
        self._sql = pred.sql
        self._rename = {k.lower(): v for k, v in (rename or {}).items()}
        self._branch_guard: Any = None

    def column(self, ref: ColumnRef) -> Any:
        return pc.field(self._rename.get(ref.key.lower(), ref.top), *ref.path[1:])

    def equal(self, node: exp.Expr, left: exp.Expr, right: exp.Expr) -> Any:
        return self._compare(node, _COMPARE[exp.EQ], left, right)

    def fail(self, node: exp.Expr, why: str = "") -> InvalidPredicateError:
        detail = f" ({why})" if why else ""
        return InvalidPredicateError(
            f"{node.sql(dialect='spark')!r} in {self._sql!r} cannot be evaluated in Arrow{detail}; "
            "evaluate this condition with Spark instead"
        )

    # --- booleans ------------------------------------------------------------------------------

    def boolean(self, node: exp.Expr) -> Any:
        result = self._boolean(node)
        if isinstance(node, (exp.Like, exp.In, exp.Between, exp.Is)) and node.args.get("negate"):
            result = ~result
        return result

    def _boolean(self, node: exp.Expr) -> Any:
        if isinstance(node, exp.Paren):
            return self.boolean(node.this)
        if isinstance(node, exp.And):
            return self.boolean(node.this) & self.boolean(node.expression)
        if isinstance(node, exp.Or):
            return self.boolean(node.this) | self.boolean(node.expression)
        if isinstance(node, exp.Not):
            return ~self.boolean(node.this)
        for op, build in _COMPARE.items():
            if isinstance(node, op):
                return self._compare(node, build, node.this, node.expression)
        if isinstance(node, exp.Between) and not node.args.get("symmetric"):
            low = self._compare(node, _COMPARE[exp.GTE], node.this, node.args["low"])
            high = self._compare(node, _COMPARE[exp.LTE], node.this, node.args["high"])
            return low & high
        if isinstance(node, exp.In) and node.expressions and node.args.get("query") is None:
            return self._in(node)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            subject = self.value(node.this, None)
            return pc.is_null(subject.expr)
        if isinstance(node, exp.Like) and not isinstance(node.parent, exp.Escape):
            return self._like(node)
        if isinstance(node, exp.NullSafeEQ):
            equal = self._compare(node, _COMPARE[exp.EQ], node.this, node.expression)
            a, b = self.value(node.this, None).expr, self.value(node.expression, None).expr
            both_null = pc.is_null(a) & pc.is_null(b)
            return pc.if_else(both_null, pc.scalar(True), pc.Expression._call("coalesce", [equal, pc.scalar(False)]))
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            inner = self.boolean(node.this)
            wanted = inner if node.expression.this else ~inner
            return pc.Expression._call("coalesce", [wanted, pc.scalar(False)])  # x IS TRUE / FALSE is never NULL
        lit = literal_of(node)
        if lit is not None and (lit.value is None or isinstance(lit.value, bool)):
            return _NULL_BOOL if lit.value is None else pc.scalar(lit.value)
        ref = ref_of(node)
        if ref is not None and kind_of(ref.leaf.type) == Kind.BOOLEAN:
            return self.value(node, None).expr
        if ref is None and lit is None and not isinstance(node, _BOOLEAN_SHAPES):
            typed = self.typed(node)
            if typed.name == "boolean":
                return typed.expr
            raise self.fail(node, f"it is {typed.name or 'NULL'}, not boolean")
        raise self.fail(node)

    def _compare(self, node: exp.Expr, build: Any, left: exp.Expr, right: exp.Expr) -> Any:
        a = self.value(left, None)
        b = self.value(right, a)
        if isinstance(left, exp.Expr) and literal_of(left) is not None:
            a = self.value(left, b)
        if a.expr is _NULL_BOOL or b.expr is _NULL_BOOL:
            return _NULL_BOOL
        self._check_comparable(node, a, b)
        left_nan, right_nan = _nan_possible(left, a), _nan_possible(right, b)
        if not (left_nan or right_nan):
            return build(a.expr, b.expr)
        # Spark orders NaN above every number and equal to itself; IEEE (Arrow) makes every
        # comparison with NaN false: add the NaN cases, and keep NULL when either side is NULL
        no = pc.scalar(False)
        na = pc.Expression._call("is_nan", [a.expr]) if left_nan else no
        nb = pc.Expression._call("is_nan", [b.expr]) if right_nan else no
        equal = (a.expr == b.expr) | (na & nb)
        nan_aware = {
            _COMPARE[exp.EQ]: equal,
            _COMPARE[exp.NEQ]: ~equal,
            _COMPARE[exp.GT]: (a.expr > b.expr) | (na & ~nb),
            _COMPARE[exp.GTE]: (a.expr >= b.expr) | na,
            _COMPARE[exp.LT]: (a.expr < b.expr) | (~na & nb),
            _COMPARE[exp.LTE]: (a.expr <= b.expr) | nb,
        }[build]
        return pc.if_else(pc.is_null(a.expr) | pc.is_null(b.expr), _NULL_BOOL, nan_aware)

    def _check_comparable(self, node: exp.Expr, a: _Typed, b: _Typed) -> None:
        if a.kind == b.kind and a.kind not in (Kind.UNKNOWN, Kind.COMPLEX, Kind.BINARY):
            return
        raise self.fail(node, f"cannot compare {a.kind.value} with {b.kind.value} exactly")

    def _in(self, node: exp.In) -> Any:
        subject = self.value(node.this, None)
        values: list[Any] = []
        has_null = False
        for item in node.expressions:
            lit = literal_of(item)
            if lit is None:
                raise self.fail(node, "IN values must be literals")
            if lit.value is None:
                has_null = True
                continue
            typed = self._literal(item, lit, subject)
            self._check_comparable(node, subject, typed)
            values.append(typed.scalar)  # type: ignore[attr-defined]
        if subject.data_type is None:
            raise self.fail(node, "IN needs a column on the left")
        if subject.data_type.name in ("float", "double"):
            # hashing tells -0.0 from 0.0 (and SQL says they are equal): use Kleene ORs instead
            result = _NULL_BOOL if has_null else pc.scalar(False)
            for scalar in reversed(values):
                result = (subject.expr == pc.scalar(scalar)) | result
            return result
        try:
            value_set = pa.array([v.as_py() for v in values], type=to_arrow_type(subject.data_type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            # a value the column type cannot hold (1.005 for DECIMAL(10,2), 2**31 for INT)
            raise self.fail(node, "an IN value does not fit the column type") from None
        matched = pc.is_in(subject.expr, value_set=value_set, skip_nulls=True)
        result = pc.if_else(pc.is_null(subject.expr), _NULL_BOOL, matched)
        if has_null:
            result = pc.if_else(result, pc.scalar(True), _NULL_BOOL)
        return result

    def _like(self, node: exp.Like) -> Any:
        subject = self.value(node.this, None)
        pattern = literal_of(node.expression)
        if pattern is None or subject.kind != Kind.STRING:
            raise self.fail(node, "LIKE needs a string column and a literal pattern")
        if pattern.value is None:
            return _NULL_BOOL
        return pc.match_like(subject.expr, str(pattern.value))

    # --- values --------------------------------------------------------------------------------

    def value(self, node: exp.Expr, other: _Typed | None) -> _Typed:
        ref = ref_of(node)
        if ref is not None:
            name = self._rename.get(ref.key.lower(), ref.top)
            return _Typed(pc.field(name, *ref.path[1:]), kind_of(ref.leaf.type), ref.leaf.type)
        if isinstance(node, exp.Paren):
            return self.value(node.this, other)
        lit = literal_of(node)
        if lit is not None:
            if lit.value is None:
                return _Typed(_NULL_BOOL, Kind.NULL, None)
            return self._literal(node, lit, other)
        for op in _ARITH:
            if isinstance(node, op):
                # typed as Spark types it (no decimals, no mixing of integers and floating point),
                # so literals compared with the result are coerced to that type
                expr, _, arrow_type = _ValueTranslator.family_value(self, node)  # type: ignore[arg-type]
                return _Typed(expr, Kind.NUMERIC, PrimitiveType(_SPARK_NAME[arrow_type]))
        if isinstance(node, exp.Mod):
            expr, _, arrow_type = _ValueTranslator.family_value(self, node)  # type: ignore[arg-type]
            return _Typed(expr, Kind.NUMERIC, PrimitiveType(_SPARK_NAME[arrow_type]))
        if isinstance(node, exp.Neg):
            inner = self.value(node.this, None)
            if inner.kind != Kind.NUMERIC:
                raise self.fail(node)
            return _Typed(pc.Expression._call("negate_checked", [inner.expr]), Kind.NUMERIC, inner.data_type)
        typed = self.typed(node)
        if typed.data_type is None:
            return _Typed(_NULL_BOOL, Kind.NULL, None)
        return _Typed(typed.expr, kind_of(typed.data_type), typed.data_type)

    def _literal(self, node: exp.Expr, lit: Lit, other: _Typed | None) -> _Typed:
        target = other.data_type if other is not None else None
        kind = other.kind if other is not None else lit.kind
        value = _coerce(lit, kind, target)
        if value is _UNSUPPORTED:
            raise self.fail(node, f"no exact {kind.value} value for literal {lit.value!r}")
        arrow_type = _literal_arrow_type(kind, target, value)
        scalar = pa.scalar(value, type=arrow_type)
        typed = _TypedLiteral(pc.scalar(scalar), kind, None, scalar)
        return typed


@dataclass(frozen=True, slots=True)
class _TypedLiteral(_Typed):
    scalar: Any


_UNSUPPORTED = object()


def _coerce(lit: Lit, kind: Kind, target: DataType | None) -> Any:
    value = lit.value
    if kind == Kind.NUMERIC:
        number: Any = (
            value if lit.kind == Kind.NUMERIC else parse_number_text(str(value)) if lit.kind == Kind.STRING else None
        )
        if number is None or isinstance(number, bool):
            return _UNSUPPORTED
        if isinstance(number, float) and math.isnan(number):
            return _UNSUPPORTED
        if is_integral(target) and not isinstance(number, int):
            # Spark compares an integer column with 2.5 exactly (as decimals) or with 1.5E0 as
            # doubles; Arrow would cast the column to float32 and fail beyond 2**24
            return _UNSUPPORTED
        if isinstance(number, int) and target is not None and target.name in ("decimal", "double", "float"):
            # Spark casts the integer to the column's type; Arrow would fail on an int64 scalar
            # (decimal precision, or beyond 2**53 for doubles)
            if target.name == "decimal":
                return decimal.Decimal(number)
            return float(number) if target.name == "double" or abs(number) <= 2**24 else _UNSUPPORTED
        if isinstance(number, decimal.Decimal) and (target is None or kind_of(target) == Kind.NUMERIC):
            return number if target is not None and target.name == "decimal" else float(number)
        return number
    if kind == Kind.STRING:
        return value if lit.kind == Kind.STRING else _UNSUPPORTED
    if kind == Kind.BOOLEAN:
        if lit.kind == Kind.BOOLEAN:
            return value
        text = str(value).strip().lower()
        return {"true": True, "false": False}.get(text, _UNSUPPORTED)
    if kind == Kind.DATE:
        if isinstance(value, dt.date):
            return value
        parsed = parse_date_text(str(value)) if lit.kind == Kind.STRING else None
        return _UNSUPPORTED if parsed is None else parsed
    if kind in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ):
        ts = value if isinstance(value, TimestampText) else None
        if lit.kind == Kind.STRING:
            ts = parse_timestamp_text(str(value))
        if ts is None:
            return _UNSUPPORTED
        if kind == Kind.TIMESTAMP:
            return ts.wall_micros if ts.offset_seconds is None else ts.utc_micros()
        return ts.wall_micros if ts.offset_seconds is None else _UNSUPPORTED
    return _UNSUPPORTED


def _literal_arrow_type(kind: Kind, target: DataType | None, value: Any) -> pa.DataType | None:
    if kind == Kind.TIMESTAMP:
        return pa.timestamp("us", tz="UTC")
    if kind == Kind.TIMESTAMP_NTZ:
        return pa.timestamp("us")
    if kind == Kind.DATE:
        return pa.date32()
    if target is not None and kind == Kind.NUMERIC and isinstance(value, int) and is_integral(target):
        bits = _INT_WIDTH.get(target.name, 64)
        return to_arrow_type(target) if -(2 ** (bits - 1)) <= value < 2 ** (bits - 1) else pa.int64()
    return None


_BOOLEAN_SHAPES = (exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.In, exp.Between, exp.Is, exp.Like)


def _nan_possible(node: exp.Expr, typed: _Typed) -> bool:
    """Whether a compared value may be NaN: its type is FLOAT/DOUBLE (computed and column values
    carry their type), or, untyped, ``_may_be_nan`` says so."""
    if typed.data_type is not None:
        return typed.data_type.name in ("float", "double")
    return _may_be_nan(node)


def _may_be_nan(node: exp.Expr) -> bool:
    """Whether ``node`` may evaluate to NaN: it reads a float/double column or computes with a
    float literal (a NaN literal is refused where literals are coerced)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if literal_of(node) is not None:
        return False
    for sub in node.walk():
        ref = ref_of(sub)
        if ref is not None and ref.leaf.type.name in ("float", "double"):
            return True
        lit = literal_of(sub)
        if lit is not None and isinstance(lit.value, float):
            return True
    return False


def to_pyarrow_expression(pred: BoundPredicate, rename: Mapping[str, str] | None = None) -> pc.Expression:
    """An Arrow filter equal to ``pred`` under SQL semantics (rows where it is TRUE).

    ``rename`` maps ``name`` or ``alias.name`` to the Arrow field name to read (e.g. physical
    names); raises InvalidPredicateError for constructs Arrow cannot evaluate exactly.
    """
    return _ValueTranslator(pred, rename).boolean(pred.tree)  # its family_value types arithmetic


# --- values (UPDATE SET / MERGE assignments) ---------------------------------------------------
#
# Only shapes whose result equals Spark's (ANSI mode, store assignment into the column) exactly:
# NULL, literals of the column's family that fit it, columns of the same family that widen or
# narrow with an overflow check, and + - * over integers or over floating point, typed the way
# Spark types them (an integer literal is INT when it fits, else BIGINT). Anything else raises
# InvalidPredicateError, and the command runs on Spark instead.

_INT_WIDTH = {"byte": 8, "short": 16, "integer": 32, "long": 64}
_FLOATING = ("float", "double")
_SPARK_NAME = {
    pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long",
    pa.float32(): "float", pa.float64(): "double",
}


def _type_name(data_type: DataType | None) -> str:
    return "" if data_type is None else data_type.name


VOID = PrimitiveType("void")  # Spark's NullType: an untyped NULL as a field of a computed struct



class _ValueTranslator(_Translator):
    nested_values = False  # also type named_struct / STRUCT(... AS f) values (to_pyarrow_typed)
    _bare = True  # the node being typed is the whole value, or a field of a bare named_struct

    def _typed(self, node: exp.Expr) -> Val:
        bare, self._bare = self._bare, False
        try:
            inner = node
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if self.nested_values and isinstance(inner, exp.Struct):
                return self._struct_value(inner, bare)
            return super()._typed(node)
        finally:
            self._bare = bare

    def _struct_value(self, node: exp.Struct, bare: bool) -> Val:
        """``named_struct(...)`` as Spark builds it (CreateNamedStruct): the fields with the names
        and in the order written, each of its own type (an untyped NULL: VOID), never NULL itself.
        Matching those fields to a column's is the caller's alignment plan, not done here. An
        untyped NULL field is taken only where the struct is the value itself or a field of such
        a struct (``bare``): Arrow's if_else / case_when / coalesce cannot carry a null-typed field."""
        items = list(node.expressions)
        if not items or not all(isinstance(i, exp.PropertyEQ) and isinstance(i.this, exp.Identifier) for i in items):
            raise self.fail(node, "a struct value is evaluated locally only with named fields")
        names = [str(i.this.name) for i in items]
        values = []
        for item in items:
            self._bare = bare
            value = self._typed(item.expression)
            if value.data_type is None and not bare:
                raise self.fail(node, "a struct with an untyped NULL field inside a function or conditional")
            values.append(value)
        fields = tuple(StructField(n, VOID if v.data_type is None else v.data_type) for n, v in zip(names, values, strict=True))
        exprs = [v.expr for v in values]
        return Val(pc.Expression._call("make_struct", exprs, pc.MakeStructOptions(field_names=names)), StructType(fields))

    def family_value(self, node: exp.Expr) -> tuple[Any, str, pa.DataType]:
        """(Arrow expression, 'int' | 'float', Arrow type) of a numeric sub-expression, typed as Spark
        types it: both operands of + - * are cast to the wider of their types explicitly (Arrow
        would otherwise narrow a literal to the column's type: SMALLINT + 1 overflowing SMALLINT)."""
        while isinstance(node, exp.Paren):
            node = node.this
        ref = ref_of(node)
        if ref is not None:
            name = self._rename.get(ref.key.lower(), ref.top)
            type_name = _type_name(ref.leaf.type)
            if type_name in _INT_WIDTH:
                return pc.field(name, *ref.path[1:]), "int", to_arrow_type(ref.leaf.type)
            if type_name in _FLOATING:
                return pc.field(name, *ref.path[1:]), "float", to_arrow_type(ref.leaf.type)
            raise self.fail(node, f"column of type {type_name} in arithmetic")
        lit = literal_of(node)
        if lit is not None:
            if isinstance(lit.value, bool) or lit.kind != Kind.NUMERIC:
                raise self.fail(node, "arithmetic needs numbers")
            if isinstance(lit.value, int):
                arrow_type = pa.int32() if -(2**31) <= lit.value < 2**31 else pa.int64()
                if not -(2**63) <= lit.value < 2**63:
                    raise self.fail(node, "integer literal out of BIGINT range")
                return pc.scalar(pa.scalar(lit.value, arrow_type)), "int", arrow_type
            if isinstance(lit.value, float) and math.isfinite(lit.value):
                return pc.scalar(pa.scalar(lit.value, pa.float64())), "float", pa.float64()
            raise self.fail(node, "decimal literals in arithmetic are typed as DECIMAL by Spark")
        if not isinstance(node, (*_ARITH, exp.Mod, exp.Neg)):
            typed = self.typed(node)  # a function, CASE, cast ... of a numeric type
            if typed.name in _INT_WIDTH:
                return typed.expr, "int", to_arrow_type(typed.data_type)  # type: ignore[arg-type]
            if typed.name in _FLOATING:
                return typed.expr, "float", to_arrow_type(typed.data_type)  # type: ignore[arg-type]
            raise self.fail(node, f"arithmetic on {typed.name or 'NULL'}")
        for op, fn in _ARITH.items():
            if isinstance(node, op):
                (a, fa, ta), (b, fb, tb) = self.family_value(node.this), self.family_value(node.expression)
                if fa != fb:
                    # Spark converts the integer side to the floating side's type (rounding)
                    wider = ta if fa == "float" else tb
                    a, b = a.cast(wider, safe=False), b.cast(wider, safe=False)
                    return pc.Expression._call(fn, [a, b]), "float", wider
                wider = ta if ta.bit_width >= tb.bit_width else tb
                return pc.Expression._call(fn, [a.cast(wider), b.cast(wider)]), fa, wider
        if isinstance(node, exp.Mod):
            (a, fa, ta), (b, fb, tb) = self.family_value(node.this), self.family_value(node.expression)
            if fa != "int" or fb != "int":
                raise self.fail(node, "% is evaluated locally on integers only")
            wider = ta if ta.bit_width >= tb.bit_width else tb
            return _integer_remainder(a, self.divisor(b.cast(wider), wider), wider), "int", wider
        if isinstance(node, exp.Neg):
            inner, family, arrow_type = self.family_value(node.this)
            return pc.Expression._call("negate_checked", [inner]), family, arrow_type
        raise self.fail(node)

    def arithmetic(self, node: exp.Expr) -> Val:
        expr, _, arrow_type = self.family_value(node)
        return Val(expr, PrimitiveType(_SPARK_NAME[arrow_type]))

    def assigned(self, node: exp.Expr, target: DataType) -> Any:
        """An Arrow expression of ``node`` already of the column's Arrow type (checked casts)."""
        while isinstance(node, exp.Paren):
            node = node.this
        arrow_target = to_arrow_type(target)
        target_name = _type_name(target)
        lit = literal_of(node)
        if lit is not None:
            return pc.scalar(self._assigned_literal(node, lit, target))
        ref = ref_of(node)
        if ref is not None:
            source = ref.leaf.type
            name = self._rename.get(ref.key.lower(), ref.top)
            column = pc.field(name, *ref.path[1:])
            if source == target:
                return column
            source_name = _type_name(source)
            if source_name in _INT_WIDTH and (target_name in _INT_WIDTH or target_name in _FLOATING):
                return column.cast(arrow_target, safe=True)
            if source_name == "float" and target_name == "double":
                return column.cast(arrow_target)
        if isinstance(node, exp.Struct) and isinstance(target, StructType):
            return self._assigned_struct(node, target)
        value = self.typed(node)
        try:
            return store(value, target)
        except Refused as exc:
            raise self.fail(node, str(exc)) from None

    def _assigned_struct(self, node: exp.Struct, target: StructType) -> Any:
        """``named_struct(...)`` stored into a struct column: each field value stored into its field
        type, as Spark's struct cast does field by field; the struct itself is never NULL, as Spark's
        CreateNamedStruct (a nested UPDATE / MERGE assignment is rewritten into one). Fields are
        matched by name, case-insensitively, as Delta's by-name struct cast
        (``resolveMergeUpdateStructsByName``); only a constructor naming exactly the column's fields
        is taken here (other field sets: the typed path's plan refuses or fills them). Each literal is
        stored with the field's type, so ``named_struct('d', -2.0)`` into a DOUBLE field is -2.0,
        where the typed path would first need Spark's DECIMAL(2,1), which Arrow does not compute."""
        items = [i for i in node.expressions if isinstance(i, exp.PropertyEQ) and isinstance(i.this, exp.Identifier)]
        by_name = {str(i.this.name).lower(): i for i in items}
        if len(items) != len(node.expressions) or len(by_name) != len(items) or set(by_name) != {
            f.name.lower() for f in target.fields
        } or len(items) != len(target.fields):
            raise self.fail(node, "a struct value is evaluated locally only with exactly the column's fields")
        values = [self.assigned(by_name[f.name.lower()].expression, f.type) for f in target.fields]
        return pc.Expression._call("make_struct", values, pc.MakeStructOptions(field_names=[f.name for f in target.fields]))

    def _assigned_literal(self, node: exp.Expr, lit: Lit, target: DataType) -> pa.Scalar:
        arrow_target = to_arrow_type(target)
        if lit.value is None:
            return pa.scalar(None, arrow_target)
        name = _type_name(target)
        value = lit.value
        if name in _INT_WIDTH:
            bits = _INT_WIDTH[name]
            fits = isinstance(value, int) and not isinstance(value, bool) and -(2 ** (bits - 1)) <= value < 2 ** (bits - 1)
            if lit.kind == Kind.NUMERIC and fits:
                return pa.scalar(value, arrow_target)
            raise self.fail(node, f"literal {value!r} into a {name} column")
        if name in _FLOATING and lit.kind == Kind.NUMERIC and not isinstance(value, bool):
            number = float(value)  # type: ignore[arg-type]
            if math.isfinite(number):
                return pa.scalar(number, arrow_target)
        if name == "decimal" and lit.kind == Kind.NUMERIC and isinstance(value, (int, decimal.Decimal)) and not isinstance(value, bool):
            exact = decimal.Decimal(value)
            scale = arrow_target.scale
            digits = len(exact.as_tuple().digits)
            exponent = exact.as_tuple().exponent
            if isinstance(exponent, int) and -exponent <= scale and digits - max(0, -exponent) <= arrow_target.precision - scale:
                return pa.scalar(exact, arrow_target)
        if name == "string" and lit.kind == Kind.STRING:
            return pa.scalar(value, arrow_target)
        if name == "boolean" and lit.kind == Kind.BOOLEAN:
            return pa.scalar(value, arrow_target)
        if name == "date" and lit.kind == Kind.DATE and isinstance(value, dt.date):
            return pa.scalar(value, arrow_target)
        if name in ("timestamp", "timestamp_ntz") and lit.kind in (Kind.TIMESTAMP, Kind.TIMESTAMP_NTZ):
            coerced = _coerce(lit, kind_of(target), target)
            if coerced is not _UNSUPPORTED:
                return pa.scalar(coerced, arrow_target)
        raise self.fail(node, f"literal {value!r} into a {name} column")


def _integer_remainder(a: Any, b: Any, wider: pa.DataType) -> Any:
    """Spark's integer ``a % b`` in the wider operand type: the remainder of truncated division
    (sign of ``a``, as Java's ``%``); ``b = 0`` fails as ANSI mode does (DIVIDE_BY_ZERO). ``x % -1``
    is computed as ``x % 1`` (both 0), so MIN % -1 cannot overflow the division as it would in Arrow."""
    a, b = a.cast(wider), b.cast(wider)
    minus_one = pc.scalar(pa.scalar(-1, wider))
    divisor = pc.Expression._call("if_else", [pc.Expression._call("equal", [b, minus_one]), pc.scalar(pa.scalar(1, wider)), b])
    quotient = pc.Expression._call("divide_checked", [a, divisor])
    return pc.Expression._call("subtract_checked", [a, pc.Expression._call("multiply_checked", [quotient, divisor])])


def to_pyarrow_value(value: BoundExpression, target: DataType, rename: Mapping[str, str] | None = None) -> pc.Expression:
    """An Arrow expression computing ``value`` stored into a column of type ``target`` exactly as
    Spark would (ANSI store assignment); InvalidPredicateError when that cannot be guaranteed."""
    return _ValueTranslator(value, rename).assigned(value.tree, target)


def to_pyarrow_typed(value: BoundExpression, rename: Mapping[str, str] | None = None) -> Val:
    """``value`` computed as it is, with the type Spark gives it (None: an untyped NULL), not yet
    stored into any column: for a nested value the caller rebuilds into the column's type by field
    name (``engine/local/struct_align``), which no Arrow compute expression can do inside lists and
    maps. Struct constructors are typed too. InvalidPredicateError when not exactly computable."""
    translator = _ValueTranslator(value, rename)
    translator.nested_values = True
    return translator.typed(value.tree)
