"""``rlike`` / ``regexp_like``, ``regexp_replace`` and ``regexp_extract`` with Java's regex
semantics, on Arrow's RE2 kernels.

Spark matches with ``java.util.regex``; Arrow with RE2. Both are leftmost-first engines and agree on
a common core, which is what is evaluated here; a pattern using anything outside it is refused with
the construct named. Where the core differs it is rewritten:

- ``.`` excludes every Java line terminator (``\\n \\r \\u0085 \\u2028 \\u2029``), RE2's only ``\\n``;
- ``\\s`` / ``\\S`` include the vertical tab in Java, not in RE2;
- ``$`` also matches before a final line terminator in Java: rows ending in one fail (not evaluated
  here) when the pattern has ``$``;
- ``regexp_replace``'s replacement ``$1`` / ``\\$`` becomes RE2's ``\\1`` / ``$``; and because Java
  also replaces an empty match right after a match (``'abc'`` with ``b*`` gives ``-a--c-``, RE2
  ``-a-c-``), a pattern that matches the empty string is refused there.

Refused: back-references, look-around, possessive and atomic groups, named groups, inline flags
(Java's ``(?i)`` is ASCII-only, RE2's Unicode), ``\\b`` (Unicode-aware in Java 17), ``\\p{..}``,
``\\h \\v \\R \\X \\Z \\G \\Q``, octal / Unicode escapes, nested or intersected classes, a literal ``{``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dvengine.expressions.arrow_types import Refused

_TERMINATORS = "\\n\\r\\x{85}\\x{2028}\\x{2029}"
_DOT = f"[^{_TERMINATORS}]"
_SPACE = "\\t\\n\\x0B\\f\\r "
# escapes with the same meaning in both engines
_SAME_ESCAPES = set("dDwWtnrfaAz") | set("\\.[]{}()*+?^$|-/&#!\"',:;<=>@_`~% ")
_QUANTIFIER = re.compile(r"\{[0-9]+(?:,[0-9]*)?\}")
ENDS_WITH_TERMINATOR = f"[{_TERMINATORS}]$"


@dataclass(frozen=True, slots=True)
class Pattern:
    """A Java pattern as RE2 text: ``groups`` capturing groups; ``dollar`` when it uses ``$``."""

    re2: str
    groups: int
    dollar: bool


def translate(pattern: str) -> Pattern:
    """The RE2 form of Java ``pattern``; Refused naming the first construct outside the common core."""
    out: list[str] = []
    groups = 0
    dollar = False
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Refused("a regular expression ending in a backslash")
            e = pattern[i + 1]
            if e in "sS":
                out.append(f"[{'^' if e == 'S' else ''}{_SPACE}]")
            elif e in _SAME_ESCAPES:
                out.append("\\" + e)
            else:
                raise Refused(f"the regular expression escape \\{e} (Java and RE2 read it differently or RE2 lacks it)")
            i += 2
            continue
        if c == "[":
            end, text = _char_class(pattern, i)
            out.append(text)
            i = end
            continue
        if c == ".":
            out.append(_DOT)
        elif c == "$":
            dollar = True
            out.append("$")
        elif c == "(":
            if pattern.startswith("(?:", i):
                out.append("(?:")
                i += 3
                continue
            if pattern.startswith("(?", i):
                raise Refused(f"the regular expression group {pattern[i:i + 4]!r}... (look-around, named, atomic or flags)")
            groups += 1
            out.append("(")
        elif c == "{":
            match = _QUANTIFIER.match(pattern, i)
            if match is None or not out:
                raise Refused("a literal '{' in a regular expression (Java rejects it)")
            out.append(match.group(0))
            i = match.end()
            if i < n and pattern[i] == "+":
                raise Refused("a possessive quantifier in a regular expression")
            continue
        elif c in "*+?":
            out.append(c)
            if i + 1 < n and pattern[i + 1] == "+":
                raise Refused("a possessive quantifier in a regular expression")
        else:
            out.append(c)
        i += 1
    re2 = "".join(out)
    _check_compiles(re2, pattern)
    return Pattern(re2, groups, dollar)


def _char_class(pattern: str, start: int) -> tuple[int, str]:
    """(index after the class, RE2 text) of the class opening at ``start``."""
    i = start + 1
    out = ["["]
    if i < len(pattern) and pattern[i] == "^":
        out.append("^")
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        raise Refused("a ']' first in a regular expression class (Java and RE2 read it differently)")
    while i < len(pattern):
        c = pattern[i]
        if c == "]":
            out.append("]")
            return i + 1, "".join(out)
        if c == "[" or pattern.startswith("&&", i):
            raise Refused("a nested or intersected regular expression class")
        if c == "\\":
            if i + 1 >= len(pattern):
                break
            e = pattern[i + 1]
            if e == "s":
                out.append(_SPACE)
            elif e in _SAME_ESCAPES - set("Az"):
                out.append("\\" + e)
            else:
                raise Refused(f"the regular expression escape \\{e} in a class")
            i += 2
            continue
        out.append(c)
        i += 1
    raise Refused("an unclosed regular expression class")


def _check_compiles(re2: str, original: str) -> None:
    try:
        pc.match_substring_regex(pa.array([""], pa.string()), re2)
    except pa.ArrowInvalid:
        raise Refused(f"the regular expression {original!r} (RE2 cannot compile its translation)") from None


def matches_empty(re2: str) -> bool:
    return bool(pc.match_substring_regex(pa.array([""], pa.string()), re2)[0].as_py())


def replacement(text: str, groups: int) -> str:
    """Java's ``Matcher.replaceAll`` replacement as RE2 rewrite text: ``$n`` (the longest group
    number that exists, as Java reads it) -> ``\\n``, ``\\x`` -> ``x``; a backslash is doubled."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\":
            if i + 1 >= len(text):
                raise Refused("a replacement ending in a backslash (Java rejects it)")
            out.append(_literal(text[i + 1]))
            i += 2
        elif c == "$":
            j = i + 1
            if j >= len(text) or not text[j].isdigit() or not text[j].isascii():
                raise Refused("a '$' in a replacement not followed by a group number (Java rejects it or reads a name)")
            number = int(text[j])
            if number > groups:
                raise Refused(f"the replacement refers to group {number}, the pattern has {groups} (Java fails)")
            j += 1
            while j < len(text) and text[j].isdigit() and text[j].isascii() and number * 10 + int(text[j]) <= groups:
                number = number * 10 + int(text[j])
                j += 1
            if number > 9:
                raise Refused("a replacement group number above 9 (RE2's rewrite has \\0-\\9)")
            out.append(f"\\{number}")
            i = j
        else:
            out.append(_literal(c))
            i += 1
    return "".join(out)


def _literal(c: str) -> str:
    return "\\\\" if c == "\\" else c


def numbered_groups(re2: str) -> str:
    """``re2`` with the whole match as group ``g0`` and each capturing group named ``g1``, ``g2``
    ... (Arrow's ``extract_regex`` needs names), in order of their opening parenthesis."""
    out: list[str] = ["(?P<g0>"]
    count = 0
    i = 0
    in_class = False
    while i < len(re2):
        c = re2[i]
        if c == "\\":
            out.append(re2[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if re2.startswith("[^]", i) or re2.startswith("[]", i):
                raise Refused("a ']' first in a regular expression class")
        elif c == "(" and not re2.startswith("(?", i):
            count += 1
            out.append(f"(?P<g{count}>")
            i += 1
            continue
        out.append(c)
        i += 1
    out.append(")")
    return "".join(out)
