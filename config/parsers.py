"""The JSON parser every API view uses: bounded nesting, storable text, no NaN.

Why not DRF's JSONParser: `json.loads` recurses once per nesting level, so a body of a thousand `[`
raised RecursionError (a 500 on every JSON endpoint); and a "\\u0000" or a lone "\\ud800" anywhere in a
body reached Postgres or the tokenizer and failed there. Depth is measured on the raw text before
anything recursive runs; the parsed value is then walked once (bounded by that depth) for characters
no store can hold. Both are 400s with a `code`, like every other bad input.
"""
from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from config.errors import BadInput
from config.text import bad_text_reason

# A JSON string literal, unrolled so it is linear even on megabytes (no nested quantifier over one char).
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")


def json_depth(text: str, *, limit: int) -> int:
    """Nesting depth of a JSON text, counting only brackets outside strings; stops once past `limit`."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub('""', text))
    depth = deepest = 0
    for ch in brackets:
        depth += 1 if ch in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def find_bad_text(value: Any, *, path: str = "") -> tuple[str, str] | None:
    """(field path, reason) of the first key or string that cannot be stored, or None."""
    if isinstance(value, str):
        reason = bad_text_reason(value)
        return (path, reason) if reason else None
    if isinstance(value, dict):
        for key, item in value.items():
            here = f"{path}.{key}" if path else str(key)
            reason = bad_text_reason(key)
            if reason:
                return (path or "", f"a key {reason}")
            found = find_bad_text(item, path=here)
            if found:
                return found
    elif isinstance(value, list):
        for item in value:
            found = find_bad_text(item, path=path)
            if found:
                return found
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_text(text: str) -> Any:
    """Parse a JSON request body under the platform's rules (shared by the parser and non-DRF views)."""
    limit = settings.MAX_JSON_DEPTH
    if json_depth(text, limit=limit) > limit:
        raise BadInput(f"The JSON body is nested deeper than {limit} levels.", code="too_deep")
    try:
        data = json.loads(text, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise ParseError(f"JSON parse error - {exc}") from None
    found = find_bad_text(data)
    if found:
        field, reason = found
        raise BadInput(f"Text {reason}.", field=field or None, code="invalid_character")
    return data


class SafeJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        raw = stream.read() if stream is not None else b""
        try:
            text = raw.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            raise ParseError(f"The body is not valid {encoding}.") from None
        return parse_json_text(text)
