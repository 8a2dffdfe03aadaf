"""Web security: every URL needs a login (bar a justified allowlist), user input is escaped on every page
that shows it, cross-site POSTs without a CSRF token are refused, and API keys are stored only hashed.

Why enumerate instead of listing URLs by hand: a new view added without `login_required` or with a
permissive DRF permission class is caught the day it is added, not when someone remembers to test it.
"""
from __future__ import annotations

import re
import uuid

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

PAYLOADS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(1)>')
ESCAPED = ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;")

# Reachable without a login, and why:
PUBLIC = {
    # the load balancer's probe: reports only up/down per dependency, no user data
    "healthz",
    # the login form itself (site and admin) and logging out (a no-op when logged out)
    "accounts/login/", "accounts/logout/", "admin/login/",
    # the forgotten-password flow must work logged out (it only ever emails the address on file)
    "accounts/password_reset/", "accounts/password_reset/done/", "accounts/reset/done/",
    # sign-up is for people without an account (ALLOW_SIGNUP; rate limited; creates nothing but the account, and
    # only from the emailed link's token)
    "accounts/signup/", "api/signup", "api/signup/confirm",
    # the OpenAPI description and its two viewers document the API; they hold no data, and every
    # operation they describe still requires a key
    "api/schema/", "api/docs/", "api/redoc/",
}
PUBLIC_PATTERNS = (
    # the password-reset link from the email: the token itself is the credential (Django checks it)
    re.compile(r"^accounts/reset/[^/]+/[^/]+/$"),
    # the sign-up link from the email: the token is the credential (accounts/signup.py checks it)
    re.compile(r"^accounts/signup/confirm/[^/]+$"),
)

_SAMPLES = ("1", str(uuid.UUID(int=7)), "accounts", "x", "x/y")


