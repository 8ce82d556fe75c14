"""Three-valued abstract interpretation of a bound predicate over a set of rows.

Instead of pushing NOT down by hand (easy to get wrong with NULLs), every boolean node evaluates
to the *set* of SQL truth values it may take on some row: a subset of {TRUE, FALSE, NULL}. NOT,
AND and OR then follow SQL's three-valued truth tables element-wise, so ``NOT (x > 5)`` is exact
by construction, including for NULL ``x``. A file can be skipped only when TRUE is not in the set
of the whole predicate. Combining sub-results as a cross product ignores correlations between
them, which only ever adds outcomes: the result stays sound, at some loss of precision.

What a column may hold comes from a caller-supplied function (partition values, file stats), so
partition pruning and stats skipping share this one evaluator.
"""

from __future__ import annotations

import bisect
import decimal
import re
from collections.abc import Callable
from itertools import product
from typing import Any

from sqlglot import exp

from dvengine.expressions.kinds import Kind
from dvengine.expressions.literals import Lit, literal_of
from dvengine.expressions.ranges import NULL_ONLY, TOP, Range, coerce_literal, literal_range, point
from dvengine.expressions.refs import ColumnRef, ref_of

Truth = bool | None
TruthSet = frozenset[Truth]
ALL: TruthSet = frozenset({True, False, None})
Operand = Range | Lit
ColumnRanges = Callable[[ColumnRef], Range]

_INT32 = 2**31


def and3(a: Truth, b: Truth) -> Truth:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or3(a: Truth, b: Truth) -> Truth:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def not3(a: Truth) -> Truth:
    return None if a is None else not a


def _combine(op: Callable[[Truth, Truth], Truth], a: TruthSet, b: TruthSet) -> TruthSet:
    return frozenset(op(x, y) for x, y in product(a, b))


def _may_lt(a: object, b: object) -> bool:
    """Could some value <= bound a be < some value >= bound b? None bounds are unbounded."""
    return a is None or b is None or a < b  # type: ignore[operator]


def _may_le(a: object, b: object) -> bool:
    return a is None or b is None or a <= b  # type: ignore[operator]


def _order(op: type[exp.Expr], a: Range, b: Range) -> set[Truth]:
    out: set[Truth] = set()
    if op is exp.LT:
        if _may_lt(a.lo, b.hi):
            out.add(True)
        if _may_le(b.lo, a.hi):
            out.add(False)
    elif op is exp.LTE:
        if _may_le(a.lo, b.hi):
            out.add(True)
        if _may_lt(b.lo, a.hi):
            out.add(False)
    elif op is exp.GT:
        return _order(exp.LT, b, a)
    elif op is exp.GTE:
        return _order(exp.LTE, b, a)
    else:
        overlap = _may_le(a.lo, b.hi) and _may_le(b.lo, a.hi)
        same_point = a.is_point and b.is_point and a.lo == b.lo
        eq: set[Truth] = {True} if overlap else set()
        if not same_point:
            eq.add(False)
        out = eq if op is exp.EQ else {not3(x) for x in eq}
    return out


def _like_parts(pattern: str) -> tuple[str, str | None]:
    """Literal prefix of a LIKE pattern (Spark's default escape is backslash) and the rest."""
    prefix: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if ch in "%_":
            return "".join(prefix), pattern[i:]
        prefix.append(ch)
        i += 1
    return "".join(prefix), None


def like_matches(value: str, pattern: str) -> bool:
    """Exact SQL LIKE (``%`` any run, ``_`` one character, backslash escapes the next one)."""
    regex: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            regex.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        regex.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
        i += 1
    return re.fullmatch("".join(regex), value, flags=re.DOTALL) is not None


_IN_POINTS_KEY = "dvengine.in_points"


