"""Schema, docs without CDN, error shape for bad JSON, 429 with Retry-After."""
import json

import pytest
import yaml
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


def test_schema_renders_and_validates(api):
    from drf_spectacular.validation import validate_schema

    resp = api.get("/api/schema/?format=json")
    assert resp.status_code == 200
    schema = json.loads(resp.content)
    validate_schema(schema)  # raises on an invalid OpenAPI 3 document
    paths = schema["paths"]
    for p in ["/api/me", "/api/keys", "/api/keys/{key_id}", "/api/projects", "/api/projects/{slug}",
              "/api/projects/{slug}/datasets", "/api/projects/{slug}/shares",
              "/api/projects/{slug}/shares/{share_id}", "/api/credits"]:
        assert p in paths, p
    assert "ApiKeyAuth" in schema["components"]["securitySchemes"]
    assert "Error" in schema["components"]["schemas"]


def test_schema_is_valid_yaml_too(api):
    resp = api.get("/api/schema/")
    assert resp.status_code == 200
    assert yaml.safe_load(resp.content)["openapi"].startswith("3.")


def test_docs_served_from_local_static_not_cdn():
    resp = APIClient().get("/api/docs/")
    assert resp.status_code == 200
    html = resp.content.decode()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in html
    for cdn in ("cdn.jsdelivr", "unpkg.com", "cdnjs", "https://"):
        assert cdn not in html, cdn


def test_sidecar_static_file_exists():
    from django.contrib.staticfiles import finders

    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


@pytest.mark.parametrize("payload", ['{"name": ', "not json", '{"name": "a",}'])
def test_bad_json_is_400_json(api, payload):
    resp = api.post("/api/keys", data=payload, content_type="application/json")
    assert resp.status_code == 400
    body = resp.json()
    assert body["code"] == "malformed_json" and body["detail"]


def test_wrong_type_is_400_with_field(api):
    resp = api.post("/api/keys", {"name": ""}, format="json")
    assert resp.status_code == 400 and resp.json()["field"] == "name"


def test_unknown_api_path_is_json_404(api):
    resp = api.get("/api/nope/nothing")
    assert resp.status_code == 404 and resp.json()["code"] == "not_found"


def test_429_after_the_limit_with_retry_after(settings, user, api, make_user, client_for):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "api_keys": "3/m"}
    codes = [api.post("/api/keys", {"name": f"k{i}"}, format="json").status_code for i in range(3)]
    assert codes == [201, 201, 201]
    resp = api.post("/api/keys", {"name": "k4"}, format="json")
    assert resp.status_code == 429
    body = resp.json()
    assert body["code"] == "rate_limited" and body["detail"]
    retry = int(resp["Retry-After"])
    assert retry in range(1, 61) and body["retry_after"] == retry
    assert user.api_keys.count() == 4  # the fixture's key + 3; the refused one was not created
    # the limit is per user
    assert client_for(make_user()).post("/api/keys", {"name": "x"}, format="json").status_code == 201


def test_rate_limit_can_be_disabled(settings, api):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "api_keys": "1/m"}
    settings.RATELIMIT_ENABLE = False
    assert [api.post("/api/keys", {}, format="json").status_code for _ in range(3)] == [201] * 3
