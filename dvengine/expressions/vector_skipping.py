"""Stats skipping for many files at once: the interpreter's truth sets as boolean columns.

The per-file path (:func:`dvengine.expressions.skipping.stats_might_match`) walks the predicate
tree once per file; on a table that gains a file per UPDATE that walk dominated planning. Here
the per-file facts (each column's :class:`Range`, computed once per file by the same
:func:`file_column_range` the per-file path uses) sit in columns, and the predicate tree is walked
once for all files: every boolean node yields three boolean arrays, "may be TRUE / FALSE / NULL"
per file, which is exactly the per-file truth set (a subset of {TRUE, FALSE, NULL}) stored
column-wise. AND / OR / NOT combine them as the interpreter's cross product does (an empty set
stays empty), and ``col op literal`` / ``IN`` / ``IS [NOT] NULL`` compare the min/max columns with
pyarrow.compute, following :func:`dvengine.expressions.interpret._order` rule by rule.

Anything else (functions, LIKE, column-to-column comparisons, bounds that do not form one Arrow
type such as Decimal or mixed int/float stats) is evaluated per file by the interpreter itself,
for that node and those files only, so the answer is the per-file answer by construction.
"""

from __future__ import annotations

import bisect
import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dvengine.expressions.bind import BoundPredicate
from dvengine.expressions.interpret import Interpreter, Truth, in_list_points
from dvengine.expressions.kinds import Kind
from dvengine.expressions.literals import Lit, literal_of
from dvengine.expressions.ranges import Range, coerce_literal
from dvengine.expressions.refs import ColumnRef, ref_of

