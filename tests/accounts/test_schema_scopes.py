"""Each OpenAPI operation names the scope an API key needs, read from the declaration the permission enforces."""
from __future__ import annotations

from drf_spectacular.generators import SchemaGenerator

from accounts.scopes import SCOPES


def _operations() -> dict[tuple[str, str], dict]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return {(path, method.upper()): op for path, item in schema["paths"].items() for method, op in item.items()
            if method in {"get", "post", "put", "patch", "delete"}}


def test_every_operation_names_its_scope() -> None:
    ops = _operations()
    assert len(ops) > 40
    allowed = {*SCOPES, "none"}
    missing = [k for k, op in ops.items() if not set(op.get("x-required-scope", "?").split("+")) <= allowed]
    assert missing == []


def test_the_schema_scope_is_the_one_the_permission_checks() -> None:
    ops = _operations()
    assert ops[("/api/projects/{slug}/query", "POST")]["x-required-scope"] == "query"
    assert ops[("/api/search", "POST")]["x-required-scope"] == "people"
    assert ops[("/api/projects/{slug}/datasets/{dataset_id}", "DELETE")]["x-required-scope"] == "ingest"
    assert ops[("/api/me", "GET")]["x-required-scope"] == "none"
    assert "`people` scope" in ops[("/api/search", "POST")]["description"]
