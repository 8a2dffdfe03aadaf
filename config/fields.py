"""Serializer fields for JSON request bodies that do not coerce other JSON types into text.

Why: DRF's CharField turns a JSON number into a string ({"query": 1.2e272} became the paid search
"1.2e+272"; {"name": 7} became a key named "7"). The OpenAPI schema says these fields are strings, and
the fuzzer (bench/fuzz_api.py, negative_data_rejection) counts such requests as invalid input that was
accepted. A wrong type is bad input: 400 {code: invalid, detail, field}.
"""
from __future__ import annotations

from typing import Any

from rest_framework import serializers


class TextField(serializers.CharField):
    """A CharField that accepts only JSON strings (form and query values are strings already)."""

    default_error_messages = {"not_text": "Must be a string."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text")
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
