"""Best-effort type inference over a bound tree, to reject obvious type errors early.

Spark would reject (or, worse, silently null out) ``id = 'abc'`` or ``name * 2`` only when the
job runs, after files have been listed and maybe read. Catching them while binding gives the
user a precise message before any work. The checker is deliberately lenient where Spark's
coercion rules are subtle: anything it cannot type is UNKNOWN and accepted.
"""

from __future__ import annotations

from sqlglot import exp

from dvengine.errors import InvalidPredicateError
from dvengine.expressions.kinds import Kind, is_temporal, kind_of
from dvengine.expressions.literals import (
    kind_of_sqlglot_type,
    literal_of,
    looks_like_date_or_timestamp,
    parse_number_text,
)
from dvengine.expressions.refs import ref_of

_BOOL_STRINGS = frozenset({"true", "false", "t", "f", "yes", "no", "y", "n", "1", "0"})
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_STRING_FUNCS = (exp.Upper, exp.Lower, exp.Substring, exp.Concat, exp.Trim, exp.DPipe, exp.Initcap)
_BOOLEAN_NODES = (exp.Like, exp.ILike, exp.RegexpLike, exp.Escape, exp.Is, exp.In, exp.Between)
_LENIENT = (Kind.NULL, Kind.UNKNOWN)


def _show(node: exp.Expr) -> str:
    return str(node.sql(dialect="spark", comments=False))