def _group_end(regex: str, start: int) -> int:
    depth, i = 0, start
    while i < len(regex):
        ch = regex[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError(regex)


def _concrete(regex: str) -> str:
    """A URL path matching `regex`, with every named group filled by a sample that matches it."""
    out, i = [], 0
    while i < len(regex):
        if regex.startswith("(?P<", i):
            end = _group_end(regex, i)
            inner = regex[regex.index(">", i) + 1:end]
            sample = next((s for s in _SAMPLES if re.fullmatch(inner, s)), None)
            if sample is None:
                first = inner.strip("()").split("|")[0]
                sample = first if re.fullmatch(inner, first) else "x"
            out.append(sample)
            i = end + 1
        elif regex[i] == "\\" and i + 1 < len(regex):
            out.append("" if regex[i + 1] == "Z" else regex[i + 1])
            i += 2
        elif regex[i] in "^$":
            i += 1
        else:
            out.append(regex[i])
            i += 1
    return "".join(out)


def all_url_paths() -> list[str]:
    """Every URL pattern in the project, as a concrete path that resolves back to it."""
    paths: list[str] = []

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            regex = prefix + p.pattern.regex.pattern.lstrip("^")
            if isinstance(p, URLResolver):
                walk(p.url_patterns, regex.removesuffix("\\Z"))
            elif isinstance(p, URLPattern):
                paths.append("/" + _concrete(regex))

    walk(get_resolver().url_patterns, "")
    return sorted(set(paths))


def test_url_enumeration_covers_api_pages_and_admin(db):
    paths = all_url_paths()
    names = {resolve(p).url_name for p in paths}  # every sample path resolves (no pattern silently skipped)
    for must in ("api-me", "api-context-query", "api-rules-answer", "people-unlock", "context-search", "rules-chunk",
                 "people-profile", "admin-dashboard", "home", "api-credits", "api-project-share"):
        assert must in names, must
    assert len(paths) > 40


def _is_public(path: str) -> bool:
    rel = path.lstrip("/")
    return rel in PUBLIC or any(rx.match(rel) for rx in PUBLIC_PATTERNS)


def test_anonymous_gets_401_json_on_api_and_login_redirect_on_pages(db):
    client = Client()
    problems = []
    checked = 0
    for path in all_url_paths():
        if _is_public(path):
            continue
        for method in ("get", "post"):
            resp = getattr(client, method)(path)
            checked += 1
            where = f"{method.upper()} {path} -> {resp.status_code}"
            if path == "/mcp" and method == "get":
                # refused before authentication so that no database connection is spent on a method that is never
                # served (docs/security.md, "Requests that end"); the answer carries nothing
                if resp.status_code != 405 or resp.json()["code"] != "method_not_allowed":
                    problems.append(where)
            elif path.startswith("/api/") or path == "/mcp":  # /mcp: the MCP server, Bearer keys like the API
                if resp.status_code not in (401, 403):
                    problems.append(where)
                elif "application/json" not in resp["Content-Type"] or "code" not in resp.json():
                    problems.append(where + " (not a JSON error)")
            elif resp.status_code == 405 and method == "post" and path.startswith("/admin/"):
                continue  # admin views refuse the method before anything else; nothing is served
            elif resp.status_code != 302:
                problems.append(where)
            else:
                loc = resp["Location"]
                if not (loc.startswith(settings.LOGIN_URL) or loc.startswith("/admin/login/") or loc == "/admin/"):
                    problems.append(f"{where} redirects to {loc}")
    assert checked > 80
    assert problems == []


def test_public_allowlist_entries_really_are_reachable(db):
    """An allowlist entry that no longer exists (or needs a login) would hide a regression; keep it honest."""
    client = Client()
    for rel in sorted(PUBLIC):
        if rel.endswith("logout/"):  # POST-only since Django 5; logging out of nothing lands on a page
            assert client.post("/" + rel).status_code in (200, 302), rel
            continue
        if rel in ("api/signup", "api/signup/confirm"):  # POST-only: an empty body is a 400 naming a field
            resp = client.post("/" + rel, {}, content_type="application/json")
            assert resp.status_code == 400 and resp.json()["field"], rel
            continue
        resp = client.get("/" + rel)
        assert resp.status_code in (200, 503), rel  # healthz is 503 when a dependency is down


# --------------------------------------------------------------------------- XSS
def _assert_escaped(resp, *, expect_shown: bool = True) -> None:
    body = resp.content.decode()
    for raw in PAYLOADS:
        assert raw not in body
    if expect_shown:
        assert any(e in body for e in ESCAPED), "the payload should be displayed (escaped)"


@pytest.fixture
def xss_world(make_user, make_project, tmp_path):
    """A member whose project, code, rulebook and people all carry the payloads."""
    from search.engine.applier import apply_outbox
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    user = make_user("xss@example.com", credits=20)
    project = make_project("xss", user)
    project.name = PAYLOADS[0] + " project"
    project.save()
    code = tmp_path / "code"
    code.mkdir()
    (code / "evil.py").write_text(
        'def render_banner(title):\n    """Banner: {} and {}."""\n    return title\n'.format(*PAYLOADS))
    ds = Dataset.objects.create(project=project, name=PAYLOADS[1], kind="code")
    start_ingest(job=IngestJob(dataset=ds, source=str(code), kind="code", options={"repo": "evil"}), sync=True)
    book = tmp_path / "book"
    book.mkdir()
    (book / "rules.md").write_text(
        "# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes zero while grappled {} here.\n"
        "The grappled condition ends when {} is incapacitated.\n".format(*PAYLOADS))
    rules = Dataset.objects.create(project=project, name="rules", kind="rules")
    start_ingest(job=IngestJob(dataset=rules, source=str(book), kind="rules",
                               options={"ruleset_id": "x", "book_id": "core"}),
                 sync=True)
    apply_outbox()
    client = Client()
    client.force_login(user)
    return user, project, client


def test_context_search_page_escapes_query_filters_results_and_pack(xss_world):
    _, project, client = xss_world
    resp = client.get("/search/", {"project": "xss", "q": "render banner " + PAYLOADS[0], "lang": PAYLOADS[1],
                                   "repo": PAYLOADS[0]})
    assert resp.status_code == 200
    _assert_escaped(resp)
    hit = client.get("/search/", {"project": "xss", "q": "render banner title"})
    assert "render_banner" in hit.content.decode()  # the code that carries the payload is shown ...
    _assert_escaped(hit)  # ... escaped, in the lines and in the pack
    err = client.get("/search/", {"project": "xss", "q": "banner", "path": "[" + PAYLOADS[0]})
    assert err.status_code == 400  # malformed glob: the error detail echoes the input
    _assert_escaped(err)


def test_home_and_page_project_lists_escape_project_names(xss_world):
    _, _, client = xss_world
    for path in ("/", "/search/", "/rules/"):
        resp = client.get(path)
        assert resp.status_code == 200, path
        _assert_escaped(resp)


def test_rules_page_escapes_question_answer_and_cited_section(xss_world):
    _, _, client = xss_world
    resp = client.get("/rules/", {"project": "xss", "q": "grappled speed " + PAYLOADS[1], "render": "1"})
    assert resp.status_code == 200
    _assert_escaped(resp)
    assert "grappled creature" in resp.content.decode()
    from search.models import Chunk

    chunk = Chunk.objects.filter(kind="rules", text__contains="<script>").first()
    page = client.get(f"/rules/chunk/{chunk.pk}")
    assert page.status_code == 200
    _assert_escaped(page)


def test_people_pages_escape_query_names_headlines_and_bio(xss_world):
    from people.models import Person, PersonProfile
    from tests.people.factory import embed_all, make_person

    user, _, client = xss_world
    person = make_person("Evil", cards=[{"title": PAYLOADS[0] + " engineer", "summary": "Java and Kafka services for payments",
                                         "company_norm": "acme", "intent_primary": "backend", "country": "india",
                                         "city": "bangalore"}],
                         profile={"open_to_work": True, "open_to_contact": True, "bio": PAYLOADS[1]})
    Person.objects.filter(pk=person.pk).update(display_name=PAYLOADS[0], headline=PAYLOADS[1])
    PersonProfile.objects.filter(person=person).update(bio=PAYLOADS[0])
    embed_all()
    page = client.get("/people/")
    key = re.search(r'name="idempotency_key" value="([^"]+)"', page.content.decode()).group(1)
    resp = client.post("/people/", {"query": "backend engineers in bangalore " + PAYLOADS[0], "idempotency_key": key})
    assert resp.status_code == 200
    _assert_escaped(resp)
    assert resp.content.decode().count("&lt;script&gt;") >= 2  # the query in the form and the person's name
    echo = client.post("/people/", {"query": "engineer", "preferred_locations": PAYLOADS[1],
                                    "idempotency_key": str(uuid.uuid4())})
    _assert_escaped(echo)
    sid = re.search(r"search_id=([0-9a-f-]{36})", resp.content.decode()).group(1)
    profile = client.get(f"/people/p/{person.pk}", {"search_id": sid})
    assert profile.status_code == 200
    _assert_escaped(profile)
    _assert_escaped(client.get("/people/discover"))
    bad = client.get("/people/", {"search_id": PAYLOADS[1]})  # echoed into the form and the error
    assert bad.status_code in (400, 404)
    _assert_escaped(bad, expect_shown=False)


def test_feedback_redirect_refuses_other_hosts(xss_world):
    """`next` is user input: a protocol-relative //evil.example must not turn the form into an open redirect."""
    _, _, client = xss_world
    for bad in ("//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        resp = client.post("/search/feedback", {"session_id": str(uuid.uuid4()), "chunk_id": "1",
                                                "relevance": "2", "next": bad})
        assert resp.status_code == 302
        assert resp["Location"] == "/search/", bad
    ok = client.post("/search/feedback", {"session_id": str(uuid.uuid4()), "chunk_id": "1", "relevance": "2",
                                          "next": "/search/?q=x"})
    assert ok["Location"] == "/search/?q=x"