class Interpreter:
    """Evaluates bound trees to truth sets, given what each column may hold."""

    def __init__(self, columns: ColumnRanges) -> None:
        self._columns = columns

    # --- boolean nodes ---------------------------------------------------------------------

    def truth(self, node: exp.Expr) -> TruthSet:
        result = self._truth(node)
        if isinstance(node, (exp.Like, exp.In, exp.Between, exp.Is)) and node.args.get("negate"):
            result = frozenset(not3(t) for t in result)
        return result

    def _truth(self, node: exp.Expr) -> TruthSet:
        if isinstance(node, exp.Paren):
            return self.truth(node.this)
        if isinstance(node, exp.And):
            return _combine(and3, self.truth(node.this), self.truth(node.expression))
        if isinstance(node, exp.Or):
            return _combine(or3, self.truth(node.this), self.truth(node.expression))
        if isinstance(node, exp.Not):
            return frozenset(not3(t) for t in self.truth(node.this))
        if isinstance(node, (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)):
            return self.compare(type(node), self.value(node.this), self.value(node.expression))
        if isinstance(node, exp.In):
            return self._in(node)
        if isinstance(node, exp.Between):
            if node.args.get("symmetric"):
                return ALL
            subject = self.value(node.this)
            low = self.compare(exp.GTE, subject, self.value(node.args["low"]))
            high = self.compare(exp.LTE, subject, self.value(node.args["high"]))
            return _combine(and3, low, high)
        if isinstance(node, exp.NullSafeEQ):
            return self._null_safe_eq(node)
        if isinstance(node, exp.Is):
            return self._is(node)
        if isinstance(node, exp.Like):
            return self._like(node)
        return self._boolean_value(node)

    def _in(self, node: exp.In) -> TruthSet:
        if node.args.get("query") is not None or not node.expressions:
            return ALL
        subject = self.value(node.this)
        fast = self._in_of_points(node, subject)
        if fast is not None:
            return fast
        result: TruthSet = frozenset({False})
        for item in node.expressions:
            result = _combine(or3, result, self.compare(exp.EQ, subject, self.value(item)))
        return result

    def _in_of_points(self, node: exp.In, subject: Operand) -> TruthSet | None:
        """``x IN (literals)`` for a column range in O(log n): the same truth set the item-by-item
        loop computes, from the sorted literal values (MERGE key lists hold up to 1000 of them and
        are evaluated once per candidate file). None when a literal is not a plain point of the
        subject's domain; the general loop then decides."""
        if not isinstance(subject, Range):
            return None
        if subject.kind == Kind.UNKNOWN and subject.may_null and subject.may_value:
            return ALL  # nothing known about the column (e.g. not a partition column): any outcome
        if subject.lo is None or subject.hi is None:
            return None
        # cached on the node itself (its lifetime is the bound predicate's): a plan evaluates the
        # same IN list for every candidate file
        cache: dict[tuple[Kind, bool], tuple[list[Any], bool]] = node.meta.setdefault(_IN_POINTS_KEY, {})
        key = (subject.kind, subject.integral)
        cached = cache.get(key)
        if cached is None:
            cached = in_list_points(node, subject)
            if cached is None:
                return None
            cache[key] = cached
        values, has_null = cached
        out: set[Truth] = {None} if (subject.may_null or has_null) else set()
        if not subject.may_value:
            return frozenset(out or {None})
        inside = bisect.bisect_left(values, subject.lo) < bisect.bisect_right(values, subject.hi)
        if inside:
            out.add(True)
        exact_hit = subject.is_point and inside
        if not exact_hit:
            out.add(False if not has_null else None)
        return frozenset(out)

    def _null_safe_eq(self, node: exp.NullSafeEQ) -> TruthSet:
        a, b = self.value(node.this), self.value(node.expression)
        na, nb = self._nullness(a), self._nullness(b)
        out: set[Truth] = set()
        if na[0] and nb[0]:
            out.add(True)
        if (na[0] and nb[1]) or (na[1] and nb[0]):
            out.add(False)
        if na[1] and nb[1]:
            out |= {t for t in self.compare(exp.EQ, a, b) if t is not None}
        return frozenset(out)

    def _is(self, node: exp.Is) -> TruthSet:
        target = node.expression
        if isinstance(target, exp.Null):
            may_null, may_value = self._nullness(self.value(node.this))
            return frozenset(({True} if may_null else set()) | ({False} if may_value else set()))
        if isinstance(target, exp.Boolean):
            inner = self.truth(node.this)
            wanted = bool(target.this)
            out: set[Truth] = set()
            if wanted in inner:
                out.add(True)
            if (not wanted) in inner or None in inner:
                out.add(False)
            return frozenset(out)
        return ALL

    def _like(self, node: exp.Like) -> TruthSet:
        subject = self.value(node.this)
        pattern = literal_of(node.expression)
        may_null, may_value = self._nullness(subject)
        if pattern is not None and pattern.value is None:
            return frozenset({None})
        out: set[Truth] = {None} if may_null else set()
        if not may_value:
            return frozenset(out)
        if not isinstance(subject, Range) or subject.kind != Kind.STRING or pattern is None:
            return frozenset(out | {True, False})
        if pattern.kind != Kind.STRING or not isinstance(pattern.value, str):
            return frozenset(out | {True, False})
        if subject.is_point and isinstance(subject.lo, str):
            return frozenset(out | {like_matches(subject.lo, pattern.value)})
        prefix, rest = _like_parts(pattern.value)
        if rest is None:
            return frozenset(out | (set(self.compare(exp.EQ, subject, point(Kind.STRING, prefix))) - {None}))
        n = len(prefix)
        lo, hi = subject.lo, subject.hi
        if (hi is None or hi >= prefix) and (lo is None or lo[:n] <= prefix):
            out.add(True)
        all_prefixed = lo is not None and hi is not None and lo[:n] == prefix and hi[:n] == prefix
        if not (all_prefixed and rest.strip("%") == ""):
            out.add(False)
        return frozenset(out)

    def _boolean_value(self, node: exp.Expr) -> TruthSet:
        """A boolean-valued column, literal or unknown expression used as a condition."""
        value = self.value(node)
        if isinstance(value, Lit):
            if value.value is None:
                return frozenset({None})
            return frozenset({value.value}) if isinstance(value.value, bool) else ALL
        if value.kind == Kind.NULL or not value.may_value:
            return frozenset({None}) if value.may_null else frozenset()
        if value.kind != Kind.BOOLEAN:
            return ALL
        out: set[Truth] = {None} if value.may_null else set()
        for candidate in (False, True):
            if _may_le(value.lo, candidate) and _may_le(candidate, value.hi):
                out.add(candidate)
        return frozenset(out)

    # --- comparisons -------------------------------------------------------------------------

    @staticmethod
    def _nullness(value: Operand) -> tuple[bool, bool]:
        if isinstance(value, Lit):
            return value.value is None, value.value is not None
        return value.may_null, value.may_value

    def compare(self, op: type[exp.Expr], a: Operand, b: Operand) -> TruthSet:
        na, nb = self._nullness(a), self._nullness(b)
        out: set[Truth] = {None} if (na[0] or nb[0]) else set()
        if not (na[1] and nb[1]):
            return frozenset(out)
        aligned = self._align(a, b)
        if aligned is None:
            return frozenset(out | {True, False})
        return frozenset(out | _order(op, *aligned))

    @staticmethod
    def _align(a: Operand, b: Operand) -> tuple[Range, Range] | None:
        """Both operands as ranges in one comparable domain, or None if unsure how Spark compares."""
        if isinstance(a, Lit) and isinstance(b, Lit):
            ra, rb = literal_range(a), literal_range(b)
        elif isinstance(a, Lit):
            assert isinstance(b, Range)
            ra, rb = coerce_literal(a, b), b
        elif isinstance(b, Lit):
            ra, rb = a, coerce_literal(b, a)
        else:
            ra, rb = a, b
        if ra is None or rb is None or ra.kind != rb.kind or ra.kind in (Kind.UNKNOWN, Kind.COMPLEX, Kind.BINARY):
            return None
        return ra, rb

    # --- values -------------------------------------------------------------------------------

    def value(self, node: exp.Expr) -> Operand:
        ref = ref_of(node)
        if ref is not None:
            return self._columns(ref)
        if isinstance(node, exp.Paren):
            return self.value(node.this)
        lit = literal_of(node)
        if lit is not None:
            return lit
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            return self._arithmetic(node)
        return TOP

    def _arithmetic(self, node: exp.Expr) -> Operand:
        """Exact arithmetic on two known numbers (partition values); anything else is unknown."""
        a, b = self.value(node.this), self.value(node.expression)
        if self._nullness(a) == (True, False) or self._nullness(b) == (True, False):
            return NULL_ONLY
        xa, xb = _number(a), _number(b)
        if xa is None or xb is None:
            return TOP
        result = _apply(node, xa, xb)
        if isinstance(result, int) and abs(result) >= _INT32:
            return TOP  # Spark integer arithmetic may overflow (wrap or fail) below 64 bits
        if isinstance(result, decimal.Decimal) and len(result.as_tuple().digits) > 30:
            return TOP
        return point(Kind.NUMERIC, result)


