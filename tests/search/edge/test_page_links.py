"""Page links: a cited page of an uploaded PDF opens the PDF at that page, served to the project's members only.

Through the API as a team uses it: the rulebook is uploaded, its job run as the worker runs it, the rules search,
the streamed answer, the context query and the pages give `page_url`, and the link is fetched back over HTTP."""
from __future__ import annotations

import hashlib
import io
import json

import pytest
from reportlab.lib.pagesizes import letter
from reportlab.pdfgen import canvas

from search.engine.applier import apply_outbox
from search.models import Document, DocumentOriginal
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture
from tests.search.edge.test_content_api import _run, _upload

pytestmark = pytest.mark.django_db

PAGES = [  # (heading, body) per printed page, from page 1
    ("Conditions", "Conditions alter a creature's capabilities in a variety of ways."),
    ("Grappled", "A grappled creature's speed becomes 0, and it can't benefit from any bonus to its speed."),
    ("Prone", "A prone creature's only movement option is to crawl, unless it stands up and ends the condition."),
]


def rulebook_pdf(*, edition: str = "") -> bytes:
    """Three printed pages, each a large heading and a paragraph (headings by type size, as a book prints them);
    `edition` is printed on the first page."""
    out = io.BytesIO()
    c = canvas.Canvas(out, pagesize=letter, invariant=1)
    for n, (heading, body) in enumerate(PAGES):
        if edition and n == 0:
            c.drawString(72, 100, edition)
        c.setFont("Helvetica-Bold", 20)
        c.drawString(72, 700, heading)
        c.setFont("Helvetica", 11)
        c.drawString(72, 670, body)
        c.showPage()
    c.save()
    return out.getvalue()


@pytest.fixture
def tables(make_user, make_project, client_for, edge_index, monkeypatch):
    from search.models import Dataset

    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    owner, stranger = make_user("gm@example.com"), make_user("other@example.com")
    project = make_project("tables", owner)
    make_project("elsewhere", stranger)
    rules = Dataset.objects.create(project=project, name="core", kind="rules")
    web = Dataset.objects.create(project=project, name="manuals", kind="web")
    Dataset.objects.create(project=project, name="notes", kind="rules")
    return {"owner": client_for(owner), "stranger": client_for(stranger), "owner_user": owner, "project": project,
            "rules": rules, "web": web, "index": edge_index}


def _upload_book(t, *, dataset, name: str, data: bytes, **fields):
    job = _run(_upload(t["owner"], f"/api/projects/tables/datasets/{dataset.pk}/uploads", name, data, **fields))
    assert job.status == "done", (job.status, job.error, job.result)
    apply_outbox(index=t["index"])
    return job


def _ask(client, q: str, **extra):
    return client.post("/api/projects/tables/rules/search", {"q": q, **extra}, format="json")


def test_a_cited_page_of_an_uploaded_pdf_opens_the_served_original_at_that_page(tables):
    pdf = rulebook_pdf()
    _upload_book(tables, dataset=tables["rules"], name="core.pdf", data=pdf, book="core")
    digest = hashlib.sha256(pdf).hexdigest()
    # the original is kept beside its document, whole, under its hash
    original = DocumentOriginal.objects.get(document__dataset=tables["rules"])
    assert original.sha256 == digest and bytes(original.data) == pdf and original.media_type == "application/pdf"

    resp = _ask(tables["owner"], "grappled creature speed")
    assert resp.status_code == 200, resp.content
    top = resp.json()["results"][0]
    assert top["section_path"][-1] == "Grappled" and top["page"] == "p. 2" and top["cite"] == "core, p. 2"
    assert top["page_url"] == f"/api/projects/tables/originals/{digest}#page=2"

    # the link opens the file itself (the fragment is the browser's: the request is the path)
    got = tables["owner"].get(top["page_url"].split("#")[0])
    assert got.status_code == 200 and got["Content-Type"] == "application/pdf"
    assert got.content == pdf and got["Content-Disposition"].startswith("inline") and got["X-Content-Type-Options"] == "nosniff"


def test_another_tenant_cannot_fetch_an_original_whatever_project_it_names(tables, make_project):
    pdf = rulebook_pdf()
    _upload_book(tables, dataset=tables["rules"], name="core.pdf", data=pdf, book="core")
    digest = hashlib.sha256(pdf).hexdigest()
    for url in (f"/api/projects/tables/originals/{digest}", f"/api/projects/elsewhere/originals/{digest}"):
        resp = tables["stranger"].get(url)
        assert resp.status_code == 404, (url, resp.status_code)
        assert resp.json()["code"] == "not_found" and resp.json()["detail"]
    # a member of a project the book is not shared with is refused the same way, through their own project
    assert tables["stranger"].get(f"/api/projects/elsewhere/originals/{'0' * 64}").status_code == 404


