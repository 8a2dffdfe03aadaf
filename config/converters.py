"""URL converters for ids: `<id:key_id>` takes 1-18 ASCII digits, so a path id always fits Postgres bigint.

Why not Django's `<int:...>`: it matches any length, and an id past 64 bits reached Postgres as
`bigint out of range` (a 500). With this converter such a path simply does not match: a 404.
"""
from __future__ import annotations

from django.urls import register_converter


class IdConverter:
    regex = "[0-9]{1,18}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(int(value))


register_converter(IdConverter, "id")
