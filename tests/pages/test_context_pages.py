import re

import pytest

from search.models import Feedback, QuerySession

pytestmark = pytest.mark.django_db


def test_anonymous_is_redirected_to_login(client):
    for url in ("/search/", "/rules/", "/people/", "/people/discover", "/rules/stream?q=x"):
        resp = client.get(url)
        assert resp.status_code == 302 and resp["Location"].startswith("/accounts/login/"), url


def test_context_search_shows_file_line_spans_with_why(client, member, code_dataset):
    user, project = member
    client.force_login(user)
    resp = client.get("/search/", {"q": "where are credits deducted?", "project": project.slug})
    body = resp.content.decode()
    assert resp.status_code == 200
    assert "billing/ledger.py:4-9" in body  # the function's exact span
    assert 'class="ln">4</span>' in body  # rendered with line numbers
    assert "Why this result" in body and "reranker:" in body
    assert QuerySession.objects.filter(project=project, kind="context").count() == 1


def test_context_search_escapes_user_and_indexed_html(client, member, code_dataset):
    user, project = member
    client.force_login(user)
    payload = '<script>alert(1)</script>'
    resp = client.get("/search/", {"q": f"render page {payload}", "project": project.slug})
    body = resp.content.decode()
    assert payload not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "<b>title</b>" not in body  # indexed source is shown as text, never as markup


def test_context_search_bad_filter_is_a_clear_400(client, member, code_dataset):
    user, project = member
    client.force_login(user)
    resp = client.get("/search/", {"q": "credits", "project": project.slug, "path": "src/[abc"})
    assert resp.status_code == 400
    assert "Malformed glob" in resp.content.decode()


def test_context_search_other_project_is_404(client, member, make_user, make_project, code_dataset):
    user, _ = member
    make_project("secret", make_user("other@example.com"))
    client.force_login(user)
    resp = client.get("/search/", {"q": "credits", "project": "secret"})
    assert resp.status_code == 404


def test_feedback_form_records_a_judgment(client, member, code_dataset):
    user, project = member
    client.force_login(user)
    body = client.get("/search/", {"q": "deduct credits", "project": project.slug}).content.decode()
    session_id = re.search(r'name="session_id" value="([0-9a-f-]+)"', body).group(1)
    chunk_id = re.search(r'name="chunk_id" value="(\d+)"', body).group(1)
    resp = client.post("/search/feedback", {"session_id": session_id, "chunk_id": chunk_id, "relevance": "3",
                                            "next": "/search/"})
    assert resp.status_code == 302
    assert Feedback.objects.get(session_id=session_id, chunk_id=int(chunk_id)).relevance == 3
    bad = client.post("/search/feedback", {"session_id": "nope", "chunk_id": "x", "relevance": "9"},
                      HTTP_X_REQUESTED_WITH="fetch")
    assert bad.status_code == 400


def test_feedback_requires_csrf(member, code_dataset):
    from django.test import Client

    user, _ = member
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    resp = client.post("/search/feedback", {"session_id": "x", "chunk_id": "1", "relevance": "1"})
    assert resp.status_code == 403


def test_rules_page_without_javascript_renders_a_cited_answer(client, member, rules_dataset):
    user, project = member
    client.force_login(user)
    resp = client.get("/rules/", {"q": "what happens when I'm grappled?", "project": project.slug, "render": "1",
                                  "graph": "on"})
    body = resp.content.decode()
    assert resp.status_code == 200
    assert "speed becomes 0" in body
    assert re.search(r'href="/rules/chunk/\d+"', body)


def test_rules_stream_sends_events_in_order(client, member, rules_dataset):
    user, project = member
    client.force_login(user)
    resp = client.get("/rules/stream", {"q": "what happens when I'm grappled?", "project": project.slug})
    assert resp["Content-Type"].startswith("text/event-stream")
    events = re.findall(r"^event: (\w+)$", b"".join(resp.streaming_content).decode(), flags=re.M)
    assert events[:3] == ["search", "context", "generation"]
    assert events[-1] == "complete" and "token" in events


def test_rules_chunk_page_is_access_checked(client, member, make_user, rules_dataset):
    from search.models import Chunk

    user, _ = member
    chunk = Chunk.objects.filter(dataset=rules_dataset).first()
    client.force_login(user)
    assert client.get(f"/rules/chunk/{chunk.pk}").status_code == 200
    client.force_login(make_user("stranger@example.com"))
    assert client.get(f"/rules/chunk/{chunk.pk}").status_code == 404
