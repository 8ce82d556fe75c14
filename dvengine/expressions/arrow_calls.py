"""Function calls, CASE / IF, casts and typed literals as Arrow expressions with Spark's semantics.

The functions are those CHECK constraints and generation expressions commonly use, from Delta's
allow-list (``AllowedUserProvidedExpressions``): string (``arrow_strings``, regular expressions in
``arrow_regex``), math (abs, floor, ceil, round / bround, pmod, ``/``, ``div``, sqrt, logarithms and
exp in ``arrow_math``), conditional (coalesce, nvl, nvl2, if, CASE, nullif, greatest/least, isnull,
``<=>``), hashes (``arrow_hash``), string casts and parsing (``arrow_casts``) and date/time
(``arrow_datetime``). Most map to ``pyarrow.compute`` kernels; what no kernel computes as Spark does
is a vectorized routine registered as an Arrow function (``arrow_udfs``). Where Spark and Arrow
could disagree on some input (special-cased Unicode letters, Java regex constructs) the construct
is refused, or the rows where they would disagree fail the command, never silently take a
different value.

Arrow evaluates every branch of a conditional on every row, so a branch that fails (an overflow, a
division by zero) on a row the condition does not select fails the command where Spark would not
evaluate it; divisors inside a branch are therefore guarded by the branch's condition, and other
failures stay a known difference (the command is refused with nothing written, never a wrong value).
"""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from dvengine.errors import InvalidPredicateError
from dvengine.expressions import arrow_casts as casts
from dvengine.expressions import arrow_datetime as dates
from dvengine.expressions import arrow_hash as hashes
from dvengine.expressions import arrow_math as math_calls
from dvengine.expressions.arrow_strings import StringCalls, call
from dvengine.expressions.arrow_types import (
    FLOATING,
    INTEGRAL,
    NUMERIC_ORDER,
    Refused,
    Val,
    cast,
    coerce,
    common_type,
    prim,
)
from dvengine.expressions.literals import TimestampText, kind_of_sqlglot_type, literal_of
from dvengine.expressions.refs import ColumnRef, ref_of
from dvengine.protocol.schema import to_arrow_type

_SPARK_GENERATOR = Dialect.get_or_raise("spark").generator()
STRING, BOOLEAN, INT, LONG, DOUBLE = prim("string"), prim("boolean"), prim("integer"), prim("long"), prim("double")

_SQLGLOT_TYPES = {
    exp.DataType.Type.TINYINT: "byte", exp.DataType.Type.SMALLINT: "short", exp.DataType.Type.INT: "integer",
    exp.DataType.Type.BIGINT: "long", exp.DataType.Type.FLOAT: "float", exp.DataType.Type.DOUBLE: "double",
    exp.DataType.Type.BOOLEAN: "boolean", exp.DataType.Type.DATE: "date", exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPLTZ: "timestamp", exp.DataType.Type.TIMESTAMPTZ: "timestamp",
    exp.DataType.Type.TIMESTAMPNTZ: "timestamp_ntz",
    exp.DataType.Type.VARCHAR: "string", exp.DataType.Type.TEXT: "string",
}

_DATE_FIELD_NODES: dict[Any, str] = {
    exp.Year: "year", exp.Month: "month", exp.Day: "day", exp.DayOfMonth: "dayofmonth", exp.Quarter: "quarter",
    exp.DayOfWeek: "dayofweek", exp.DayOfYear: "dayofyear", exp.WeekOfYear: "weekofyear",
    exp.Hour: "hour", exp.Minute: "minute", exp.Second: "second",
}

