"""Every operation in the OpenAPI schema, called for real, answers exactly what the schema documents.

Why: the schema is what clients generate code from, so it has to be the behaviour. Each operation gets one
successful request against the real services (the fuzzers' world: a project with an ingested code dataset, the
demo rulebook, people, credits, a past search, an ingest job, a query session) and a few cheap documented
errors (401 without a key, 404 for an unknown id, 400 for an unknown field, 403 for a key without the scope).
Every body is validated against the schema documented for its status and media type, with documented objects
closed (tests/config/contract.py): an undocumented field, a missing required one or a wrong type fails.

A new endpoint without a case here fails `test_every_schema_operation_has_a_contract_case`, so no operation
goes unchecked. Each request runs in a rolled-back savepoint, so a delete or a revoke does not change the world
the next case sees.
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.config.contract import check_response, strict, violations
from tests.hardening.conftest import world  # noqa: F401 - fixture: the fuzzers' world
from tests.hardening.fuzz_world import InProcessRequests

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass
class Call:
    """One request: path parameters come from the world unless `path` overrides them."""

    status: int
    body: Any = None
    query: dict[str, Any] = field(default_factory=dict)
    path: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    multipart: bool = False
    auth: str = "key"  # key | none | query_only (a key with the `query` scope only)
    setup: Callable[[Any], None] | None = None  # runs inside the savepoint, before the request


def _staff(world: Any) -> None:
    from accounts.models import User

    User.objects.filter(pk=world.user_id).update(is_staff=True)


def _zip() -> io.BytesIO:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("pkg/util.py", "def add(a, b):\n    return a + b\n")
    buf.seek(0)
    buf.name = "repo.zip"
    return buf


_PUBLIC_GIT = "https://93.184.216.34/org/repo.git"  # a public address literal: passes the SSRF guard, never fetched


_ORIGINAL = b"%PDF-1.4\n% a contract case's original\n%%EOF\n"
_ORIGINAL_SHA256 = hashlib.sha256(_ORIGINAL).hexdigest()


def _with_original(world: Any) -> None:
    """A document of the fuzz project keeps an original, as an uploaded PDF's does."""
    from search.models import Document, DocumentOriginal

    document = Document.objects.filter(dataset__project__slug=world.ids["slug"][0]).order_by("pk").first()
    DocumentOriginal.objects.create(document=document, sha256=_ORIGINAL_SHA256, size=len(_ORIGINAL), data=_ORIGINAL)


def _with_source(world: Any) -> None:
    """The fuzz project's own dataset follows a git source (a token stored), with one finished sync."""
    from search.models import Dataset, IngestJob
    from search.sources import spec, sync

    dataset = Dataset.objects.get(pk=world.ids["dataset_id"][1])
    parsed = spec.parse_source({"type": "git", "url": _PUBLIC_GIT}, user=None, dataset_kind=dataset.kind)
    sync.set_source(user=None, dataset=dataset, spec=parsed, interval_s=3600, token="t0ken")
    IngestJob.objects.create(dataset=dataset, source=_PUBLIC_GIT, kind="code", status="done",
                             options={"origin": "sync", "trigger": "manual"},
                             result={"mode": "full", "to": "c" * 40, "changed": ["a.py"], "deleted": []})


_QUEUED_JOB = "c0ffee00-0000-4000-8000-000000000001"


def _queued_job(world: Any) -> None:
    """A job of the fuzz project's own dataset that no worker runs: a cancel ends it at once."""
    from search.models import IngestJob

    IngestJob.objects.update_or_create(pk=_QUEUED_JOB, defaults={
        "dataset_id": world.ids["dataset_id"][1], "source": "push", "kind": "code", "options": {"origin": "push"},
        "status": "pending", "cancel_requested": False, "error": ""})


_SIGNUP_TOKEN = "contract-signup-token-0123456789"


def _pending_signup(world: Any) -> None:
    """A sign-up waiting for its emailed link (the token the confirm call sends)."""
    import hashlib
    from datetime import timedelta

    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from accounts.models import PendingSignup

    PendingSignup.objects.create(email="contract-confirm@example.com", password_hash=make_password("a-long-pass-9"),
                                 token_hash=hashlib.sha256(_SIGNUP_TOKEN.encode()).hexdigest(),
                                 expires_at=timezone.now() + timedelta(hours=1))