def _apply(node: exp.Expr, xa: Any, xb: Any) -> Any:
    if isinstance(xa, float) or isinstance(xb, float):
        xa, xb = float(xa), float(xb)
    if isinstance(node, exp.Add):
        return xa + xb
    if isinstance(node, exp.Sub):
        return xa - xb
    return xa * xb


def _number(value: Operand) -> int | float | decimal.Decimal | None:
    if isinstance(value, Lit):
        v = value.value if value.kind == Kind.NUMERIC else None
    else:
        v = value.lo if value.kind == Kind.NUMERIC and value.is_point and not value.may_null else None
    if isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
        return v
    return None


def in_list_points(node: exp.In, subject: Range) -> tuple[list[Any], bool] | None:
    """The IN list as sorted points of ``subject``'s kind, and whether it holds NULL; None when
    some item is not such a point (then nothing is skipped). One definition for the per-file
    interpreter and the vectorized pass (``vector_skipping``), so their verdicts agree."""
    values: list[Any] = []
    has_null = False
    for item in node.expressions:
        lit = literal_of(item)
        if lit is None:
            return None
        if lit.value is None:
            has_null = True
            continue
        coerced = coerce_literal(lit, subject)
        if coerced is None or not coerced.is_point or coerced.kind != subject.kind:
            return None
        values.append(coerced.lo)
    try:
        values.sort()
    except TypeError:
        return None
    return values, has_null