class TypeChecker:
    """Infers the Kind of each node of one bound expression; raises on obvious mistakes."""

    def __init__(self, text: str) -> None:
        self._text = text

    def _error(self, reason: str) -> InvalidPredicateError:
        return InvalidPredicateError(f"invalid expression {self._text!r}: {reason}")

    def infer(self, node: exp.Expr) -> Kind:
        ref = ref_of(node)
        if ref is not None:
            return kind_of(ref.leaf.type)
        if isinstance(node, exp.Column):
            return Kind.UNKNOWN  # a lambda variable
        if isinstance(node, exp.Paren):
            return self.infer(node.this)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self._cast(node)
        lit = literal_of(node)
        if lit is not None:
            return lit.kind
        if isinstance(node, (exp.And, exp.Or, exp.Xor)):
            for side in (node.this, node.expression):
                self.require_boolean(side, f"an operand of {node.key.upper()}")
            return Kind.BOOLEAN
        if isinstance(node, exp.Not):
            self.require_boolean(node.this, "the operand of NOT")
            return Kind.BOOLEAN
        if isinstance(node, _COMPARISONS):
            self.check_comparable(node.this, node.expression)
            return Kind.BOOLEAN
        if isinstance(node, exp.In):
            for value in node.expressions:
                self.check_comparable(node.this, value)
            self._check_in_list_types(node)
            return Kind.BOOLEAN
        if isinstance(node, exp.Between):
            self.check_comparable(node.this, node.args["low"])
            self.check_comparable(node.this, node.args["high"])
            return Kind.BOOLEAN
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
            self.require_boolean(node.this, "the operand of IS TRUE/FALSE")
            return Kind.BOOLEAN
        if isinstance(node, _BOOLEAN_NODES):
            self._children(node)
            return Kind.BOOLEAN
        if isinstance(node, _ARITHMETIC):
            return self._arithmetic(node)
        if isinstance(node, exp.Neg):
            kind = self.infer(node.this)
            if kind not in (Kind.NUMERIC, *_LENIENT):
                raise self._error(f"cannot negate {_show(node.this)}, which is {kind.value}, not numeric")
            return kind
        if isinstance(node, _STRING_FUNCS):
            self._children(node)
            return Kind.STRING
        if isinstance(node, exp.Length):
            self._children(node)
            return Kind.NUMERIC
        if isinstance(node, (exp.Abs, exp.Coalesce)):
            kinds = self._children(node)
            known = [k for k in kinds if k != Kind.NULL]
            return known[0] if known else Kind.NULL
        self._children(node)
        return Kind.UNKNOWN

    def _children(self, node: exp.Expr) -> list[Kind]:
        kinds: list[Kind] = []
        for child in node.iter_expressions():
            if isinstance(child, (exp.DataType, exp.Identifier, exp.Var)):
                continue
            kinds.append(self.infer(child))
        return kinds

    def _cast(self, node: exp.Expr) -> Kind:
        to = node.args.get("to")
        target = kind_of_sqlglot_type(to) if isinstance(to, exp.DataType) else Kind.UNKNOWN
        inner = literal_of(node.this)
        if (
            inner is not None
            and inner.kind == Kind.STRING
            and literal_of(node) is None
            and target
            in (
                Kind.NUMERIC,
                Kind.DATE,
                Kind.TIMESTAMP,
                Kind.TIMESTAMP_NTZ,
            )
        ):
            if target != Kind.NUMERIC and looks_like_date_or_timestamp(str(inner.value)):
                return target  # a spelling Spark accepts but we do not parse; let Spark read it
            raise self._error(f"{_show(node.this)} is not a valid {target.value} literal")
        self.infer(node.this)
        return target

    def _arithmetic(self, node: exp.Expr) -> Kind:
        left, right = self.infer(node.this), self.infer(node.expression)
        for side, kind in ((node.this, left), (node.expression, right)):
            if kind in (Kind.STRING, Kind.BOOLEAN, Kind.BINARY, Kind.COMPLEX):
                raise self._error(
                    f"arithmetic on {kind.value} is not allowed: {_show(side)} in {_show(node)}; "
                    "cast it explicitly if you mean a number"
                )
        if isinstance(node, (exp.Add, exp.Sub)) and Kind.DATE in (left, right):
            return Kind.DATE
        if is_temporal(left) or is_temporal(right):
            return Kind.UNKNOWN
        return Kind.NUMERIC

    def _check_in_list_types(self, node: exp.In) -> None:
        """Spark types ``x IN (a, b, ...)`` by one common type for ``x`` and every item, so items
        that compare with ``x`` one by one can still clash with each other: with a string column
        ``str IN (true, 1e3)`` has no common type (boolean and numeric) and Spark's analyzer rejects
        it. Strings adapt to the other side and NULLs to anything; two other kinds must agree
        (dates and timestamps agree with each other)."""
        firm: list[tuple[exp.Expr, Kind]] = []
        for item in (node.this, *node.expressions):
            kind = self.infer(item)
            if kind not in (*_LENIENT, Kind.STRING):
                firm.append((item, kind))
        for item, kind in firm[1:]:
            first, first_kind = firm[0]
            if kind != first_kind and not (is_temporal(kind) and is_temporal(first_kind)):
                raise self._error(
                    f"the items of {_show(node)} have no common type: {_show(first)} is {first_kind.value}, "
                    f"{_show(item)} is {kind.value}; cast them to one type"
                )

    def require_boolean(self, node: exp.Expr, role: str) -> None:
        kind = self.infer(node)
        if kind not in (Kind.BOOLEAN, *_LENIENT):
            raise self._error(f"{role} must be boolean, but {_show(node)} is {kind.value}")

    def check_comparable(self, left: exp.Expr, right: exp.Expr) -> None:
        kinds = (self.infer(left), self.infer(right))
        if kinds[0] in _LENIENT or kinds[1] in _LENIENT:
            return
        for mine, other, kind_mine in ((left, right, kinds[0]), (right, left, kinds[1])):
            lit = literal_of(other)
            if lit is not None and lit.kind == Kind.STRING and isinstance(lit.value, str):
                self._check_string_literal(mine, kind_mine, lit.value)
                return
        a, b = kinds
        if a == b:
            return
        if is_temporal(a) and is_temporal(b):
            return
        if Kind.STRING in (a, b) and Kind.COMPLEX not in (a, b):
            return  # Spark casts the string side
        raise self._error(
            f"cannot compare {_show(left)} ({a.value}) with {_show(right)} ({b.value}); cast one side explicitly"
        )

    def _check_string_literal(self, node: exp.Expr, kind: Kind, text: str) -> None:
        where = _show(node)
        if kind == Kind.NUMERIC and parse_number_text(text) is None:
            raise self._error(f"{where} is numeric but {text!r} is not a number")
        if is_temporal(kind) and not looks_like_date_or_timestamp(text):
            raise self._error(f"{where} is a {kind.value} but {text!r} is not a date/timestamp (use 'yyyy-mm-dd')")
        if kind == Kind.BOOLEAN and text.strip().lower() not in _BOOL_STRINGS:
            raise self._error(f"{where} is boolean but {text!r} is not 'true' or 'false'")
        if kind == Kind.COMPLEX:
            raise self._error(f"cannot compare {where} (a struct/array/map) with the string {text!r}")
