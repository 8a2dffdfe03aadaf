"""Regular expressions that users write, run in RE2: time linear in the text, whatever the pattern.

Why: a pattern like `(a+)+$` makes a backtracking engine (Python's `re`) take time exponential in the text; a
web source's include/exclude patterns run against every link in the shared Celery worker, so one tenant's pattern
could stall every tenant's ingestion. RE2 has no backtracking: a match costs O(len(pattern) x len(text)), and
with both bounded here (MAX_PATTERN_CHARS, MAX_SUBJECT_CHARS) and RE2's memory budget fixed, every match a user's
pattern can cause is bounded. RE2 refuses what needs backtracking (backreferences, lookaround); those patterns
are refused when set, with a 400 that says so. Every place a user's or operator's pattern runs compiles it here
(docs/security.md, "Patterns"); path globs have their own bounds (search/engine/globs.py).
"""
from __future__ import annotations

import re2

from config.errors import BadInput

MAX_PATTERN_CHARS = 500
MAX_SUBJECT_CHARS = 8192  # longer texts (a URL past any browser's limit) are matched on their first 8 KiB
MAX_MEMORY_BYTES = 8 << 20


def _options(*, ignore_case: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's 400, not a line in the server's log
    options.max_mem = MAX_MEMORY_BYTES
    options.case_sensitive = not ignore_case
    return options


def compile_user_pattern(pattern: str, *, field: str, ignore_case: bool = False) -> re2._Regexp:
    """The pattern compiled in RE2, or BadInput naming `field`."""
    if not isinstance(pattern, str):
        raise BadInput(f"{field} must be a regular expression (text).", field=field)
    if len(pattern) > MAX_PATTERN_CHARS:
        raise BadInput(f"{field} is longer than {MAX_PATTERN_CHARS} characters.", field=field)
    try:
        return re2.compile(pattern, _options(ignore_case=ignore_case))
    except re2.error as exc:
        reason = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise BadInput(f"{field} is not a regular expression this server runs ({reason}); patterns run in RE2, "
                       f"which has no backreferences or lookaround.", field=field) from None


def matches(pattern: re2._Regexp, text: str) -> bool:
    """Whether `pattern` occurs in `text` (its first MAX_SUBJECT_CHARS characters)."""
    return pattern.search(text[:MAX_SUBJECT_CHARS]) is not None