def test_a_shared_books_original_opens_for_the_project_it_is_shared_with(tables, make_user, make_project, client_for):
    from search.models import ProjectShare

    pdf = rulebook_pdf()
    _upload_book(tables, dataset=tables["rules"], name="core.pdf", data=pdf, book="core")
    friend = make_user("friend@example.com")
    other = make_project("friends", friend)
    ProjectShare.objects.create(dataset=tables["rules"], project=other)
    got = client_for(friend).get(f"/api/projects/friends/originals/{hashlib.sha256(pdf).hexdigest()}")
    assert got.status_code == 200 and got.content == pdf


def test_a_markdown_rulebook_has_pages_of_no_kind_and_no_page_link(tables):
    md = "# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes 0.\n"
    _upload_book(tables, dataset=tables["rules"], name="conditions.md", data=md.encode(), book="md")
    top = _ask(tables["owner"], "grappled creature speed").json()["results"][0]
    assert top["page"] == "" and top["page_url"] is None
    assert not DocumentOriginal.objects.exists()


@pytest.mark.parametrize("bad,status,code", [("ABC", 400, "invalid"), ("g" * 64, 400, "invalid"),
                                             ("A" * 64, 400, "invalid"), ("0" * 64, 404, "not_found")])
def test_a_bad_or_unknown_hash_is_a_json_error_naming_the_field(tables, bad, status, code):
    resp = tables["owner"].get(f"/api/projects/tables/originals/{bad}")
    assert resp.status_code == status and resp.json()["code"] == code and resp.json()["field"] == "sha256"


def test_answer_stream_citations_and_the_rules_pages_carry_the_page_link(tables, client, settings):
    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    pdf = rulebook_pdf()
    _upload_book(tables, dataset=tables["rules"], name="core.pdf", data=pdf, book="core")
    link = f"/api/projects/tables/originals/{hashlib.sha256(pdf).hexdigest()}#page=2"

    resp = tables["owner"].post("/api/projects/tables/answer", {"q": "grappled creature speed"}, format="json")
    frames = b"".join(resp.streaming_content).decode().split("\n\n")
    complete = next(json.loads(f.split("data: ", 1)[1]) for f in frames if f.startswith("event: complete"))
    assert any(c["page_url"] == link and c["cite"] == "core, p. 2" for c in complete["citations"]), complete

    client.force_login(tables["owner_user"])
    page = client.get("/rules/", {"project": "tables", "q": "grappled creature speed", "render": "1"})
    assert page.status_code == 200 and f'href="{link}"' in page.content.decode()
    chunk_id = next(c["chunk_id"] for c in complete["citations"] if c["page_url"] == link)
    assert f'href="{link}"' in client.get(f"/rules/chunk/{chunk_id}").content.decode()
    # the session opens the link too (a browser following it from the page)
    assert client.get(link.split("#")[0]).content == pdf


def test_a_pdf_in_a_web_dataset_links_its_pack_spans_and_a_replaced_file_ends_its_old_link(tables):
    first, second = rulebook_pdf(), rulebook_pdf(edition="Second printing")
    assert first != second
    _upload_book(tables, dataset=tables["web"], name="manual.pdf", data=first)
    resp = tables["owner"].post("/api/projects/tables/query", {"q": "prone creature crawl"}, format="json")
    assert resp.status_code == 200, resp.content
    body = resp.json()
    top = body["results"][0]
    assert top["path"] == "manual.pdf" and top["page"] == "p. 3"
    assert top["page_url"].endswith(f"/originals/{hashlib.sha256(first).hexdigest()}#page=3")
    spans = [s for f in body["pack"]["files"] for s in f["spans"]]
    assert any(s.get("page_url") == top["page_url"] for s in spans), spans
    # a new edition replaces the original: the old link ends (404), the new one opens the new bytes
    _upload_book(tables, dataset=tables["web"], name="manual.pdf", data=second)
    assert tables["owner"].get(top["page_url"].split("#")[0]).status_code == 404
    assert DocumentOriginal.objects.get().sha256 == hashlib.sha256(second).hexdigest()
    assert Document.objects.filter(dataset=tables["web"]).count() == 1


def test_a_crawled_pdf_links_to_its_own_url_and_keeps_no_copy():
    from search.ingest.formats.documents import read_document

    draft, why = read_document(kind="web", data=rulebook_pdf(), name="https://example.org/srd.pdf",
                               url="https://example.org/srd.pdf")
    assert draft is not None and draft.original is None and draft.meta["format"] == "pdf", why
    uploaded, _ = read_document(kind="web", data=rulebook_pdf(), name="srd.pdf")
    assert uploaded is not None and uploaded.original == rulebook_pdf()


def test_a_pdf_over_the_originals_limit_is_read_but_gets_no_link(tables, settings):
    settings.ORIGINALS_MAX_BYTES = 100
    _upload_book(tables, dataset=tables["rules"], name="core.pdf", data=rulebook_pdf(), book="core")
    top = _ask(tables["owner"], "grappled creature speed").json()["results"][0]
    assert top["page"] == "p. 2" and top["page_url"] is None
    assert not DocumentOriginal.objects.exists()
