"""delta-spark's argument checks, with its exception types and wording, for call-time failures.

delta-spark checks a condition or a column mapping in Python the moment it is passed
(``_condition_to_jcolumn``, ``_dict_to_jmap``): a missing mapping is a ValueError
("... cannot be None"), a wrong type a TypeError ("must be a Spark SQL Column or a string",
"must be a dict", "Keys of dict in ... must contain only strings", "Values of dict in ... must
contain only Spark SQL Columns or strings"). Scripts and tests match on these, so DeltaTable
and the MERGE builder raise the same, at the same call, before anything runs. pyspark Columns
are recognised by type name so that this module needs no pyspark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_column(value: object) -> bool:
    """True for a pyspark Column (classic or Spark Connect), without importing pyspark."""
    return type(value).__name__ == "Column" and type(value).__module__.startswith("pyspark.")


def check_condition(condition: object, argname: str = "'condition'") -> None:
    """TypeError unless ``condition`` is None, a SQL string or a pyspark Column."""
    if condition is None or type(condition) is str or is_column(condition):
        return
    raise TypeError(
        f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), "
        f"found to be of type {type(condition)}: {condition!r}"
    )


def check_column_mapping(mapping: object, argname: str) -> dict[str, Any]:
    """The mapping as a dict of column name -> SQL string or Column; delta-spark's errors otherwise."""
    if mapping is None:
        raise ValueError(f"{argname} cannot be None")
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{argname} must be a dict, found to be {type(mapping)}")
    out: dict[str, Any] = {}
    for col, expr in mapping.items():
        if type(col) is not str:
            raise TypeError(
                f"Keys of dict in {argname} must contain only strings with column names, "
                f"found '{col}' of type '{type(col)}'"
            )
        if type(expr) is not str and not is_column(expr):
            raise TypeError(
                f"Values of dict in {argname} must contain only Spark SQL Columns or strings (expressions in SQL "
                f"syntax) as values, found '{expr}' of type '{type(expr)}' for column {col!r}"
            )
        out[col] = expr
    return out


def check_int(value: object, name: str) -> None:
    """delta-spark's ``_verify_type_int``: ValueError unless an int (bools refused too)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} needs to be an int but got '{type(value)}'.")


def check_str(value: object, name: str) -> None:
    """delta-spark's ``_verify_type_str``: ValueError unless a str."""
    if not isinstance(value, str):
        raise ValueError(f"{name} needs to be a string but got '{type(value)}'.")
