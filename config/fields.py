"""Input types that every request shape is built from, so an endpoint is safe by construction.

Why one module: bad input used to be caught case by case (people search checked its query for NUL,
/api/credits parsed its own `limit`), and each new endpoint had to remember every rule. Here:
- text refuses non-strings, NUL and lone surrogates, which Postgres text/jsonb, the tokenizer and the
  Qdrant client cannot take (`TextField`, `check_text`);
- integers accept JSON integers or ASCII digit strings only (Python's int() also takes '²'-free but
  '١٢' and fullwidth digits) and are bounded, 64-bit by default, so nothing reaches Postgres as
  `bigint out of range` (`IntField`, `parse_int`);
- flags are JSON true/false only (`FlagField`), numbers JSON numbers only (`NumberField`);
- a request shape rejects fields it does not know (`InputSerializer`): an extra field once rode
  along on a paid people search, ignored and charged.
Every failure is a 400 {code: invalid, detail, field}.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from rest_framework import serializers

from config.errors import BadInput
from config.text import bad_text_reason

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_ASCII_INT = re.compile(r"[+-]?[0-9]{1,19}")
def check_text(value: str, *, field: str | None) -> str:
    """The same rule for text that does not come through a serializer (query strings, headers, forms)."""
    reason = bad_text_reason(value)
    if reason:
        raise BadInput(f"Text {reason}.", field=field, code="invalid_character")
    return value


def parse_int(value: Any, *, field: str | None, lo: int = INT64_MIN, hi: int = INT64_MAX) -> int:
    """The one integer parser: JSON ints (not booleans) or ASCII digit strings, within [lo, hi]."""
    if isinstance(value, bool):
        raise BadInput("Must be an integer, not a boolean.", field=field)
    if isinstance(value, str):
        text = value.strip()
        if not _ASCII_INT.fullmatch(text):
            raise BadInput("Must be an integer written with the digits 0-9.", field=field)
        value = int(text)
    if not isinstance(value, int):
        raise BadInput("Must be an integer.", field=field)
    if not lo <= value <= hi:
        raise BadInput(f"Must be between {lo} and {hi}.", field=field)
    return value


class TextField(serializers.CharField):
    """A CharField that accepts only JSON strings (form and query values are strings already), without
    NUL or lone surrogates."""

    default_error_messages = {"not_text": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
        reason = bad_text_reason(data)
        if reason:
            raise serializers.ValidationError(f"Text {reason}.", code="invalid_character")
        return super().to_internal_value(data)


class FlagField(serializers.BooleanField):
    """A BooleanField that accepts only JSON true/false (and null where allowed), not "", "yes", "1" or 1."""

    default_error_messages = {"not_flag": "Must be true or false."}

    def validate_empty_values(self, data: Any) -> tuple[bool, Any]:
        if data == "":  # DRF reads "" as null for a nullable BooleanField
            self.fail("not_flag")
        return super().validate_empty_values(data)

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("not_flag")
        return data


class IntField(serializers.IntegerField):
    """An IntegerField parsed by `parse_int`: bounded (64-bit unless narrower bounds are given), ASCII only.

    A JSON body must send a JSON integer (the schema says so; "5" is a 400); a query string or form, whose
    values are all text, may send the digits, and an empty value there is a 400, not the default."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", INT64_MIN)
        kwargs.setdefault("max_value", INT64_MAX)
        super().__init__(**kwargs)

    def get_value(self, dictionary: Any) -> Any:
        # DRF reads a present-but-empty form or query value (`?limit=`) as absent and uses the default; here it is
        # a 400 like any other value that is not an integer
        if isinstance(dictionary, QueryDict) and dictionary.get(self.field_name, None) == "":
            return ""
        return super().get_value(dictionary)

    def to_internal_value(self, data: Any) -> int:
        lo = self.min_value if self.min_value is not None else INT64_MIN
        hi = self.max_value if self.max_value is not None else INT64_MAX
        if isinstance(data, str) and not isinstance(getattr(self.root, "initial_data", None), QueryDict):
            raise serializers.ValidationError("Must be an integer.")
        try:
            return parse_int(data, field=self.field_name, lo=lo, hi=hi)
        except BadInput as exc:
            raise serializers.ValidationError(exc.detail) from None


class NumberField(serializers.FloatField):
    """A FloatField that accepts only JSON numbers (not booleans, and not strings, which FloatField would parse:
    "0.5", "nan", "1e999"), finite and within its bounds."""

    default_error_messages = {"not_number": "Must be a number."}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("not_number")
        return super().to_internal_value(data)


class InputSerializer(serializers.Serializer):
    """Base of every request shape: a field it does not declare is a 400 naming that field.

    `aliases` lists extra accepted names that the view maps itself (e.g. rules' `query` for `q`).
    """

    aliases: frozenset[str] = frozenset()

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise serializers.ValidationError({"non_field_errors": ["The body must be a JSON object."]})
        unknown = sorted(set(data) - set(self.fields) - set(self.aliases))
        if unknown:
            raise serializers.ValidationError({str(unknown[0]): [f"Unknown field {unknown[0]!r}."]})
        return super().to_internal_value(data)


class TextListField(serializers.ListField):
    """A list of texts where a single string is also accepted (`"repo": "shop"` = `["shop"]`)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("child", TextField(max_length=1000))
        kwargs.setdefault("max_length", 100)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        return super().to_internal_value([data] if isinstance(data, str) else data)