Mask = npt.NDArray[np.bool_]
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)
_MIRROR: dict[type[exp.Expr], type[exp.Expr]] = {
    exp.EQ: exp.EQ, exp.NEQ: exp.NEQ, exp.LT: exp.GT, exp.LTE: exp.GTE, exp.GT: exp.LT, exp.GTE: exp.LTE,
}
_MAX_EXACT_FLOAT_INT = 2**53
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Python types of bounds whose order Arrow reproduces exactly (strings: UTF-8 byte order equals
# code-point order; timestamps are integer microseconds by then)
_ARROW_TYPES: dict[type, pa.DataType] = {
    int: pa.int64(), float: pa.float64(), str: pa.string(), dt.date: pa.date32(), bool: pa.bool_(),
}


@dataclass(slots=True)
class TruthVec:
    """Per file: may the node be TRUE, FALSE, NULL on some row (the truth set, column-wise)."""

    t: Mask
    f: Mask
    n: Mask

    def take(self, other: TruthVec, where: Mask) -> None:
        """Overwrite the files selected by ``where`` with ``other``'s answers."""
        self.t = np.where(where, other.t, self.t)
        self.f = np.where(where, other.f, self.f)
        self.n = np.where(where, other.n, self.n)


def _full(size: int, value: bool) -> Mask:
    return np.full(size, value, dtype=np.bool_)


def _all(size: int) -> TruthVec:
    return TruthVec(_full(size, True), _full(size, True), _full(size, True))


def _and(a: TruthVec, b: TruthVec) -> TruthVec:
    a_any, b_any = a.t | a.f | a.n, b.t | b.f | b.n
    return TruthVec(a.t & b.t, (a.f & b_any) | (b.f & a_any), (a.n & (b.t | b.n)) | (b.n & (a.t | a.n)))


def _or(a: TruthVec, b: TruthVec) -> TruthVec:
    a_any, b_any = a.t | a.f | a.n, b.t | b.f | b.n
    return TruthVec((a.t & b_any) | (b.t & a_any), a.f & b.f, (a.n & (b.f | b.n)) | (b.n & (a.f | a.n)))


def _not(a: TruthVec) -> TruthVec:
    return TruthVec(a.f, a.t, a.n)


@dataclass
class ColumnVec:
    """The Ranges one column reference may take in each file, with Arrow bounds per domain."""

    ranges: Sequence[Range]
    may_null: Mask = field(init=False)
    may_value: Mask = field(init=False)
    groups: dict[tuple[Kind, bool], Mask] = field(init=False)
    _bounds: dict[tuple[Kind, bool], tuple[pa.Array, pa.Array, type] | None] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.may_null = np.fromiter((r.may_null for r in self.ranges), dtype=np.bool_, count=len(self.ranges))
        self.may_value = np.fromiter((r.may_value for r in self.ranges), dtype=np.bool_, count=len(self.ranges))
        keys = [(r.kind, r.integral) for r in self.ranges]
        self.groups = {}
        for key in dict.fromkeys(keys):
            self.groups[key] = np.fromiter((k == key for k in keys), dtype=np.bool_, count=len(keys))

    def bounds(self, key: tuple[Kind, bool]) -> tuple[pa.Array, pa.Array, type] | None:
        """(lo, hi, Python type) as Arrow arrays over ALL files (nulls: unbounded), for the files
        of one (kind, integral) group; None when their bounds are not all of one exact Arrow type."""
        if key in self._bounds:
            return self._bounds[key]
        member = self.groups[key]
        los = [r.lo if m else None for r, m in zip(self.ranges, member, strict=True)]
        his = [r.hi if m else None for r, m in zip(self.ranges, member, strict=True)]
        kinds = {type(v) for v in (*los, *his) if v is not None}
        result: tuple[pa.Array, pa.Array, type] | None = None
        if len(kinds) <= 1:
            py = next(iter(kinds), int)
            arrow_type = _ARROW_TYPES.get(py)
            if arrow_type is not None:
                try:
                    result = (pa.array(los, arrow_type), pa.array(his, arrow_type), py)
                except (OverflowError, pa.ArrowException, UnicodeError):
                    result = None
        self._bounds[key] = result
        return result


def _scalar_for(value: Any, py: type) -> Any:
    """``value`` in the Arrow domain of bounds of Python type ``py`` when that comparison is
    exact (None: compare per file instead). Python compares int with float exactly, so an int
    goes to a float column only when the double holds it exactly."""
    if value is None:
        return None
    if type(value) is decimal.Decimal and value.is_finite():
        if py is int and value == value.to_integral_value():
            value = int(value)
        elif py is float and decimal.Decimal(float(value)) == value:
            value = float(value)
    if py is float and type(value) is int and abs(value) <= _MAX_EXACT_FLOAT_INT:
        value = float(value)
    if type(value) is not py:
        raise _NotVectorizable
    if isinstance(value, int) and not _INT64_MIN <= value <= _INT64_MAX:
        raise _NotVectorizable
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeError:
            raise _NotVectorizable from None
    return value


class _NotVectorizable(Exception):
    """A literal whose comparison with these bounds is not exactly Arrow's: go per file."""


Bound = Any  # an Arrow column of per-file bounds, or one literal bound (None: unbounded)


def _cmp(fn: Callable[[Any, Any], Any], a: Bound, b: Bound, size: int, if_unbounded: bool) -> Mask:
    if a is None or b is None:
        return _full(size, if_unbounded)
    result = fn(a, b)
    if not isinstance(result, pa.Array):
        return _full(size, bool(result.as_py()) if result.is_valid else if_unbounded)
    return np.asarray(result.fill_null(if_unbounded).to_numpy(zero_copy_only=False), dtype=np.bool_)


def _may_lt(a: Bound, b: Bound, size: int) -> Mask:
    return _cmp(pc.less, a, b, size, True)


def _may_le(a: Bound, b: Bound, size: int) -> Mask:
    return _cmp(pc.less_equal, a, b, size, True)


@dataclass(slots=True)
class _Side:
    lo: Bound
    hi: Bound
    is_point: Mask


def _order(op: type[exp.Expr], a: _Side, b: _Side, size: int) -> tuple[Mask, Mask]:
    """(may be TRUE, may be FALSE) of ``a op b``: ``interpret._order`` on columns."""
    if op is exp.LT:
        return _may_lt(a.lo, b.hi, size), _may_le(b.lo, a.hi, size)
    if op is exp.LTE:
        return _may_le(a.lo, b.hi, size), _may_lt(b.lo, a.hi, size)
    if op is exp.GT:
        return _order(exp.LT, b, a, size)
    if op is exp.GTE:
        return _order(exp.LTE, b, a, size)
    overlap = _may_le(a.lo, b.hi, size) & _may_le(b.lo, a.hi, size)
    same_point = a.is_point & b.is_point & _cmp(pc.equal, a.lo, b.lo, size, False)
    return (overlap, ~same_point) if op is exp.EQ else (~same_point, overlap)


def _file_side(lo: pa.Array, hi: pa.Array, may_value: Mask) -> _Side:
    equal = np.asarray(pc.equal(lo, hi).fill_null(False).to_numpy(zero_copy_only=False), dtype=np.bool_)
    return _Side(lo, hi, may_value & equal)


def _literal_side(rng: Range, py: type, size: int) -> _Side:
    return _Side(_scalar_for(rng.lo, py), _scalar_for(rng.hi, py), _full(size, rng.is_point))


def _operand(node: exp.Expr) -> ColumnRef | Lit | None:
    """What :meth:`Interpreter.value` would see at ``node``: a column, a literal, or neither."""
    while True:
        ref = ref_of(node)
        if ref is not None:
            return ref
        if not isinstance(node, exp.Paren):
            break
        node = node.this
    return literal_of(node)


class VectorInterpreter:
    """Evaluates a bound tree for ``size`` files at once; ``column(ref)`` gives their Ranges."""

    def __init__(self, column: Callable[[ColumnRef], ColumnVec], size: int) -> None:
        self._column = column
        self._size = size

    def might_match(self, pred: BoundPredicate) -> Mask:
        """Per file: could some row satisfy ``pred`` (TRUE in its truth set)?"""
        return self.truth(pred.tree).t

    def truth(self, node: exp.Expr) -> TruthVec:
        if isinstance(node, exp.Paren):
            return self.truth(node.this)
        if isinstance(node, exp.And):
            return _and(self.truth(node.this), self.truth(node.expression))
        if isinstance(node, exp.Or):
            return _or(self.truth(node.this), self.truth(node.expression))
        if isinstance(node, exp.Not):
            return _not(self.truth(node.this))
        result: TruthVec | None = None
        if isinstance(node, _COMPARISONS):
            result = self._compare(node)
        elif isinstance(node, exp.In):
            result = self._in(node)
        elif isinstance(node, exp.Is):
            result = self._is(node)
        if result is None:
            return self._per_file(node, _full(self._size, True))
        if isinstance(node, (exp.In, exp.Is)) and node.args.get("negate"):
            result = _not(result)
        return result

    # --- per file: the interpreter itself, for the files where no column rule applies -------

    def _per_file(self, node: exp.Expr, where: Mask, into: TruthVec | None = None) -> TruthVec:
        """Interpreter.truth(node) (negation included) for the files in ``where``."""
        out = into if into is not None else TruthVec(*(_full(self._size, False) for _ in range(3)))
        cache: dict[int, ColumnVec] = {}

        def vec(ref: ColumnRef) -> ColumnVec:
            found = cache.get(id(ref))
            if found is None:
                found = cache[id(ref)] = self._column(ref)
            return found

        def at(index: int) -> Callable[[ColumnRef], Range]:
            return lambda ref: vec(ref).ranges[index]

        for i in np.flatnonzero(where):
            index = int(i)
            truth = Interpreter(at(index)).truth(node)
            out.t[index], out.f[index], out.n[index] = True in truth, False in truth, None in truth
        return out

    # --- col op literal --------------------------------------------------------------------

    def _compare(self, node: exp.Expr) -> TruthVec | None:
        left, right = _operand(node.this), _operand(node.expression)
        op = type(node)
        if isinstance(left, ColumnRef) and isinstance(right, Lit):
            ref, lit = left, right
        elif isinstance(left, Lit) and isinstance(right, ColumnRef):
            ref, lit, op = right, left, _MIRROR[op]  # lit op col == col mirror(op) lit
        else:
            return None
        col = self._column(ref)
        size = self._size
        null_lit = lit.value is None
        out = TruthVec(_full(size, False), _full(size, False), col.may_null | null_lit)
        if null_lit:
            return out
        proceed = col.may_value
        pending = _full(size, False)  # files of groups whose bounds need the per-file path
        for key, member in col.groups.items():
            rows = member & proceed
            if not rows.any():
                continue
            kind, integral = key
            coerced = coerce_literal(lit, Range(kind, integral=integral))
            if coerced is None or coerced.kind != kind or kind in (Kind.UNKNOWN, Kind.COMPLEX, Kind.BINARY):
                out.t |= rows
                out.f |= rows
                continue
            bounds = col.bounds(key)
            if bounds is None:
                pending |= rows
                continue
            lo, hi, py = bounds
            try:
                lit_side = _literal_side(coerced, py, size)
            except _NotVectorizable:
                pending |= rows
                continue
            t, f = _order(op, _file_side(lo, hi, col.may_value), lit_side, size)
            out.t |= rows & t
            out.f |= rows & f
        if pending.any():
            self._per_file(node, pending, into=out)
        return out

    # --- IN ----------------------------------------------------------------------------------

    def _in(self, node: exp.In) -> TruthVec | None:
        """``col IN (literals)``: the interpreter's O(log n) point rule, file by file's bounds.

        Returned before negation. Files the rule does not cover (unbounded ranges, literals that
        are not points of the column's domain) go through the interpreter, which negates itself:
        their answer is stored pre-negated so the caller's negation restores it."""
        if node.args.get("query") is not None or not node.expressions:
            return _all(self._size)
        subject = _operand(node.this)
        if not isinstance(subject, ColumnRef):
            return None
        col = self._column(subject)
        size = self._size
        out = TruthVec(_full(size, False), _full(size, False), _full(size, False))
        pending = _full(size, False)
        for key, member in col.groups.items():
            kind, integral = key
            if kind == Kind.UNKNOWN:
                every = member & col.may_null & col.may_value
                out.t |= every
                out.f |= every
                out.n |= every
                member = member & ~every
            bounded = np.fromiter(
                (m and r.lo is not None and r.hi is not None for r, m in zip(col.ranges, member, strict=True)),
                dtype=np.bool_, count=size,
            )
            pending |= member & ~bounded
            if not bounded.any():
                continue
            points = _in_points(node, kind, integral)
            if points is None:
                pending |= bounded
                continue
            values, has_null = points
            inside = np.fromiter(
                (bool(b) and bisect.bisect_left(values, r.lo) < bisect.bisect_right(values, r.hi)
                 for r, b in zip(col.ranges, bounded, strict=True)),
                dtype=np.bool_, count=size,
            )
            may_value = col.may_value & bounded
            is_point = np.fromiter(
                (bool(b) and r.is_point for r, b in zip(col.ranges, bounded, strict=True)), dtype=np.bool_, count=size
            )
            exact_hit = is_point & inside
            out.n |= bounded & (col.may_null | has_null | ~col.may_value)
            out.t |= may_value & inside
            if has_null:
                out.n |= may_value & ~exact_hit
            else:
                out.f |= may_value & ~exact_hit
        if pending.any():
            per_file = self._per_file(node, pending)
            if node.args.get("negate"):
                per_file = _not(per_file)
            out.take(per_file, pending)
        return out

    # --- IS [NOT] NULL / IS [NOT] TRUE|FALSE ---------------------------------------------------

    def _is(self, node: exp.Is) -> TruthVec | None:
        """Returned before negation, as :meth:`Interpreter._is`."""
        target = node.expression
        size = self._size
        if isinstance(target, exp.Null):
            subject = _operand(node.this)
            if isinstance(subject, ColumnRef):
                col = self._column(subject)
                return TruthVec(col.may_null.copy(), col.may_value.copy(), _full(size, False))
            if isinstance(subject, Lit):
                return TruthVec(_full(size, subject.value is None), _full(size, subject.value is not None),
                                _full(size, False))
            return None
        if isinstance(target, exp.Boolean):
            inner = self.truth(node.this)
            wanted = bool(target.this)
            hit, miss = (inner.t, inner.f) if wanted else (inner.f, inner.t)
            return TruthVec(hit.copy(), miss | inner.n, _full(size, False))
        return _all(size)


def _in_points(node: exp.In, kind: Kind, integral: bool) -> tuple[list[Any], bool] | None:
    """The IN list as sorted points of ``kind`` (and whether it holds NULL), or None when some
    item is not such a point: the interpreter's own list (``in_list_points``), so the verdicts agree."""
    return in_list_points(node, Range(kind, integral=integral))

def truth_sets(vec: TruthVec) -> list[frozenset[Truth]]:
    """The per-file truth sets (for tests comparing with the interpreter)."""
    return [
        frozenset(v for v, present in ((True, t), (False, f), (None, n)) if present)
        for t, f, n in zip(vec.t, vec.f, vec.n, strict=True)
    ]