def _other_dataset_id(world: Any) -> int:
    from search.models import Dataset

    return Dataset.objects.get(project__slug=world.ids["slug"][2], name="notes").pk


# operationId -> its successful call (first) and the cheap documented errors worth checking too
SUCCESS: dict[str, Callable[[Any], Call]] = {
    "credits": lambda w: Call(200, query={"limit": "5"}),
    "context_ingest_job": lambda w: Call(200),
    "context_ingest_job_cancel": lambda w: Call(200, {}, path={"job_id": _QUEUED_JOB}, setup=_queued_job),
    "keys_list": lambda w: Call(200),
    "keys_create": lambda w: Call(201, {"name": "contract", "scopes": ["query"], "expires_in_days": 5}),
    "keys_revoke": lambda w: Call(200),
    "me": lambda w: Call(200),
    "people_discover": lambda w: Call(200, query={"limit": "5"}),
    "people_profile": lambda w: Call(200, query={"search_id": w.ids["search_id"][0]}),
    "people_public_profile": lambda w: Call(200),
    "people_unlock_contact": lambda w: Call(200, {"search_id": w.ids["search_id"][0]},
                                            headers={"Idempotency-Key": "contract-unlock"}),
    "projects_list": lambda w: Call(200),
    "projects_create": lambda w: Call(201, {"name": "Contract project"}),
    "projects_retrieve": lambda w: Call(200),
    "projects_update": lambda w: Call(200, {"name": "Renamed"}),
    "projects_destroy": lambda w: Call(204),
    "rules_answer": lambda w: Call(200, {"q": "what does grappled do?"}, path={"slug": w.ids["slug"][1]}),
    "datasets_list": lambda w: Call(200),
    "datasets_create": lambda w: Call(201, {"name": "contract-docs", "kind": "web"}),
    "datasets_retrieve": lambda w: Call(200, path={"dataset_id": w.ids["dataset_id"][1]}, setup=_with_source),
    "datasets_update": lambda w: Call(200, {"description": "checked"}, path={"dataset_id": w.ids["dataset_id"][1]}),
    "datasets_destroy": lambda w: Call(204, path={"dataset_id": w.ids["dataset_id"][1]}),
    "documents_list": lambda w: Call(200, query={"limit": "2"}, path={"dataset_id": w.ids["dataset_id"][1]}),
    "documents_push": lambda w: Call(202, {"documents": [{"external_id": "c1", "path": "notes/c1.md",
                                                          "text": "# Contract\nA pushed note."}]},
                                     path={"dataset_id": w.ids["dataset_id"][1]}),
    "documents_delete_batch": lambda w: Call(200, {"paths": ["billing/ledger.py", "nope.py"]},
                                             path={"dataset_id": w.ids["dataset_id"][1]}),
    "documents_delete": lambda w: Call(204, path={"dataset_id": w.ids["dataset_id"][1],
                                                  "external_id": "billing/ledger.py"}),
    "documents_upload": lambda w: Call(202, {"file": _zip()}, multipart=True,
                                       path={"dataset_id": w.ids["dataset_id"][1]}),
    "datasets_source_set": lambda w: Call(200, {"source": {"type": "git", "url": _PUBLIC_GIT, "ref": "main"},
                                                "interval_s": 3600, "token": "t0ken"},
                                          path={"dataset_id": w.ids["dataset_id"][1]}),
    "datasets_source_delete": lambda w: Call(204, path={"dataset_id": w.ids["dataset_id"][1]}, setup=_with_source),
    "datasets_sync": lambda w: Call(202, path={"dataset_id": w.ids["dataset_id"][1]}, setup=_with_source),
    "datasets_syncs": lambda w: Call(200, path={"dataset_id": w.ids["dataset_id"][1]}, setup=_with_source),
    "context_ingest": lambda w: Call(202, {"dataset": "contract-src", "kind": "code", "source": w.ids["source"][0]},
                                     setup=_staff),
    "members_list": lambda w: Call(200),
    "members_create": lambda w: Call(201, {"email": w.ids["email"][0], "role": "viewer"}),
    "members_update": lambda w: Call(200, {"role": "viewer"}),
    "members_destroy": lambda w: Call(204),
    "context_query": lambda w: Call(200, {"q": "deduct credits from a wallet", "top_k": 3}),
    "context_locate": lambda w: Call(200, {"task": "deduct credits from a wallet", "top_files": 3}),
    "originals_read": lambda w: Call(200, path={"sha256": _ORIGINAL_SHA256}, setup=_with_original),
    "code_definition": lambda w: Call(200, {"symbol": "deduct_credits"}),
    "code_references": lambda w: Call(200, {"symbol": "Wallet", "limit": 5}),
    "code_outline": lambda w: Call(200, {"path": "billing/ledger.py"}),
    "code_files": lambda w: Call(200, {"glob": "**/*.py"}),
    "code_grep": lambda w: Call(200, {"pattern": r"def \w+", "regex": True, "max_matches": 3}),
    "rules_search": lambda w: Call(200, {"q": "what does grappled do?", "top_k": 3},
                                   path={"slug": w.ids["slug"][1]}),
    "shares_list": lambda w: Call(200),
    "shares_create": lambda w: Call(201, {"dataset_id": _other_dataset_id(w)}, path={"slug": w.ids["slug"][0]}),
    "shares_revoke": lambda w: Call(200),
    "context_feedback": lambda w: Call(201, {"chunk_id": w.ids["chunk_id"][0], "relevance": 2}),
    "people_search": lambda w: Call(200, {"query": "backend engineers in pune"},
                                    headers={"Idempotency-Key": "contract-search"}),
    "people_search_retrieve": lambda w: Call(200),
    "signup": lambda w: Call(202, {"email": "contract-new@example.com", "password": "a-long-pass-phrase-9"},
                             auth="none"),
    "signup_confirm": lambda w: Call(201, {"token": _SIGNUP_TOKEN, "password": "a-long-pass-9"}, auth="none",
                                     setup=_pending_signup),
}