class CallTranslator(StringCalls):
    """Typed values of every node the Arrow evaluator handles; the host supplies columns, booleans,
    errors and arithmetic (``arrow._Translator``)."""

    def fail(self, node: exp.Expr, why: str = "") -> InvalidPredicateError:
        raise NotImplementedError

    def boolean(self, node: exp.Expr) -> Any:
        raise NotImplementedError

    def column(self, ref: ColumnRef) -> Any:
        raise NotImplementedError

    def arithmetic(self, node: exp.Expr) -> Val:
        raise NotImplementedError

    def equal(self, node: exp.Expr, left: exp.Expr, right: exp.Expr) -> Any:
        """``left = right`` as the host compares (literals typed by the other side)."""
        raise NotImplementedError

    # --- dispatch ----------------------------------------------------------------------------

    def typed(self, node: exp.Expr) -> Val:
        """The value of ``node`` with its Spark type; InvalidPredicateError naming the node otherwise."""
        try:
            return self._typed(node)
        except Refused as exc:
            raise self.fail(node, str(exc)) from None

    def _typed(self, node: exp.Expr) -> Val:
        while isinstance(node, exp.Paren):
            node = node.this
        ref = ref_of(node)
        if ref is not None:
            return Val(self.column(ref), ref.leaf.type)
        lit = literal_of(node)
        if lit is not None:
            return self._typed_literal(node, lit.value)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod, exp.Neg)):
            return self.arithmetic(node)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node)
        if _is_boolean_node(node):
            return Val(self.boolean(node), BOOLEAN)
        for cls, name in _DATE_FIELD_NODES.items():
            if type(node) is cls:
                return dates.field(name, self._typed(node.this))
        handler = _HANDLERS.get(type(node))
        if handler is not None:
            return handler(self, node)  # type: ignore[no-any-return]
        if isinstance(node, exp.Anonymous):
            anonymous = _ANONYMOUS.get(str(node.name).lower())
            if anonymous is not None:
                return anonymous(self, node, list(node.expressions))  # type: ignore[no-any-return]
        raise self.fail(node)

    # --- literals and casts ------------------------------------------------------------------------

    def _typed_literal(self, node: exp.Expr, value: object) -> Val:
        """Spark's type of a literal: INT when an integer fits, else BIGINT; ``1.5e0`` DOUBLE;
        ``DATE '...'`` / ``TIMESTAMP '...'`` (zone-less: UTC, the session zone)."""
        if value is None:
            return Val(pc.scalar(pa.scalar(None, pa.null())), None)
        if isinstance(value, bool):
            return Val(pc.scalar(value), BOOLEAN)
        if isinstance(value, int):
            if -(2**31) <= value < 2**31:
                return Val(pc.scalar(pa.scalar(value, pa.int32())), INT)
            if -(2**63) <= value < 2**63:
                return Val(pc.scalar(pa.scalar(value, pa.int64())), LONG)
            raise Refused("integer literal out of BIGINT range")
        if isinstance(value, float):  # 1.5E0, or CAST('NaN' AS DOUBLE) folded
            return Val(pc.scalar(pa.scalar(value, pa.float64())), DOUBLE)
        if isinstance(value, decimal.Decimal):
            if isinstance(node, (exp.Cast, exp.TryCast)) and node.to.this in (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT):
                return Val(pc.scalar(pa.scalar(float(value), pa.float64())), DOUBLE)
            raise Refused("decimal literals are DECIMAL in Spark, which the Arrow evaluator does not compute with")
        if isinstance(value, str):
            return Val(pc.scalar(pa.scalar(value, pa.string())), STRING)
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            return Val(pc.scalar(pa.scalar(value, pa.date32())), prim("date"))
        if isinstance(value, TimestampText):
            to = node.args.get("to") if isinstance(node, (exp.Cast, exp.TryCast)) else None
            ntz = isinstance(to, exp.DataType) and to.this == exp.DataType.Type.TIMESTAMPNTZ
            if ntz:
                if value.offset_seconds is not None:
                    raise Refused("a TIMESTAMP_NTZ literal with a zone")
                return Val(pc.scalar(pa.scalar(value.wall_micros, pa.timestamp("us"))), prim("timestamp_ntz"))
            micros = value.utc_micros() if value.offset_seconds is not None else value.wall_micros
            return Val(pc.scalar(pa.scalar(micros, pa.timestamp("us", tz="UTC"))), prim("timestamp"))
        raise Refused(f"literal {value!r}")

    def _cast(self, node: exp.Expr) -> Val:
        to = node.args.get("to")
        name = _SQLGLOT_TYPES.get(to.this) if isinstance(to, exp.DataType) else None
        if name is None or (isinstance(to, exp.DataType) and to.expressions):
            if isinstance(to, exp.DataType) and kind_of_sqlglot_type(to).value == "string" and not to.expressions:
                name = "string"
            else:
                raise Refused(f"CAST to {to.sql('spark') if isinstance(to, exp.Expr) else to}")
        target = prim(name)
        source = self._typed(node.this)
        if source.name == "string" and name != "string":
            return Val(casts.from_string(source, target), target)
        return Val(cast(source, target), target)

    # --- math ------------------------------------------------------------------------------------

    def _number(self, node: exp.Expr, what: str) -> Val:
        v = self._typed(node)
        if v.name not in NUMERIC_ORDER:
            raise Refused(f"{what} of a {v.name or 'NULL'} value")
        return v

    def abs_(self, node: exp.Expr) -> Val:
        v = self._number(node.this, "abs()")
        return Val(call("abs_checked" if v.name in INTEGRAL else "abs", v.expr), v.data_type)  # ANSI: abs(MIN) fails

    def floor_ceil(self, node: exp.Expr) -> Val:
        """``floor`` / ``ceil``: BIGINT. From floating point: NaN gives 0 and a result beyond the
        BIGINT range fails (ARITHMETIC_OVERFLOW), as Spark 4 in ANSI mode does."""
        if node.args.get("decimals") is not None:
            raise Refused("floor/ceil with a scale returns DECIMAL")
        v = self._number(node.this, "floor/ceil")
        if v.name in INTEGRAL:
            return Val(v.expr.cast(pa.int64()), LONG)
        rounded = call("floor" if isinstance(node, exp.Floor) else "ceil", v.expr.cast(pa.float64()))
        as_long = call("if_else", call("is_nan", rounded), pc.scalar(0.0), rounded).cast(pa.int64(), safe=True)
        return Val(as_long, LONG)

    def round_(self, node: exp.Expr) -> Val:
        return self.round_value(node.this, node.args.get("decimals"), "half_towards_infinity")

    def round_value(self, value: exp.Expr, digits_node: exp.Expr | None, mode: str) -> Val:
        """``round`` (HALF_UP) / ``bround`` (HALF_EVEN). Integers: Arrow's kernel; rounding past the
        type's range fails (Spark wraps). FLOAT / DOUBLE: ``arrow_math.round_floating`` (Spark rounds
        the shortest decimal text, not the binary value)."""
        digits = 0 if digits_node is None else self._literal_int(digits_node, "the digits of round()")
        v = self._number(value, "round()")
        if digits is None:
            return Val(pc.scalar(pa.scalar(None, to_arrow_type(v.data_type))), v.data_type)  # type: ignore[arg-type]
        if v.name in FLOATING:
            return math_calls.round_floating(v, digits, "half_up" if mode == "half_towards_infinity" else "half_even")
        if digits >= 0:
            return v
        if digits < -18:
            raise Refused("round() to more digits than a BIGINT holds")
        return Val(call("round", v.expr, options=pc.RoundOptions(ndigits=digits, round_mode=mode)), v.data_type)

    def divide(self, node: exp.Expr) -> Val:
        """``a / b``: DOUBLE (Spark divides integers and floats as doubles); dividing by zero fails."""
        a, b = self._number(node.this, "/"), self._number(node.expression, "/")
        return Val(call("divide_checked", a.expr.cast(pa.float64(), safe=False), self.divisor(b.expr.cast(pa.float64(), safe=False), pa.float64())), DOUBLE)

    def int_divide(self, node: exp.Expr) -> Val:
        """``a div b``: BIGINT, truncated; by zero and MIN div -1 fail (ANSI)."""
        a, b = self._number(node.this, "div"), self._number(node.expression, "div")
        if a.name not in INTEGRAL or b.name not in INTEGRAL:
            raise Refused("div of floating point")
        return Val(call("divide_checked", a.expr.cast(pa.int64()), self.divisor(b.expr.cast(pa.int64()), pa.int64())), LONG)

    def pmod(self, node: exp.Expr, args: list[exp.Expr]) -> Val:
        """``pmod(a, n)``: ``r = a % n; r < 0 ? (r + n) % n : r`` on integers of the wider type (the
        addition wraps, as Java's int addition does); a zero divisor fails (ANSI)."""
        if len(args) != 2:
            raise Refused("pmod takes two arguments")
        a, n = self._number(args[0], "pmod"), self._number(args[1], "pmod")
        if a.name not in INTEGRAL or n.name not in INTEGRAL:
            raise Refused("pmod of floating point")
        wider = prim(max(a.name, n.name, key=NUMERIC_ORDER.index))
        arrow_type = to_arrow_type(wider)
        x, m = coerce(a, wider), self.divisor(coerce(n, wider), arrow_type)
        r = _remainder(x, m, arrow_type)
        again = _remainder(call("add", r, m), m, arrow_type)
        return Val(call("if_else", call("less", r, pc.scalar(pa.scalar(0, arrow_type))), again, r), wider)

    def divisor(self, divisor: Any, arrow_type: pa.DataType) -> Any:
        """The divisor (of ``arrow_type``), or 1 on rows an enclosing conditional branch does not
        select (Arrow evaluates every branch on every row; Spark does not divide there)."""
        guard = getattr(self, "_branch_guard", None)
        if guard is None:
            return divisor
        return call("if_else", guard, divisor, pc.scalar(pa.scalar(1, arrow_type)))

    # --- conditionals ------------------------------------------------------------------------------

    def _branch(self, guard: Any, node: exp.Expr) -> Val:
        previous = getattr(self, "_branch_guard", None)
        self._branch_guard = guard if previous is None else call("and_kleene", previous, guard)
        try:
            return self._typed(node)
        finally:
            self._branch_guard = previous

    def _condition(self, node: exp.Expr) -> Any:
        return call("coalesce", self.boolean(node), pc.scalar(False))  # NULL selects the ELSE branch

    def if_(self, node: exp.Expr) -> Val:
        return self._choose(node, self._condition(node.this), "IF")

    def _choose(self, node: exp.Expr, cond: Any, name: str) -> Val:
        """``node``'s ``true`` value where ``cond`` holds, else its ``false`` value (NULL when absent);
        each branch evaluated only on its own rows (``_branch``), as IF and nvl2 do."""
        yes = self._branch(cond, node.args["true"])
        no = self._branch(call("invert", cond), node.args["false"]) if node.args.get("false") is not None else self._typed_literal(node, None)
        target = common_type([yes, no], name)
        if target is None:
            return no
        return Val(call("if_else", cond, coerce(yes, target), coerce(no, target)), target)

    def case(self, node: exp.Expr) -> Val:
        """Searched and simple CASE: the first TRUE condition's value (NULL conditions are not TRUE)."""
        subject = node.args.get("this")
        conditions: list[Any] = []
        values: list[Val] = []
        taken: Any = pc.scalar(False)
        for branch in node.args.get("ifs") or []:
            if subject is not None:
                cond = call("coalesce", self.equal(node, subject, branch.this), pc.scalar(False))
            else:
                cond = self._condition(branch.this)
            conditions.append(cond)
            values.append(self._branch(call("and_kleene", call("invert", taken), cond), branch.args["true"]))
            taken = call("or_kleene", taken, cond)
        default = node.args.get("default")
        values.append(self._branch(call("invert", taken), default) if default is not None else self._typed_literal(node, None))
        target = common_type(values, "CASE")
        if target is None:
            return values[-1]
        arms = [coerce(v, target) for v in values]
        return Val(call("case_when", call("make_struct", *conditions, options=pc.MakeStructOptions([f"c{i}" for i in range(len(conditions))])), *arms), target)

    def coalesce(self, node: exp.Expr) -> Val:
        args = [node.this, *node.expressions]
        values = [self._typed(a) for a in args]
        target = common_type(values, "coalesce")
        if target is None:
            return values[0]
        return Val(call("coalesce", *[coerce(v, target) for v in values]), target)

    def nvl2(self, node: exp.Expr) -> Val:
        return self._choose(node, call("is_valid", self._typed(node.this).expr), "nvl2")

    def nullif(self, node: exp.Expr) -> Val:
        a = self._typed(node.this)
        same = call("coalesce", self.equal(node, node.this, node.expression), pc.scalar(False))
        if a.data_type is None:
            return a
        return Val(call("if_else", same, pc.scalar(pa.scalar(None, to_arrow_type(a.data_type))), a.expr), a.data_type)

    def extreme(self, node: exp.Expr) -> Val:
        """``greatest`` / ``least``: NULLs skipped (NULL only when all are). Floating point goes
        through ``arrow_math.extreme_floating`` (Spark orders NaN above every number; Arrow's
        element-wise max ignores it)."""
        values = [self._typed(a) for a in (node.this, *node.expressions)]
        target = common_type(values, "greatest/least")
        if target is None:
            return values[0]
        if target.name in FLOATING:
            return Val(math_calls.extreme_floating([coerce(v, target) for v in values], isinstance(node, exp.Greatest)), target)
        if target.name not in (*INTEGRAL, "string", "date", "timestamp", "timestamp_ntz", "boolean"):
            raise Refused(f"greatest/least of {target.name}")
        kernel = "max_element_wise" if isinstance(node, exp.Greatest) else "min_element_wise"
        return Val(call(kernel, *[coerce(v, target) for v in values], options=pc.ElementWiseAggregateOptions(skip_nulls=True)), target)

    def logarithm(self, node: exp.Expr) -> Val:
        """``ln(x)`` (sqlglot's Ln, also ``log(x)``) and ``log(b, x)`` (Log, also ``log2``): DOUBLE."""
        if isinstance(node, exp.Ln):
            return Val(math_calls.ln(self._number(node.this, "ln()").expr.cast(pa.float64(), safe=False)), DOUBLE)
        if node.args.get("expression") is None:
            return Val(math_calls.ln(self._number(node.this, "log()").expr.cast(pa.float64(), safe=False)), DOUBLE)
        base = self._number(node.this, "log()").expr.cast(pa.float64(), safe=False)
        return Val(math_calls.log_base(base, self._number(node.expression, "log()").expr.cast(pa.float64(), safe=False)), DOUBLE)

    def exp_(self, node: exp.Expr) -> Val:
        return Val(math_calls.exp(self._number(node.this, "exp()").expr.cast(pa.float64(), safe=False)), DOUBLE)

    def sqrt(self, node: exp.Expr) -> Val:
        """``sqrt(x)``: DOUBLE, NaN for negatives (IEEE square root is exact in both)."""
        v = self._number(node.this, "sqrt()")
        return Val(call("sqrt", v.expr.cast(pa.float64(), safe=False)), DOUBLE)

    # --- hashes ----------------------------------------------------------------------------------

    def digest(self, node: exp.Expr) -> Val:
        algorithm = "md5" if isinstance(node, exp.MD5) else "sha1"
        return hashes.digest(self._typed(node.this), algorithm)

    def sha2(self, node: exp.Expr) -> Val:
        return hashes.sha2(self._typed(node.this), self._literal_int(node.args.get("length"), "the bit length of sha2()"))

    def isnan(self, node: exp.Expr) -> Val:
        v = self._number(node.this, "isnan()")
        if v.name not in FLOATING:
            return Val(pc.scalar(False), BOOLEAN)  # an integer is never NaN
        return Val(call("coalesce", call("is_nan", v.expr), pc.scalar(False)), BOOLEAN)  # isnan(NULL) is false

    # --- dates -----------------------------------------------------------------------------------

    def to_date(self, node: exp.Expr) -> Val:
        """``to_date(x)``: a STRING is cast as ``CAST(x AS DATE)`` (Spark's rule without a pattern)."""
        if node.args.get("format") is not None:
            raise Refused("to_date with a format")
        v = self._typed(node.this)
        if v.name == "string":
            return Val(casts.from_string(v, prim("date")), prim("date"))
        return Val(dates.as_date(v), prim("date"))

    def parse_call(self, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
        """``to_date(s, pattern)`` / ``to_timestamp(s, pattern)`` as written (``expressions.dialect``)."""
        if len(args) != 2:
            raise Refused(f"{node.name}() takes one or two arguments")
        pattern = self._literal_text(args[1], f"the pattern of {str(node.name).lower()}")
        target = "date" if str(node.name).lower() == "to_date" else "timestamp"
        if pattern is None:
            return Val(pc.scalar(pa.scalar(None, to_arrow_type(prim(target)))), prim(target))
        return casts.parse_with_pattern(self._typed(args[0]), pattern, target)

    def date_format_call(self, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
        """``date_format(x, pattern)`` as written (``expressions.dialect``); a STRING x is cast to
        TIMESTAMP first, as Spark's implicit cast does."""
        if len(args) != 2:
            raise Refused("date_format takes two arguments")
        pattern = self._literal_text(args[1], "the date_format pattern")
        v = self._typed(args[0])
        if v.name == "string":
            v = Val(casts.from_string(v, prim("timestamp")), prim("timestamp"))
        return dates.date_format(v, pattern)

    def date_format(self, node: exp.Expr) -> Val:
        """sqlglot stores the pattern translated to its own time format; the Spark pattern is what
        its Spark generator gives back (the text Spark itself evaluates)."""
        if literal_of(node.args["format"]) is None:
            raise Refused("the date_format pattern must be a string literal")
        if literal_of(node.args["format"]).value is None:  # type: ignore[union-attr]
            return dates.date_format(self._typed(node.this), None)
        spark_pattern = _SPARK_GENERATOR.format_time(node)
        if spark_pattern is None:
            raise Refused("the date_format pattern must be a string literal")
        return dates.date_format(self._typed(node.this), str(exp.Literal.string(spark_pattern[1:-1].replace("\\'", "'")).this))

    def date_trunc(self, node: exp.Expr) -> Val:
        """A ``TimestampTrunc`` node (a tree not parsed by ``expressions.dialect``): its unit was
        already rewritten by sqlglot, so only the unabbreviated names are taken as written."""
        unit = node.args.get("unit")
        text = self._literal_text(unit, "the date_trunc unit") if not isinstance(unit, exp.Var) else str(unit.name)
        return dates.date_trunc(text, self._typed(node.this))

    def trunc(self, node: exp.Expr) -> Val:
        unit = node.args.get("unit")
        text = self._literal_text(unit, "the trunc unit") if not isinstance(unit, exp.Var) else str(unit.name)
        return dates.trunc(self._typed(node.this), text)

    def truncate_call(self, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
        """``date_trunc(unit, x)`` / ``trunc(d, unit)`` as written (``expressions.dialect``): the unit
        must be a string literal (Spark reads a column unit row by row; not evaluated here), and one
        Spark does not know gives NULL ('Q', 'WK', 'D' ...), as in Spark."""
        if len(args) != 2:
            raise Refused(f"{node.name}() takes two arguments")
        is_date_trunc = str(node.name).lower() == "date_trunc"
        unit_node, value = (args[0], args[1]) if is_date_trunc else (args[1], args[0])
        unit = self._literal_text(unit_node, f"the {str(node.name).lower()} unit")
        if is_date_trunc:
            return dates.date_trunc(unit, self._typed(value))
        return dates.trunc(self._typed(value), unit)

    def date_add(self, node: exp.Expr) -> Val:
        unit = node.args.get("unit")
        if unit is not None and str(unit.name if isinstance(unit, exp.Expr) else unit).upper() not in ("DAY", ""):
            raise Refused(f"date_add by {unit}")
        return dates.date_add(self._typed(node.this), self._typed(node.expression))

    def datediff(self, node: exp.Expr) -> Val:
        if node.args.get("unit") is not None:
            raise Refused("datediff with a unit")
        return dates.datediff(self._typed(node.this), self._typed(node.expression))

    def extract(self, node: exp.Expr) -> Val:
        unit = node.this
        name = dates.EXTRACT_FIELDS.get(str(unit.name if isinstance(unit, exp.Expr) else unit).lower())
        if name is None:
            raise Refused(f"EXTRACT({unit.sql('spark') if isinstance(unit, exp.Expr) else unit})")
        return dates.field(name, self._typed(node.expression))

    def date_part(self, node: exp.Expr, args: list[exp.Expr]) -> Val:
        if len(args) != 2:
            raise Refused("date_part takes two arguments")
        unit = self._literal_text(args[0], "the date_part field")
        name = dates.EXTRACT_FIELDS.get((unit or "").lower())
        if name is None:
            raise Refused(f"date_part({unit!r}, ...)")
        return dates.field(name, self._typed(args[1]))


def _remainder(a: Any, b: Any, arrow_type: pa.DataType) -> Any:
    """Truncated remainder (Java's ``%``); ``x % -1`` computed as ``x % 1`` so MIN % -1 cannot overflow."""
    minus_one = pc.scalar(pa.scalar(-1, arrow_type))
    divisor = call("if_else", call("equal", b, minus_one), pc.scalar(pa.scalar(1, arrow_type)), b)
    quotient = call("divide_checked", a, divisor)
    return call("subtract_checked", a, call("multiply_checked", quotient, divisor))


_BOOLEAN_NODES = (
    exp.And, exp.Or, exp.Not, exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.In, exp.Between, exp.Is,
    exp.Like, exp.NullSafeEQ,
)


def _is_boolean_node(node: exp.Expr) -> bool:
    return isinstance(node, _BOOLEAN_NODES)


def _unary_anonymous(method: str) -> Any:
    def run(t: CallTranslator, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
        if len(args) != 1:
            raise Refused(f"{node.name}() takes one argument")
        return getattr(t, method)(args[0])  # type: ignore[no-any-return]

    return run


def _isnull(t: CallTranslator, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
    if len(args) != 1:
        raise Refused(f"{node.name}() takes one argument")
    inner = t._typed(args[0]).expr
    kernel = "is_null" if str(node.name).lower() == "isnull" else "is_valid"
    return Val(call(kernel, inner), BOOLEAN)


def _arity(node: exp.Anonymous, count: str) -> Val:
    raise Refused(f"{node.name}() takes {count} argument{'s' if count != 'one' else ''}")


def _bround(t: CallTranslator, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
    if len(args) not in (1, 2):
        raise Refused("bround takes one or two arguments")
    return t.round_value(args[0], args[1] if len(args) == 2 else None, "half_to_even")


def _weekday(t: CallTranslator, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
    if len(args) != 1:
        raise Refused("weekday takes one argument")
    return dates.field("weekday", t._typed(args[0]))


def _positive(t: CallTranslator, node: exp.Anonymous, args: list[exp.Expr]) -> Val:
    if len(args) != 1:
        raise Refused("positive takes one argument")
    return t._number(args[0], "positive()")


def _as_timestamp(t: CallTranslator, node: exp.Expr) -> Val:
    """sqlglot reads ``date_format(x, ...)``'s argument as a string-to-timestamp conversion; Spark
    casts dates and timestamps there (strings are refused: Spark's parsing is not modelled)."""
    inner = t._typed(node.this)
    if inner.name == "timestamp_ntz":
        return inner
    return Val(dates.as_timestamp(inner), prim("timestamp"))


_HANDLERS: dict[type[exp.Expr], Any] = {
    exp.Substring: CallTranslator.substring,
    exp.Left: CallTranslator.left,
    exp.Right: CallTranslator.right,
    exp.Concat: CallTranslator.concat,
    exp.DPipe: CallTranslator.concat,
    exp.ConcatWs: CallTranslator.concat_ws,
    exp.Upper: CallTranslator.case_map,
    exp.Lower: CallTranslator.case_map,
    exp.Trim: CallTranslator.trim,
    exp.Length: CallTranslator.length,
    exp.StartsWith: CallTranslator._affix,
    exp.EndsWith: CallTranslator._affix,
    exp.Contains: CallTranslator._affix,
    exp.Replace: CallTranslator.replace,
    exp.Abs: CallTranslator.abs_,
    exp.Floor: CallTranslator.floor_ceil,
    exp.Ceil: CallTranslator.floor_ceil,
    exp.Round: CallTranslator.round_,
    exp.Div: CallTranslator.divide,
    exp.IntDiv: CallTranslator.int_divide,
    exp.If: CallTranslator.if_,
    exp.Case: CallTranslator.case,
    exp.Coalesce: CallTranslator.coalesce,
    exp.Nvl2: CallTranslator.nvl2,
    exp.Nullif: CallTranslator.nullif,
    exp.Greatest: CallTranslator.extreme,
    exp.Sqrt: CallTranslator.sqrt,
    exp.Ln: CallTranslator.logarithm,
    exp.Log: CallTranslator.logarithm,
    exp.Exp: CallTranslator.exp_,
    exp.MD5: CallTranslator.digest,
    exp.SHA: CallTranslator.digest,
    exp.SHA2: CallTranslator.sha2,
    exp.Least: CallTranslator.extreme,
    exp.IsNan: CallTranslator.isnan,
    exp.TsOrDsToDate: CallTranslator.to_date,
    exp.TimeToStr: CallTranslator.date_format,
    exp.TimestampTrunc: CallTranslator.date_trunc,
    exp.DateTrunc: CallTranslator.trunc,
    exp.TsOrDsAdd: CallTranslator.date_add,
    exp.DateDiff: CallTranslator.datediff,
    exp.Extract: CallTranslator.extract,
    exp.AddMonths: lambda t, node: dates.add_months(t._typed(node.this), t._typed(node.expression)),
    exp.LastDay: lambda t, node: dates.last_day(t._typed(node.this)),
    exp.Pad: CallTranslator.pad,
    exp.RegexpLike: CallTranslator.rlike,
    exp.RegexpReplace: CallTranslator.regexp_replace,
    exp.RegexpExtract: CallTranslator.regexp_extract,
    exp.TimeStrToTime: _as_timestamp,
}

_ANONYMOUS: dict[str, Any] = {
    "pmod": lambda t, node, args: t.pmod(node, args),
    "isnull": _isnull,
    "isnotnull": _isnull,
    "bround": _bround,
    "weekday": _weekday,
    "positive": _positive,
    "date_part": lambda t, node, args: t.date_part(node, args),
    "date_trunc": lambda t, node, args: t.truncate_call(node, args),
    "date_format": lambda t, node, args: t.date_format_call(node, args),
    "to_date": lambda t, node, args: t.parse_call(node, args),
    "to_timestamp": lambda t, node, args: t.parse_call(node, args),
    "trunc": lambda t, node, args: t.truncate_call(node, args),
    "char_length": _unary_anonymous("length"),
    "hash": lambda t, node, args: hashes.hash_values([t._typed(a) for a in args], "murmur3"),
    "xxhash64": lambda t, node, args: hashes.hash_values([t._typed(a) for a in args], "xxhash64"),
    "log10": lambda t, node, args: Val(math_calls.log10(t._number(args[0], "log10()").expr.cast(pa.float64(), safe=False)), DOUBLE)
    if len(args) == 1 else _arity(node, "one"),
    "crc32": lambda t, node, args: hashes.crc32(t._typed(args[0])) if len(args) == 1 else _arity(node, "one"),
}

