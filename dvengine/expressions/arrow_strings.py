"""String functions of the Arrow evaluator with Spark's semantics: substring / left / right
(``UTF8String.substringSQL`` positions, in code points), concat / ``||`` (NULL if any argument is),
concat_ws (NULLs skipped), upper / lower (rows whose case mapping differs between Java and Arrow
fail), trim (spaces only, or the given characters), length, startswith / endswith / contains,
replace. Integers, booleans and dates given where a string is expected are cast as Spark casts
them implicitly (they print the same); other types are refused.

Also the helpers every function family uses: ``call`` (one Arrow kernel call), ``fail_rows`` and
the literal-argument readers.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from dvengine.expressions import arrow_regex as regex
from dvengine.expressions.arrow_types import INTEGRAL, Refused, Val, cast, prim
from dvengine.expressions.literals import literal_of

STRING, BOOLEAN, INT = prim("string"), prim("boolean"), prim("integer")

# Characters whose upper or lower case differs between Java (Spark) and utf8proc (Arrow): the
# one-to-many mappings of Unicode's SpecialCasing.txt (ß -> SS in Java), dotted capital I and
# final sigma. Rows holding one fail instead of taking Arrow's answer.
_SPECIAL_CASING = (
    "[\u00df\u0130\u0149\u01f0\u0390\u03a3\u03b0\u0587\u1e96-\u1e9a\u1f50\u1f52\u1f54\u1f56\u1f80-\u1faf"
    "\u1fb2-\u1fb4\u1fb6\u1fb7\u1fbc\u1fc2-\u1fc4\u1fc6\u1fc7\u1fcc\u1fd2\u1fd3\u1fd6\u1fd7\u1fe2-\u1fe4"
    "\u1fe6\u1fe7\u1ff2-\u1ff4\u1ff6\u1ff7\u1ffc\ufb00-\ufb06\ufb13-\ufb17]"
)


def call(name: str, *args: Any, options: Any = None) -> Any:
    return pc.Expression._call(name, list(args), options)


def fail_rows(bad: Any, message: str, result: Any) -> Any:
    """``result``, except that evaluation fails with ``message`` when ``bad`` is TRUE on some row.

    Arrow has no "raise" kernel: a checked cast of ``message`` to a number fails with an error
    quoting it, and is only reached on the bad rows."""
    probe = call("if_else", call("coalesce", bad, pc.scalar(False)), pc.scalar(message), pc.scalar("0"))
    check = probe.cast(pa.int8(), safe=True)
    return call("if_else", call("equal", check, pc.scalar(pa.scalar(0, pa.int8()))), result, result)


class StringCalls:
    """String functions and literal arguments; ``_typed`` comes from ``arrow_calls.CallTranslator``."""

    def _typed(self, node: exp.Expr) -> Val:
        raise NotImplementedError

    def _literal_int(self, node: exp.Expr | None, what: str) -> int | None:
        """An integer argument that must be a literal (substring positions, round digits)."""
        if node is None:
            return None
        lit = literal_of(node)
        if lit is None or (lit.value is not None and (isinstance(lit.value, bool) or not isinstance(lit.value, int))):
            raise Refused(f"{what} must be an integer literal")
        return lit.value

    def _literal_text(self, node: exp.Expr | None, what: str) -> str | None:
        lit = literal_of(node) if node is not None else None
        if lit is None or (lit.value is not None and not isinstance(lit.value, str)):
            raise Refused(f"{what} must be a string literal")
        return lit.value

    # --- strings ---------------------------------------------------------------------------------

    def _string(self, node: exp.Expr) -> Any:
        v = self._typed(node)
        if v.data_type is None:
            return pc.scalar(pa.scalar(None, pa.string()))
        if v.name == "string":
            return v.expr
        if v.name in INTEGRAL or v.name in ("boolean", "date"):
            return cast(v, STRING)  # Spark's implicit cast to string prints these the same
        raise Refused(f"a {v.name} value where a string is expected")

    def substring(self, node: exp.Expr) -> Val:
        start = self._literal_int(node.args.get("start"), "the substring position")
        length = self._literal_int(node.args.get("length"), "the substring length")
        return self._slice(self._string(node.this), start, length, "length" in node.args and node.args["length"] is not None)

    def _slice(self, text: Any, pos: int | None, length: int | None, has_length: bool) -> Val:
        """Spark's ``substring(s, pos, len)`` (UTF8String.substringSQL): 1-based, 0 is 1, negative
        counts from the end; both ends then clamp to the string, as Arrow's slice also does."""
        if pos is None or (has_length and length is None):
            return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
        start = pos - 1 if pos > 0 else pos
        if not has_length:
            stop: int | None = None
        else:
            assert length is not None
            end = start + length
            if pos < 0 and end >= 0:
                stop = None
            elif pos >= 0 and end <= max(start, 0):
                return Val(call("if_else", call("is_null", text), pc.scalar(pa.scalar(None, pa.string())), pc.scalar("")), STRING)
            else:
                stop = end
        if pos < 0 and has_length and length is not None and length <= 0:
            return Val(call("if_else", call("is_null", text), pc.scalar(pa.scalar(None, pa.string())), pc.scalar("")), STRING)
        options = pc.SliceOptions(start=start, stop=stop if stop is not None else 2**62)
        return Val(call("utf8_slice_codeunits", text, options=options), STRING)

    def left(self, node: exp.Expr) -> Val:
        n = self._literal_int(node.expression, "the length of left()")
        return self._slice(self._string(node.this), 1, n, True)

    def right(self, node: exp.Expr) -> Val:
        n = self._literal_int(node.expression, "the length of right()")
        if n is not None and n <= 0:
            return self._slice(self._string(node.this), 1, 0, True)
        return self._slice(self._string(node.this), None if n is None else -n, n, True)

    def concat(self, node: exp.Expr) -> Val:
        """``concat(a, b, ...)`` / ``a || b``: NULL when any argument is NULL."""
        args = list(node.expressions) if isinstance(node, exp.Concat) else [node.this, node.expression]
        parts = [self._string(a) for a in args]
        if len(parts) == 1:
            return Val(parts[0], STRING)
        options = pc.JoinOptions(null_handling="emit_null")
        return Val(call("binary_join_element_wise", *parts, pc.scalar(""), options=options), STRING)

    def concat_ws(self, node: exp.Expr) -> Val:
        """``concat_ws(sep, a, ...)``: NULL arguments are skipped; a NULL separator gives NULL."""
        sep_node, *args = list(node.expressions)
        sep = self._literal_text(sep_node, "the concat_ws separator")
        if sep is None:
            return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
        parts = [self._string(a) for a in args]
        if not parts:
            return Val(pc.scalar(""), STRING)
        if len(parts) == 1:
            return Val(call("coalesce", parts[0], pc.scalar("")), STRING)
        options = pc.JoinOptions(null_handling="skip")
        return Val(call("binary_join_element_wise", *parts, pc.scalar(sep), options=options), STRING)

    def case_map(self, node: exp.Expr) -> Val:
        text = self._string(node.this)
        kernel = "utf8_upper" if isinstance(node, exp.Upper) else "utf8_lower"
        special = call("match_substring_regex", text, options=pc.MatchSubstringOptions(_SPECIAL_CASING))
        message = f"{kernel[5:]}() of a letter whose case mapping differs between Spark (Java) and Arrow (e.g. \u00df)"
        return Val(fail_rows(special, message, call(kernel, text)), STRING)

    def trim(self, node: exp.Expr) -> Val:
        """``trim`` / ``ltrim`` / ``rtrim``: Spark removes spaces (U+0020) only, or the given characters."""
        text = self._string(node.this)
        chars = " "
        if node.args.get("expression") is not None:
            given = self._literal_text(node.expression, "the characters to trim")
            if given is None:
                return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
            chars = given
        position = str(node.args.get("position") or "BOTH").upper()
        kernel = {"LEADING": "utf8_ltrim", "TRAILING": "utf8_rtrim"}.get(position, "utf8_trim")
        if not chars:
            return Val(text, STRING)
        return Val(call(kernel, text, options=pc.TrimOptions(chars)), STRING)

    def length(self, node: exp.Expr) -> Val:
        v = self._typed(node.this)
        if v.name == "binary":
            return Val(call("binary_length", v.expr), INT)
        return Val(call("utf8_length", self._string(node.this)), INT)

    def _affix(self, node: exp.Expr) -> Val:
        kernel: str = {exp.StartsWith: "starts_with", exp.EndsWith: "ends_with", exp.Contains: "match_substring"}[type(node)]  # type: ignore[index]
        pattern = self._literal_text(node.expression, f"the pattern of {kernel}")
        text = self._string(node.this)
        if pattern is None:
            return Val(pc.scalar(pa.scalar(None, pa.bool_())), BOOLEAN)
        return Val(call(kernel, text, options=pc.MatchSubstringOptions(pattern)), BOOLEAN)

    def replace(self, node: exp.Expr) -> Val:
        search = self._literal_text(node.expression, "the search string of replace()")
        replacement = self._literal_text(node.args.get("replacement"), "the replacement of replace()") if node.args.get("replacement") is not None else ""
        text = self._string(node.this)
        if search is None or replacement is None:
            return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
        if not search:
            return Val(text, STRING)  # Spark returns the string unchanged
        return Val(call("replace_substring", text, options=pc.ReplaceSubstringOptions(search, replacement)), STRING)

    def pad(self, node: exp.Expr) -> Val:
        """``lpad`` / ``rpad(s, len, pad = ' ')`` with literal len and pad, in code points: a string
        longer than len is cut to len; an empty pad leaves a shorter string as it is; len <= 0
        gives ''. ``rpad`` is ``(s || pad*len)[:len]``; ``lpad`` with one pad character is Arrow's
        ``utf8_lpad``, with more it prepends ``(pad*len)[:len - length(s)]`` row by row."""
        left = bool(node.args.get("is_left"))
        width = self._literal_int(node.expression, "the length of lpad/rpad")
        fill = self._literal_text(node.args.get("fill_pattern"), "the padding of lpad/rpad") if node.args.get("fill_pattern") is not None else " "
        text = self._string(node.this)
        null = pc.scalar(pa.scalar(None, pa.string()))
        if width is None or fill is None:
            return Val(null, STRING)
        if width <= 0:
            return Val(call("if_else", call("is_null", text), null, pc.scalar("")), STRING)
        cut = call("utf8_slice_codeunits", text, options=pc.SliceOptions(0, width))
        if not fill:
            return Val(cut, STRING)
        repeated = (fill * (width // len(fill) + 1))[:width]
        if not left:
            joined = call("binary_join_element_wise", text, pc.scalar(repeated), pc.scalar(""))
            return Val(call("utf8_slice_codeunits", joined, options=pc.SliceOptions(0, width)), STRING)
        if len(fill) == 1:
            padded = call("utf8_lpad", text, options=pc.PadOptions(width=width, padding=fill))
            return Val(call("if_else", call("greater_equal", call("utf8_length", text), pc.scalar(width)), cut, padded), STRING)

        def lpad_rows(array: pa.Array) -> pa.Array:
            return pa.array([None if s is None else s[:width] if len(s) >= width else repeated[: width - len(s)] + s
                             for s in array.to_pylist()], pa.string())

        from dvengine.expressions.arrow_udfs import call_udf

        return Val(call_udf(f"lpad_{width}_{fill.encode().hex()}", lpad_rows, [(text, pa.string())], pa.string()), STRING)

    # --- regular expressions (arrow_regex) --------------------------------------------------------

    def _regex(self, node: exp.Expr, text: Any) -> tuple[Any, regex.Pattern | None]:
        """The pattern of ``node`` (a literal) in RE2 form, and ``text`` guarded: rows ending in a
        line terminator fail when the pattern has ``$`` (Java's ``$`` also matches before it)."""
        source = self._literal_text(node.expression, "the regular expression")
        if source is None:
            return text, None
        pattern = regex.translate(source)
        if pattern.dollar:
            ends = call("match_substring_regex", text, options=pc.MatchSubstringOptions(regex.ENDS_WITH_TERMINATOR))
            text = fail_rows(ends, "a regular expression with '$' on a value ending in a line terminator "
                             "(Java's '$' also matches before it): not evaluated in Arrow", text)
        return text, pattern

    def rlike(self, node: exp.Expr) -> Val:
        """``s RLIKE p`` / ``regexp_like``: whether p matches anywhere in s (Java's ``find``)."""
        if node.args.get("flag") is not None:
            raise Refused("regexp_like with flags")
        text, pattern = self._regex(node, self._string(node.this))
        if pattern is None:
            return Val(pc.scalar(pa.scalar(None, pa.bool_())), BOOLEAN)
        return Val(call("match_substring_regex", text, options=pc.MatchSubstringOptions(pattern.re2)), BOOLEAN)

    def regexp_replace(self, node: exp.Expr) -> Val:
        """``regexp_replace(s, p, r)``: every match replaced (Java's ``replaceAll``)."""
        for extra in ("position", "occurrence", "modifiers"):
            value = node.args.get(extra)
            if value is not None and not (extra == "position" and self._literal_int(value, "the position of regexp_replace") == 1):
                raise Refused(f"regexp_replace with a {extra}")
        text, pattern = self._regex(node, self._string(node.this))
        rewrite = self._literal_text(node.args.get("replacement"), "the replacement of regexp_replace")
        if pattern is None or rewrite is None:
            return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
        if regex.matches_empty(pattern.re2):
            raise Refused("regexp_replace with a pattern that matches the empty string (Java and RE2 replace empty matches differently)")
        options = pc.ReplaceSubstringOptions(pattern.re2, regex.replacement(rewrite, pattern.groups))
        return Val(call("replace_substring_regex", text, options=options), STRING)

    def regexp_extract(self, node: exp.Expr) -> Val:
        """``regexp_extract(s, p, idx = 1)``: group idx of the first match; '' when nothing matches
        or the group did not take part; idx beyond the groups fails, as in Spark (refused here)."""
        index = self._literal_int(node.args.get("group"), "the group of regexp_extract")
        text, pattern = self._regex(node, self._string(node.this))
        if pattern is None or index is None:
            return Val(pc.scalar(pa.scalar(None, pa.string())), STRING)
        if not 0 <= index <= pattern.groups:
            raise Refused(f"regexp_extract of group {index}: the pattern has {pattern.groups} (Spark fails)")
        numbered = regex.numbered_groups(pattern.re2)
        struct = call("extract_regex", text, options=pc.ExtractRegexOptions(numbered))
        group = call("struct_field", struct, options=pc.StructFieldOptions([index]))
        matched = call("match_substring_regex", text, options=pc.MatchSubstringOptions(pattern.re2))
        value = call("if_else", matched, call("coalesce", group, pc.scalar("")), pc.scalar(""))
        return Val(call("if_else", call("is_null", text), pc.scalar(pa.scalar(None, pa.string())), value), STRING)
