"""Path globs (`search/**/*.py`) as SQL Postgres can run cheaply and safely.

Why a module of its own: a glob becomes a Postgres regular expression, and two things went wrong when the
glob text was passed through: bracket expressions that Python accepts are invalid for Postgres (`[[:foo:]]`,
`[[.x.]]`: a 500), and a glob of a few hundred `*` made one query take seconds, growing with the number of
chunks a project can see. So a glob is bounded (length, wildcards), every character of a class is escaped
one by one (no POSIX class, collating element or equivalence class can be formed), runs of `*` collapse,
and the literal text before the first wildcard becomes a `LIKE 'prefix%'` that the path index serves,
leaving the regex to check only the rows under that prefix. The request's statement_timeout
(config/middleware.py) bounds what is left.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from config.errors import BadInput

GLOB_CHARS = frozenset("*?[")
MAX_GLOB_LENGTH = 256
MAX_GLOB_WILDCARDS = 10
MAX_CLASS_RANGE = 128  # a range whose ends are not letters or digits is spelled out, up to this many characters
FIELD = "filters.path"


@dataclass(frozen=True)
class Glob:
    pattern: str
    prefix: str  # literal text before the first wildcard
    like: str  # `prefix%` with LIKE's own metacharacters escaped (backslash is LIKE's default escape)
    regex: str  # anchored, for Postgres `~` (and Python `re`: the same syntax subset)


def _lit(ch: str) -> str:
    """One literal character, the same in Postgres AREs and Python: `\\` + anything not a letter or digit."""
    return ch if ch.isalnum() or ch in "_/" else "\\" + ch


def _bad(pattern: str, why: str) -> BadInput:
    return BadInput(f"Malformed glob {pattern[:80]!r}: {why}.", field=FIELD)


def _class(pattern: str, i: int) -> tuple[str, int]:
    """Translate the bracket expression starting at pattern[i] == '['; return (regex, index after ']')."""
    j = i + 1
    negate = j < len(pattern) and pattern[j] in "!^"
    j += negate
    items: list[str] = []
    first = True
    while True:
        if j >= len(pattern):
            raise _bad(pattern, "'[' without ']'")
        ch = pattern[j]
        if ch == "]" and not first:
            break
        first = False
        if j + 2 < len(pattern) and pattern[j + 1] == "-" and pattern[j + 2] != "]":
            lo, hi = ch, pattern[j + 2]
            if ord(lo) > ord(hi):
                raise _bad(pattern, f"range {lo}-{hi} is reversed")
            if lo.isalnum() and hi.isalnum() and lo.isascii() and hi.isascii():
                items.append(f"{lo}-{hi}")
            elif ord(hi) - ord(lo) < MAX_CLASS_RANGE:
                items.extend(_lit(chr(c)) for c in range(ord(lo), ord(hi) + 1))
            else:
                raise _bad(pattern, f"range {lo}-{hi} is too wide")
            j += 3
            continue
        items.append(_lit(ch))
        j += 1
    return "[" + ("^" if negate else "") + "".join(items) + "]", j + 1


def compile_glob(pattern: str) -> Glob:
    """`**` any depth, `*`/`?` within one segment, `[...]`/`[!...]` classes; everything else literal."""
    if len(pattern) > MAX_GLOB_LENGTH:
        raise BadInput(f"A path glob may be at most {MAX_GLOB_LENGTH} characters.", field=FIELD)
    pattern = re.sub(r"\*{3,}", "**", pattern)
    out, i, wildcards, prefix_end = ["^"], 0, 0, None
    while i < len(pattern):
        ch = pattern[i]
        if ch in GLOB_CHARS:
            wildcards += 1
            prefix_end = i if prefix_end is None else prefix_end
        if ch == "*":
            if pattern.startswith("**/", i):
                out.append("(.*/)?")
                i += 3
            elif pattern.startswith("**", i):
                out.append(".*")
                i += 2
            else:
                out.append("[^/]*")
                i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            regex, i = _class(pattern, i)
            out.append(regex)
        elif ch == "]":
            raise _bad(pattern, "']' without '['")
        else:
            out.append(_lit(ch))
            i += 1
    if wildcards > MAX_GLOB_WILDCARDS:
        raise BadInput(f"A path glob may use at most {MAX_GLOB_WILDCARDS} wildcards.", field=FIELD)
    out.append("$")
    regex = "".join(out)
    try:
        re.compile(regex)
    except re.error as exc:
        raise _bad(pattern, str(exc)) from None
    prefix = pattern[:prefix_end] if prefix_end is not None else pattern
    like = re.sub(r"([\\%_])", r"\\\1", prefix) + "%"
    return Glob(pattern=pattern, prefix=prefix, like=like, regex=regex)