@pytest.fixture(scope="module")
def spec(django_db_setup, django_db_blocker) -> dict[str, Any]:
    """The schema as served at /api/schema/ (JSON)."""
    with django_db_blocker.unblock():
        resp = APIClient().get("/api/schema/?format=json")
    assert resp.status_code == 200
    return resp.json()


def _operations() -> list[tuple[str, str, str]]:
    """(operationId, method, path) for every operation, read from the generator the endpoint serves."""
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return sorted((op["operationId"], method, path) for path, item in schema["paths"].items()
                  for method, op in item.items() if method in METHODS)


def _op(spec: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    return spec["paths"][path][method]


def _url(path: str, spec_op: dict[str, Any], world: Any, overrides: dict[str, Any]) -> str:
    ids = world.ids
    fill = {"slug": ids["slug"][0], "person_id": ids["person_id"][0], "search_id": ids["search_id"][0],
            "job_id": ids["job_id"][0], "session_id": ids["session_id"][0], "key_id": ids["key_id"][0],
            "share_id": ids["share_id"][0], "dataset_id": ids["dataset_id"][0], "member_id": ids["member_id"][0],
            "external_id": ids["external_id"][0], **overrides}
    for p in spec_op.get("parameters", []):
        if p["in"] == "path":
            path = path.replace("{" + p["name"] + "}", str(fill[p["name"]]))
    return path


def _client(world: Any, auth: str) -> APIClient:
    client = APIClient()
    if auth == "key":
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {world.secret}")
    elif auth == "query_only":
        from accounts.apikeys import issue_api_key
        from accounts.models import User

        secret = issue_api_key(user=User.objects.get(pk=world.user_id), name="q", scopes=["query"]).secret
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def _send(world: Any, spec: dict[str, Any], method: str, path: str, call: Call) -> tuple[int, str, bytes]:
    """Send one call in a rolled-back savepoint; (status, content type, body)."""
    op = _op(spec, method, path)
    with InProcessRequests():
        if call.setup:
            call.setup(world)
        client = _client(world, call.auth)
        url = _url(path, op, world, call.path)
        headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in call.headers.items()}
        if method == "get":
            resp = client.get(url, call.query, **headers)
        elif call.multipart:
            for value in call.body.values():  # the same file may be sent again by an error case
                if hasattr(value, "seek"):
                    value.seek(0)
            resp = getattr(client, method)(url, call.body, format="multipart", **headers)
        else:
            query = "?" + "&".join(f"{k}={v}" for k, v in call.query.items()) if call.query else ""
            resp = getattr(client, method)(url + query, call.body, format="json", **headers)
        body = b"".join(resp.streaming_content) if getattr(resp, "streaming", False) else resp.content
        return resp.status_code, resp.get("Content-Type", ""), body


