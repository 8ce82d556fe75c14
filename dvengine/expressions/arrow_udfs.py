"""Vectorized routines registered as Arrow scalar functions, for what no Arrow kernel computes as
Spark does (HALF_UP rounding through the decimal text, Murmur3 / xxHash64 with Spark's seeds,
digests, string parsing with Spark's rules, month arithmetic).

A registered function is called by Acero with whole batches (``pa.Array``; a ``pa.Scalar`` for a
literal argument) and works on them with numpy or ``pyarrow.compute``; only the rare rows that need
exact decimal arithmetic go through Python. A row Spark (ANSI) fails on raises ``pa.ArrowInvalid``
with Spark's error class and the value, as Arrow's own checked kernels do, so callers treat both
alike (``engine.local.failures`` then names the failing part and its column).

Functions are registered once per process under ``dvengine_<name>``; ``register`` is idempotent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LOCK = threading.Lock()
_REGISTERED: set[str] = set()


def register(name: str, fn: Callable[..., Any], in_types: dict[str, pa.DataType], out_type: pa.DataType) -> str:
    """``fn(*arrays) -> pa.Array`` as the Arrow function ``dvengine_<name>``; returns that name."""
    full = f"dvengine_{name}"
    with _LOCK:
        if full in _REGISTERED:
            return full
        try:
            pc.get_function(full)
        except pa.ArrowKeyError:
            doc = {"summary": name, "description": f"dvengine: Spark's {name}"}
            pc.register_scalar_function(lambda ctx, *args: fn(*[_as_array(a, ctx) for a in args]), full, doc, in_types, out_type)
        _REGISTERED.add(full)
    return full


def _as_array(value: Any, ctx: Any) -> pa.Array:
    """A literal argument arrives as a scalar: broadcast it to the batch length."""
    if isinstance(value, pa.Scalar):
        return pa.array([value.as_py()] * ctx.batch_length, value.type)
    if isinstance(value, pa.ChunkedArray):
        return value.combine_chunks()
    return value


def call_udf(name: str, fn: Callable[..., Any], args: list[tuple[Any, pa.DataType]], out_type: pa.DataType) -> Any:
    """An expression calling ``fn`` (registered on first use) on ``args`` (expression, Arrow type)."""
    full = register(name, fn, {f"a{i}": t for i, (_, t) in enumerate(args)}, out_type)
    return pc.Expression._call(full, [e.cast(t) if isinstance(e, pc.Expression) else e for e, t in args])


def values(array: pa.Array, dtype: Any, fill: Any = 0) -> np.ndarray[Any, Any]:
    """``array``'s values as numpy with NULLs replaced by ``fill`` (see ``valid``)."""
    return np.asarray(array.fill_null(fill).to_numpy(zero_copy_only=False), dtype=dtype)


def valid(array: pa.Array) -> np.ndarray[Any, Any]:
    return np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def invalid(error_class: str, message: str) -> pa.ArrowInvalid:
    """The error a failing row raises: Spark's error class first, as Spark prints it."""
    return pa.ArrowInvalid(f"[{error_class}] {message}")
