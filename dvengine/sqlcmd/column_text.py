"""The text of each column's ``GENERATED ALWAYS AS (expr)`` and ``DEFAULT expr`` as written.

Delta stores both expressions as SQL text in the field metadata (``delta.generationExpression``,
``CURRENT_DEFAULT``), taken by Spark's parser from the statement as the user wrote it. sqlglot's
tree cannot give that text back: re-printing changes meaning-preserving details that other
engines may still read differently (it turns Spark's ``CAST(ts AS DATE)`` into ``TRY_CAST``, the
non-ANSI reading). So the column list is cut from the original text by token: top-level commas
(outside a nested type's ``<...>``) split the columns, and each clause's text runs from its keyword to the end of its parentheses
(GENERATED) or to the next column clause keyword at the same depth (DEFAULT).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot.tokenizer_core import Token, TokenType

from dvengine.errors import SqlParseError
from dvengine.sqlcmd.tokens import tokenize

# Words that start the clause after a DEFAULT expression (Spark's colDefinitionOption).
_CLAUSE_WORDS = ("COMMENT", "GENERATED", "CONSTRAINT", "DEFAULT")
_NESTED_TYPES = ("STRUCT", "ARRAY", "MAP")


@dataclass(frozen=True)
class ColumnTexts:
    name: str
    generated_as: str | None
    default: str | None


def _segments(tokens: list[Token], text: str) -> list[list[Token]]:
    """The column list's items (tokens between top-level commas inside the first parentheses)."""
    start = next((i for i, t in enumerate(tokens) if t.token_type == TokenType.L_PAREN), None)
    if start is None:
        return []
    items: list[list[Token]] = [[]]
    depth = angles = 0  # angles: open ``<`` of STRUCT<...> / ARRAY<...> / MAP<...> in a column type
    previous = ""
    for token in tokens[start + 1:]:
        if token.token_type == TokenType.L_PAREN:
            depth += 1
        elif token.token_type == TokenType.R_PAREN:
            if depth == 0:
                return [i for i in items if i]
            depth -= 1
        elif token.token_type == TokenType.LT and previous in _NESTED_TYPES:
            angles += 1
        elif token.token_type == TokenType.GT and angles:
            angles -= 1
        elif token.token_type == TokenType.COMMA and depth == 0 and angles == 0:
            items.append([])
            previous = ""
            continue
        previous = token.text.upper()
        items[-1].append(token)
    raise SqlParseError(f"CREATE TABLE: unbalanced parentheses in the column list of {text!r}")


def _word(token: Token) -> str:
    return "" if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER) else token.text.upper()


def _parenthesized(item: list[Token], at: int, text: str) -> tuple[str, int]:
    """The text inside the parentheses opening at ``item[at]`` and the index after them."""
    depth = 0
    for index in range(at, len(item)):
        kind = item[index].token_type
        depth += 1 if kind == TokenType.L_PAREN else -1 if kind == TokenType.R_PAREN else 0
        if depth == 0:
            return text[item[at].end + 1:item[index].start].strip(), index + 1
    raise SqlParseError(f"CREATE TABLE: unbalanced parentheses in {text!r}")


def _column(item: list[Token], text: str) -> ColumnTexts:
    generated = default = None
    i = 1
    while i < len(item):
        words = [_word(t) for t in item[i:i + 4]]
        if words[:3] == ["GENERATED", "ALWAYS", "AS"] and i + 3 < len(item) and item[i + 3].token_type == TokenType.L_PAREN:
            generated, i = _parenthesized(item, i + 3, text)
            continue
        if words[:1] == ["DEFAULT"] and i + 1 < len(item):
            depth, j = 0, i + 1
            while j < len(item):
                kind = item[j].token_type
                depth += 1 if kind == TokenType.L_PAREN else -1 if kind == TokenType.R_PAREN else 0
                here = _word(item[j])
                is_not_null = here == "NOT" and j + 1 < len(item) and _word(item[j + 1]) == "NULL"
                if depth == 0 and j > i + 1 and (here in _CLAUSE_WORDS or is_not_null):
                    break
                j += 1
            default = text[item[i + 1].start:item[j - 1].end + 1].strip()
            i = j
            continue
        i += 1
    return ColumnTexts(item[0].text, generated, default)


def column_texts(text: str) -> list[ColumnTexts]:
    """Per column of ``CREATE TABLE ... (cols)``, in order: its generation and default texts."""
    tokens = tokenize(text)
    return [_column(item, text) for item in _segments(tokens, text)]


def identity_options_in_order(text: str) -> str:
    """``text`` with every ``IDENTITY (INCREMENT BY m START WITH n)`` written ``(START WITH n INCREMENT BY m)``.

    Spark's grammar takes the two options in either order; sqlglot only START first. Only those
    tokens are moved (the rest of the text, strings included, stays as written)."""
    tokens = tokenize(text)
    spans: list[tuple[int, int, str]] = []
    for i, token in enumerate(tokens[:-1]):
        if _word(token) != "IDENTITY" or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        close = next((j for j in range(i + 2, len(tokens)) if tokens[j].token_type == TokenType.R_PAREN), None)
        inner = tokens[i + 2:close] if close is not None else []
        words = [_word(t) for t in inner]
        if words[:2] != ["INCREMENT", "BY"] or "START" not in words:
            continue
        start = words.index("START")
        if words[start + 1:start + 2] != ["WITH"]:
            continue
        step_text = text[inner[2].start:inner[start - 1].end + 1]
        start_text = text[inner[start + 2].start:inner[-1].end + 1] if start + 2 < len(inner) else ""
        spans.append((inner[0].start, inner[-1].end + 1, f"START WITH {start_text} INCREMENT BY {step_text}"))
    for begin, end, replacement in reversed(spans):
        text = text[:begin] + replacement + text[end:]
    return text