def _assert_conforms(spec: dict[str, Any], method: str, path: str, call: Call, got: tuple[int, str, bytes]) -> None:
    op = _op(spec, method, path)
    status, ctype, body = got
    assert status == call.status, f"{op['operationId']}: expected {call.status}, got {status}: {body[:300]!r}"
    problems = check_response(spec, op, status, ctype, body)
    assert not problems, f"{op['operationId']} {status} does not match its schema:\n" + "\n".join(problems[:20])


OPERATIONS = _operations()


@pytest.mark.parametrize("operation_id,method,path", OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_a_successful_response_matches_its_documented_schema(world, spec, db, operation_id, method, path):
    assert operation_id in SUCCESS, f"no contract case for {operation_id} ({method.upper()} {path}): add one"
    call = SUCCESS[operation_id](world)
    _assert_conforms(spec, method, path, call, _send(world, spec, method, path, call))


@pytest.mark.parametrize("operation_id,method,path", OPERATIONS, ids=[o[0] for o in OPERATIONS])
def test_documented_errors_match_the_error_schema(world, spec, db, operation_id, method, path):
    """401 without a key, 404 for an unknown path id, 400 for an unknown field, 403 for a key without the scope:
    each is a documented status of the operation and its body is exactly the documented error shape."""
    op = _op(spec, method, path)
    good = SUCCESS[operation_id](world)
    checked = 0
    if "401" in op["responses"]:
        call = Call(401, good.body, good.query, good.path, good.headers, good.multipart, auth="none")
        _assert_conforms(spec, method, path, call, _send(world, spec, method, path, call))
        checked += 1
    path_params = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
    if path_params:
        name = path_params[-1]
        unknown = {"slug": "no-such-project", "person_id": "00000000-0000-0000-0000-000000000000",
                   "search_id": "00000000-0000-0000-0000-000000000000",
                   "job_id": "00000000-0000-0000-0000-000000000000",
                   "session_id": "00000000-0000-0000-0000-000000000000", "external_id": "no/such/doc",
                   "sha256": "0" * 64}.get(name, 999999)
        call = Call(404, good.body, good.query, {**good.path, name: unknown}, good.headers, good.multipart)
        _assert_conforms(spec, method, path, call, _send(world, spec, method, path, call))
        checked += 1
    if "application/json" in (op.get("requestBody") or {}).get("content", {}) and isinstance(good.body, dict):
        call = Call(400, {**good.body, "zz_unknown": 1}, good.query, good.path, good.headers, auth=good.auth)
        _assert_conforms(spec, method, path, call, _send(world, spec, method, path, call))
        checked += 1
    if good.auth == "key" and _needs_more_than_query(method, path):
        call = Call(403, good.body, good.query, good.path, good.headers, good.multipart, auth="query_only")
        _assert_conforms(spec, method, path, call, _send(world, spec, method, path, call))
        checked += 1
    assert checked, f"{operation_id}: no error status was checked"


def _needs_more_than_query(method: str, path: str) -> bool:
    """Whether the view needs a scope other than `query` (read from the view, as the permission does)."""
    from django.urls import resolve

    concrete = path.replace("{slug}", "s").replace("{dataset_id}", "1").replace("{external_id}", "x").replace("{sha256}", "0" * 64)
    for name in ("person_id", "search_id", "job_id", "session_id"):
        concrete = concrete.replace("{" + name + "}", "00000000-0000-0000-0000-000000000000")
    for name in ("key_id", "share_id", "member_id"):
        concrete = concrete.replace("{" + name + "}", "1")
    view = resolve(concrete).func.view_class
    scope = getattr(view, "required_scope", None)
    if isinstance(scope, dict):
        scope = scope.get(method.upper())
    return scope not in (None, "query")


def test_every_schema_operation_has_a_contract_case():
    assert {o[0] for o in OPERATIONS} == set(SUCCESS)


def test_every_error_status_an_operation_documents_uses_the_one_error_schema(spec):
    """So the error checks above speak for every documented error, not just the ones sent."""
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in METHODS:
                continue
            for status, resp in op["responses"].items():
                if int(status) >= 400:
                    ref = resp["content"]["application/json"]["schema"]
                    assert ref == {"$ref": "#/components/schemas/Error"}, (method, path, status)


# ----------------------------------------------------------------------------- the checker can fail
def _schema_of(spec: dict[str, Any], operation_id: str, status: str = "200") -> tuple[dict, dict]:
    for item in spec["paths"].values():
        for method, op in item.items():
            if method in METHODS and op["operationId"] == operation_id:
                return op, strict(op["responses"][status]["content"]["application/json"]["schema"], spec)
    raise LookupError(operation_id)


def test_the_checker_fails_an_undocumented_field_a_missing_field_and_a_wrong_type(spec):
    op, schema = _schema_of(spec, "credits")
    good = {"balance": 3, "entries": [{"id": 1, "delta": 3, "balance_after": 3, "reason": "grant",
                                       "reference_type": "", "reference_id": "", "created_at": "2026-01-01T00:00:00Z"}]}
    assert violations(schema, good) == []
    extra = {**good, "secret_field": 1}
    assert any("secret_field" in v for v in violations(schema, extra))
    nested = {**good, "entries": [{**good["entries"][0], "user_id": 7}]}
    assert any("user_id" in v for v in violations(schema, nested))
    missing = {"entries": good["entries"]}
    assert any("balance" in v for v in violations(schema, missing))
    wrong = {**good, "balance": "3"}
    assert any("balance" in v for v in violations(schema, wrong))
    bad_format = {**good, "entries": [{**good["entries"][0], "created_at": "yesterday"}]}
    assert violations(schema, bad_format)


def test_the_checker_fails_an_extra_field_in_an_error_body_and_an_undocumented_status(spec):
    import json

    op, _ = _schema_of(spec, "credits")
    ok = json.dumps({"code": "not_found", "detail": "x"}).encode()
    assert check_response(spec, op, 404, "application/json", ok) == []
    leaky = json.dumps({"code": "not_found", "detail": "x", "trace": "..."}).encode()
    assert check_response(spec, op, 404, "application/json", leaky)
    with pytest.raises(AssertionError, match="not documented"):
        check_response(spec, op, 418, "application/json", ok)
    with pytest.raises(AssertionError, match="media type"):
        check_response(spec, op, 200, "text/html", b"<p>")


def test_the_checker_reads_nullable_and_closes_nested_objects(spec):
    op, schema = _schema_of(spec, "me")
    me = {"id": 1, "email": "a@example.com", "name": "", "is_staff": False, "balance": 0, "projects": [],
          "key": None}
    assert violations(schema, me) == []
    assert violations(schema, {**me, "key": {"prefix": "p", "name": "n", "scopes": [], "projects": None,
                                             "expires_at": None, "hash": "h"}})


def test_the_checker_reads_an_event_stream(spec):
    op = next(op for item in spec["paths"].values() for m, op in item.items()
              if m in METHODS and op["operationId"] == "rules_answer")
    good = b'event: search\ndata: {"a": 1}\n\nevent: complete\ndata: {}\n\n'
    assert check_response(spec, op, 200, "text/event-stream; charset=utf-8", good) == []
    assert check_response(spec, op, 200, "text/event-stream", b'event: gossip\ndata: {}\n\n')
    assert check_response(spec, op, 200, "text/event-stream", b"event: token\ndata: not json\n\n")