# --------------------------------------------------------------------------- CSRF
def _csrf_client(user) -> tuple[Client, str]:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/people/")  # sets the csrftoken cookie, as a browser visiting the form would get it
    return client, client.cookies["csrftoken"].value


def test_page_forms_reject_cross_site_posts_without_token(make_user):
    from credits.ledger import get_balance
    from people.models import Search

    user = make_user("csrf@example.com", credits=5)
    client, token = _csrf_client(user)
    pid = uuid.uuid4()
    for path, data in (("/people/", {"query": "python developer"}),
                       (f"/people/p/{pid}", {"search_id": str(uuid.uuid4())}),
                       ("/search/feedback", {"session_id": str(uuid.uuid4()), "chunk_id": "1", "relevance": "1"}),
                       ("/accounts/logout/", {})):
        resp = client.post(path, data)
        assert resp.status_code == 403, path
    assert Search.objects.count() == 0
    assert get_balance(user=user) == 5
    # the same client with the token gets through (so the 403s above were CSRF, not something else)
    assert client.post("/search/feedback", {"session_id": str(uuid.uuid4()), "chunk_id": "1", "relevance": "1",
                                            "csrfmiddlewaretoken": token}).status_code == 302


def test_session_authenticated_api_rejects_posts_without_token(make_user):
    from accounts.models import ApiKey

    user = make_user("csrf-api@example.com", credits=5)
    client, token = _csrf_client(user)
    for path, body in (("/api/keys", {"name": "stolen"}), ("/api/projects", {"slug": "evil", "name": "Evil"}),
                       ("/api/search", {"query": "python developer"})):
        resp = client.post(path, body, content_type="application/json")
        assert resp.status_code == 403, path
        assert resp.json()["code"]
    assert not ApiKey.objects.filter(user=user).exists()
    ok = client.post("/api/keys", {"name": "mine"}, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201
    # a Bearer key is not ambient authority (a browser never attaches it), so it needs no CSRF token
    bearer = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {ok.json()['secret']}")
    assert bearer.post("/api/keys", {"name": "scripted"}, content_type="application/json").status_code == 201


# --------------------------------------------------------------------------- API keys at rest
def test_api_key_secrets_are_stored_only_hashed(make_user, client_for):
    from django.db import connection

    user = make_user("keys@example.com")
    api = client_for(user)
    secrets_ = [api.post("/api/keys", {"name": f"k{i}"}, format="json").json()["secret"] for i in range(3)]
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM accounts_apikey")
        rows = cur.fetchall()
    assert len(rows) == 4  # the fixture's key + three
    stored = " ".join(str(v) for row in rows for v in row)
    for secret in secrets_:
        random_part = secret.split("_", 2)[2]
        assert secret not in stored
        assert random_part not in stored
        assert random_part[:16] not in stored
    # and the hash is what authenticates: the secret still works
    from rest_framework.test import APIClient

    c = APIClient()
    c.credentials(HTTP_AUTHORIZATION=f"Bearer {secrets_[0]}")
    assert c.get("/api/me").status_code == 200
