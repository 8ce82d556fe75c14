"""Spark's floating-point math in Arrow: ``round`` / ``bround`` of FLOAT and DOUBLE, ``greatest`` /
``least`` with Spark's NaN ordering, ``ln`` / ``log`` / ``log2`` / ``log10`` / ``exp`` as Java's
StrictMath computes them (``arrow_fdlibm``). ``pow`` is not evaluated (fdlibm's ``e_pow.c`` is not
ported; the C library's differs in the last place on ~10 % of inputs).

Rounding. Spark rounds a DOUBLE ``d`` as ``BigDecimal(Double.toString(d)).setScale(s, mode)
.toDouble``: through its shortest decimal text, so ``round(1.005, 2)`` is 1.01 where Arrow's
binary ``round`` gives 1.0 (1.005 is 1.00499999999999989... in binary), and ``round(-0.4)`` is
``0.0`` (a BigDecimal has no negative zero). A FLOAT is widened to DOUBLE first (``0.125f`` ->
0.125 -> 0.13 -> 0.13f). Arrow's kernel rounds the binary value, so it is not used. Here every row
is first rounded in binary (numpy, ``x * 10**s``); rows whose scaled value is within the binary
error bound of a .5 tie (or beyond 2**52, where binary has no fraction digits) are redone exactly
with Python's ``decimal`` from ``repr(x)`` (the shortest text, as Java 19+'s ``Double.toString``;
Java 17's may carry one more digit for rare values). A million uniform doubles: a handful of rows
take the exact path.

NaN ordering. Spark orders NaN above every number (``greatest(1, NaN)`` is NaN, ``least`` skips
it) and keeps the first of equal values (``greatest(-0.0, 0.0)`` is -0.0); Arrow's element-wise
max ignores NaN, so ``greatest`` / ``least`` of floating point is a fold of NaN-aware comparisons.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dvengine.expressions import arrow_fdlibm as fdlibm
from dvengine.expressions.arrow_types import Val
from dvengine.expressions.arrow_udfs import call_udf, valid, values

_EXACT = decimal.Context(prec=800, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_MODES = {"half_up": decimal.ROUND_HALF_UP, "half_even": decimal.ROUND_HALF_EVEN}
# |binary x * 10**s - decimal(repr(x)) * 10**s| <= 2.3e-16 |x * 10**s|: twice that is "near a tie"
_TIE_MARGIN = 4.5e-16


def round_doubles(x: np.ndarray[Any, Any], digits: int, mode: str) -> np.ndarray[Any, Any]:
    """Spark's ``round`` (``half_up``) / ``bround`` (``half_even``) of float64 ``x`` to ``digits``."""
    out = x.copy()
    finite = np.isfinite(x)
    exact = np.zeros(len(x), dtype=bool)
    if -22 <= digits <= 22:
        scale = 10.0 ** abs(digits)  # exact for |digits| <= 22
        with np.errstate(all="ignore"):
            y = x * scale if digits >= 0 else x / scale
            ay = np.abs(y)
            frac = ay - np.floor(ay)
            near = np.abs(frac - 0.5) <= ay * _TIE_MARGIN + 1e-300
            unchanged = ay >= 1e17  # x's shortest text has no digit below 10**-digits
            exact = finite & ~unchanged & (near | (ay >= 2.0**52))
            fast = finite & ~unchanged & ~exact
            r = np.floor(ay + 0.5) * np.sign(y)  # not near a tie: the nearest integer, either mode
            back = r / scale if digits >= 0 else r * scale
        out[fast] = back[fast] + 0.0  # + 0.0 turns -0.0 into 0.0, as BigDecimal does
    else:
        exact = finite
    if exact.any():
        quantum = decimal.Decimal(1).scaleb(-digits)
        rounding = _MODES[mode]
        for i in np.nonzero(exact)[0]:
            value = decimal.Decimal(repr(float(x[i]))).quantize(quantum, rounding=rounding, context=_EXACT)
            out[i] = float(value) + 0.0
    return out


def _round_udf(mode: str, digits: int, to_float: bool) -> Any:
    def run(array: pa.Array) -> pa.Array:
        result = round_doubles(values(array, np.float64), digits, mode)
        out = pa.array(result, pa.float64(), mask=~valid(array))
        return out.cast(pa.float32()) if to_float else out

    return run


def round_floating(v: Val, digits: int, mode: str) -> Val:
    """``round`` / ``bround`` of a FLOAT or DOUBLE ``v`` to ``digits`` (a literal): the same type."""
    to_float = v.name == "float"
    out_type = pa.float32() if to_float else pa.float64()
    name = f"round_{mode}_{'f32' if to_float else 'f64'}_{digits}".replace("-", "m")
    return Val(call_udf(name, _round_udf(mode, digits, to_float), [(v.expr, pa.float64())], out_type), v.data_type)


def _call(name: str, *args: Any) -> Any:
    return pc.Expression._call(name, list(args))


def _nan(e: Any) -> Any:
    return _call("coalesce", _call("is_nan", e), pc.scalar(False))


def _above(a: Any, b: Any) -> Any:
    """``a > b`` in Spark's order (NaN above everything, equal to itself); NULL when either is."""
    return _call("or_kleene", _call("greater", a, b), _call("and_kleene", _nan(a), _call("invert", _nan(b))))


def extreme_floating(exprs: list[Any], greatest: bool) -> Any:
    """``greatest`` / ``least`` of floating-point expressions already of one Arrow type: NULLs
    skipped, the first of equal values kept, NaN the largest."""
    result = exprs[0]
    for e in exprs[1:]:
        better = _above(e, result) if greatest else _above(result, e)
        take = _call("and_kleene", _call("is_valid", e), _call("or_kleene", _call("is_null", result), better))
        result = _call("if_else", _call("coalesce", take, pc.scalar(False)), e, result)
    return result


# --- logarithms and exp: Java's StrictMath (fdlibm), see arrow_fdlibm ------------------------------


def _fdlibm_udf(fn: Any) -> Any:
    def run(array: pa.Array) -> pa.Array:
        return pa.array(fn(values(array, np.float64)), pa.float64(), mask=~valid(array))

    return run


def _fdlibm(name: str, expr: Any) -> Any:
    return call_udf(f"strictmath_{name}", _fdlibm_udf(getattr(fdlibm, name)), [(expr, pa.float64())], pa.float64())


def _positive_or_null(x: Any, value: Any) -> Any:
    """``value`` where ``x > 0`` or NaN; NULL where ``x <= 0`` (Spark's logarithms: no -Infinity)."""
    return _call("if_else", _call("less_equal", x, pc.scalar(0.0)), pc.scalar(pa.scalar(None, pa.float64())), value)


def ln(x: Any) -> Any:
    """``ln(x)`` / ``log(x)``: StrictMath.log; NULL for x <= 0."""
    return _positive_or_null(x, _fdlibm("log", x))


def log10(x: Any) -> Any:
    """``log10(x)``: StrictMath.log10 (not log(x) / log(10)); NULL for x <= 0."""
    return _positive_or_null(x, _fdlibm("log10", x))


def log_base(base: Any, x: Any) -> Any:
    """``log(b, x)`` (``log2(x)`` is ``log(2, x)``): StrictMath.log(x) / StrictMath.log(b); NULL when
    either is <= 0."""
    quotient = _call("divide", _fdlibm("log", x), _fdlibm("log", base))
    return _positive_or_null(base, _positive_or_null(x, quotient))


def exp(x: Any) -> Any:
    """``exp(x)``: StrictMath.exp."""
    return _fdlibm("exp", x)
