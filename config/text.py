"""Which text no store can hold. A leaf module: the JSON parser (loaded by DRF's settings while
config.errors is still importing) and the serializer fields both use it."""
from __future__ import annotations

import re

# NUL (Postgres text and jsonb refuse it) and lone UTF-16 surrogates (JSON "\ud800" decodes to one; no
# UTF-8 encoder takes it). Other control characters are legal text (form feeds live in real source files).
_BAD_TEXT = re.compile("[\x00\ud800-\udfff]")


def bad_text_reason(value: str) -> str | None:
    """Why `value` cannot be stored or tokenised, or None if it can."""
    m = _BAD_TEXT.search(value)
    if m is None:
        return None
    ch = m.group(0)
    if ch == "\x00":
        return "contains a NUL character"
    return "contains a lone surrogate (invalid Unicode)"
