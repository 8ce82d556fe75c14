"""Quoting column names into Spark SQL text: the one rule every layer uses.

A name is back-quoted and back-quotes inside it are doubled, so any column name (spaces, dots,
back-quotes) survives a round trip through sqlglot and Spark's parser.
"""

from __future__ import annotations


def quote_identifier(name: str) -> str:
    """```name```, with back-quotes doubled (``a`b`` -> ```a``b```)."""
    return "`" + name.replace("`", "``") + "`"
