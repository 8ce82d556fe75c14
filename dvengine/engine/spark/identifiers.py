"""Spark SQL identifiers: the one place that quotes a column name for ``F.col`` or SQL text."""

from __future__ import annotations

from dvengine.expressions.identifiers import quote_identifier


def quote(name: str) -> str:
    """A Spark SQL identifier for ``F.col`` / ``F.expr`` (see ``quote_identifier``)."""
    return quote_identifier(name)


def quote_path(parts: tuple[str, ...] | list[str]) -> str:
    """A nested field reference: each part quoted, joined with dots."""
    return ".".join(quote(p) for p in parts)
