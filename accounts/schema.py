"""The OpenAPI schema names each operation's scope, from the same declaration the permission checks.

Why here: `required_scope` on a view is what `accounts.permissions.KeyScopePermission` enforces, so the schema
reads it through the same `scope_for`; a client (or the generated scopes reference in docs/reference/scopes.md)
can never be told a different scope than the one a key is refused for.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema

from accounts.permissions import scope_for


def scope_label(needed: str | None | tuple[str, ...]) -> str:
    """How a scope declaration reads in the schema and the docs: one scope, "none", or every scope joined."""
    if needed is None:
        return "none"
    if isinstance(needed, str):
        return needed
    return "+".join(needed)


class ScopedAutoSchema(AutoSchema):
    """drf-spectacular's schema, plus `x-required-scope` and a sentence saying it on every operation."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        label = scope_label(scope_for(self.view, self.method))
        operation["x-required-scope"] = label
        sentence = ("An API key needs no particular scope." if label == "none"
                    else f"An API key needs the `{label}` scope.")
        description = operation.get("description", "")
        operation["description"] = f"{description}\n\n{sentence}".strip()
        return operation
