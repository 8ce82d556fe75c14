"""Resolved column references, attached to the bound sqlglot tree.

Binding replaces every column node with a back-quoted column in the schema's spelling and
records, on the node's ``meta``, which schema field it denotes. Visitors read that record
instead of re-resolving names, so every consumer agrees on what a name means.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from dvengine.protocol.schema import StructField

REF_KEY = "dvengine.ref"


@dataclass(frozen=True, slots=True, eq=False)
class ColumnRef:
    """One column reference.

    ``qualifier`` is the MERGE alias it resolved through (spelled as the key passed in
    ``aliases``) or None; ``path`` holds logical names from the top-level column down into
    nested struct fields; ``fields`` the matching schema fields (``fields[-1]`` is the leaf).
    """

    qualifier: str | None
    path: tuple[str, ...]
    fields: tuple[StructField, ...]

    @property
    def top(self) -> str:
        return self.path[0]

    @property
    def leaf(self) -> StructField:
        return self.fields[-1]

    @property
    def physical_path(self) -> tuple[str, ...]:
        return tuple(f.physical_name for f in self.fields)

    @property
    def key(self) -> str:
        """``name`` or ``alias.name`` for the top-level column, as ``rename`` mappings spell it."""
        return self.top if self.qualifier is None else f"{self.qualifier}.{self.top}"


def ref_of(node: exp.Expr) -> ColumnRef | None:
    ref = node.meta.get(REF_KEY) if node.meta else None
    return ref if isinstance(ref, ColumnRef) else None


def column_node(parts: list[str]) -> exp.Expr:
    """A back-quoted column (or nested field access) node for the given name parts."""
    idents = [exp.to_identifier(p, quoted=True) for p in parts]
    head = idents[:4]
    args: dict[str, exp.Expr] = {"this": head[-1]}
    for key, ident in zip(("table", "db", "catalog"), reversed(head[:-1])):
        args[key] = ident
    node: exp.Expr = exp.Column(**args)
    for ident in idents[4:]:
        node = exp.Dot(this=node, expression=ident)
    return node


def reference_nodes(tree: exp.Expr) -> list[tuple[exp.Expr, list[str]]]:
    """Each outermost column reference (a Column, or a Dot chain over one) with its name parts."""
    found: list[tuple[exp.Expr, list[str]]] = []
    for column in list(tree.find_all(exp.Column)):
        parts = [str(p.name) for p in column.parts]
        node: exp.Expr = column
        while isinstance(node.parent, exp.Dot) and node.parent.this is node:
            suffix = node.parent.expression
            if not isinstance(suffix, exp.Identifier):
                break
            parts.append(str(suffix.name))
            node = node.parent
        found.append((node, parts))
    return found


def bound_refs(tree: exp.Expr) -> list[ColumnRef]:
    return [r for r in (ref_of(n) for n in tree.walk()) if r is not None]
