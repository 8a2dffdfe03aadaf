"""Web ingestion: saved HTML pages -> readable text chunked by headings, with the URL/path and heading path kept,
spans exact against the extracted text, and the pages searchable end to end."""
from __future__ import annotations

from pathlib import Path

import pytest

from search.ingest.web import html_to_markdown, read_web_document, walk
from tests.search.ctx_fixtures import GUIDE_HTML, edge_index, ingest  # noqa: F401

REFUNDS_HTML = """<html><head><title>Refund policy</title>
<link rel="canonical" href="https://shop.example/help/refunds"></head><body>
<nav><a href="/">Home</a> | <a href="/about">About us</a></nav>
<article><h1>Refund policy</h1><p>We refund purchases within fourteen days. Keep your receipt.</p>
<h2>Eligibility</h2><p>Unused items in their original packaging are eligible. Opened software is not.</p>
<h3>Exceptions</h3><p>Gift cards are never refunded. Sale items can be exchanged only.</p>
<h2>How to ask</h2><p>Write to support with your order number. We answer within two days.</p></article>
<footer>Copyright 2026 Shop Inc. All rights reserved.</footer></body></html>"""


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "help").mkdir(parents=True)
    (root / "help" / "refunds.html").write_text(REFUNDS_HTML)
    (root / "guide.htm").write_text(GUIDE_HTML)
    (root / "notes.md").write_text("# Notes\n\nPlain markdown pages are read as they are.\n")
    (root / "style.css").write_text("body { color: red }")
    (root / ".cache").mkdir()
    (root / ".cache" / "old.html").write_text(REFUNDS_HTML)
    return root


def test_walk_finds_pages_only(site):
    assert sorted(rel for rel, _, _ in walk(site)) == ["guide.htm", "help/refunds.html", "notes.md"]


def test_headings_become_the_heading_path_and_spans_are_exact(site):
    page = site / "help" / "refunds.html"
    doc, why = read_web_document(rel="help/refunds.html", abs_path=page, repo="site")
    assert why == "" and doc.url == "https://shop.example/help/refunds" and doc.title == "Refund policy"
    assert doc.path == "help/refunds.html" and all(c.meta["url"] == doc.url for c in doc.chunks)
    paths = {tuple(c.heading_path): c for c in doc.chunks}
    assert set(paths) == {("Refund policy",), ("Refund policy", "Eligibility"),
                          ("Refund policy", "Eligibility", "Exceptions"), ("Refund policy", "How to ask")}
    exc = paths[("Refund policy", "Eligibility", "Exceptions")]
    assert exc.kind == "web" and exc.symbol == "Exceptions"
    assert exc.micro_summary == "Refund policy > Eligibility > Exceptions: Gift cards are never refunded."
    md, _, _, _ = html_to_markdown(REFUNDS_HTML)
    md_lines = md.split("\n")
    for c in doc.chunks:
        assert c.text == "\n".join(md_lines[c.start_line - 1:c.end_line])
    everything = "\n".join(c.text for c in doc.chunks)
    assert "About us" not in everything and "All rights reserved" not in everything
    assert doc.macro_summary.startswith("Refund policy: We refund purchases within fourteen days.")
    assert "Sections: Refund policy, Eligibility, Exceptions, How to ask" in doc.macro_summary


def test_a_page_with_no_readable_text_is_skipped(tmp_path):
    page = tmp_path / "empty.html"
    page.write_text("<html><head><script>var x = 1;</script></head><body>  </body></html>")
    doc, why = read_web_document(rel="empty.html", abs_path=page)
    assert doc is None and why == "no readable text"


@pytest.mark.django_db
def test_ingested_pages_answer_queries_with_url_and_heading_path(site, make_user, make_project, edge_index,
                                                               client_for):
    from search.models import Chunk, Document

    alice = make_user("web@example.com")
    project = make_project("help", alice)
    ds, job = ingest(project, "site", site, kind="web", repo="shop-site")
    assert job.status == "done" and job.files_total == 3
    assert Document.objects.get(dataset=ds, path="help/refunds.html").url == "https://shop.example/help/refunds"
    assert Chunk.objects.filter(dataset=ds, kind="web").count() >= 6

    resp = client_for(alice).post("/api/projects/help/query", {"q": "are gift cards refunded?", "top_k": 3},
                                  format="json")
    assert resp.status_code == 200, resp.content
    top = resp.json()["results"][0]
    assert top["path"] == "help/refunds.html" and top["kind"] == "web"
    assert top["heading_path"] == ["Refund policy", "Eligibility", "Exceptions"]
    assert top["url"] == "https://shop.example/help/refunds"
    assert top["span"] == f"help/refunds.html:{top['start_line']}-{top['end_line']}"


# --------------------------------------------------------------------------- pages made by documentation generators
GENERATORS = Path(__file__).parents[1] / "fixtures" / "generators"


@pytest.mark.parametrize("page,paths,code_lines", [
    ("sphinx.html", {("datetime — Basic date and time types",),
                     ("datetime — Basic date and time types", "tzinfo Objects"),
                     ("datetime — Basic date and time types", "timezone Objects"),
                     ("datetime — Basic date and time types", "timezone Objects", "Class attributes")},
     ["# Test code", "# on or after Oct 25."]),
    ("mkdocs.html", {("Configuration",), ("Configuration", "Logging"), ("Configuration", "Storage")},
     ["# Example logging section", "# Rotate daily"]),
    ("docusaurus.html", {("Installation",), ("Installation", "Requirements"), ("Installation", "Upgrading")},
     ["# Install the command line tool", "# Check the version"]),
    ("plain.html", {("Backups",), ("Backups", "Restoring")}, ["# nightly at 02:00", "# restore drill"]),
])
def test_the_heading_path_is_the_pages_real_headings_and_code_samples_stay_code(page, paths, code_lines):
    doc, why = read_web_document(rel=page, abs_path=GENERATORS / page)
    assert why == ""
    got = {tuple(c.heading_path) for c in doc.chunks}
    assert got == paths, got  # no permalink mark (¶, #, zero-width space) and no code comment became a heading
    text = "\n".join(c.text for c in doc.chunks)
    for line in code_lines:
        assert line in text  # the sample's comments are kept, as code, inside their section
    assert not any(h.endswith(("¶", "#", "\u200b")) for c in doc.chunks for h in c.heading_path)
    assert "Sections: " + ", ".join(p[-1] for p in sorted(paths, key=len)[:1]) in doc.macro_summary


def test_a_markdown_page_keeps_hash_lines_inside_a_fence_as_code():
    from search.ingest.web import chunk_markdown

    md = "# Guide\n\nRun it:\n\n```bash\n# not a heading\nmake run\n```\n\n## Next\n\nMore text here.\n"
    chunks = chunk_markdown(md)
    assert {tuple(c.heading_path) for c in chunks} == {("Guide",), ("Guide", "Next")}
    assert "# not a heading" in chunks[0].text


def many_attributes_page(n: int) -> bytes:
    return (b"<html><body><h1>Attributes</h1><p " + b" ".join(b"x%d=1" % i for i in range(n))
            + b">A paragraph with very many attributes, which the reader would build a tree of.</p></body></html>")


def many_elements_page(n: int) -> bytes:
    return ("<html><body><h1>Paragraphs</h1>" + "<p>One short paragraph of plain words.</p>" * n
            + "</body></html>").encode()


def test_the_reader_refuses_an_element_with_more_attributes_than_it_reads_and_says_why():
    from search.ingest.web import web_document_from_bytes

    draft, why = web_document_from_bytes(rel="attrs.html", data=many_attributes_page(2000), markdown=False)
    assert draft is None
    assert why == "markup refused: an element has 2000 attributes (at most 256 are read)"


def test_the_reader_refuses_a_page_of_more_elements_than_the_setting_and_reads_one_within_it(settings):
    from search.ingest.web import web_document_from_bytes

    settings.WEB_READER_MAX_ELEMENTS = 500
    draft, why = web_document_from_bytes(rel="big.html", data=many_elements_page(600), markdown=False)
    assert draft is None and why == "markup refused: 603 elements (at most 500 are read)"
    draft, why = web_document_from_bytes(rel="small.html", data=many_elements_page(400), markdown=False)
    assert draft is not None and why == "" and draft.chunks


@pytest.mark.django_db
def test_a_folder_ingest_names_each_page_the_reader_refused_with_its_reason(tmp_path, make_user, make_project):
    from search.models import Document

    root = tmp_path / "saved"
    root.mkdir()
    (root / "refunds.html").write_text(REFUNDS_HTML)
    (root / "attrs.html").write_bytes(many_attributes_page(5000))
    project = make_project("saved", make_user("saved@example.com"))
    ds, job = ingest(project, "saved", root, kind="web")
    assert job.status == "done", job.error
    assert set(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == {"refunds.html"}
    assert job.result["skipped"] == [
        {"path": "attrs.html", "reason": "markup refused: an element has 5000 attributes (at most 256 are read)"}]
    assert job.result["skipped_total"] == 1


@pytest.mark.django_db
def test_an_upload_names_each_page_the_reader_refused_with_its_reason(make_user, make_project, client_for,
                                                                      edge_index):
    import io
    import zipfile

    from search.ingest.jobs import run_job
    from search.models import Dataset, Document, IngestJob

    owner = make_user("uploader@example.com")
    project = make_project("uploads", owner)
    ds = Dataset.objects.create(project=project, name="docs", kind="web")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("site/refunds.html", REFUNDS_HTML)
        zf.writestr("site/attrs.html", many_attributes_page(3000))
    upload = io.BytesIO(buf.getvalue())
    upload.name = "site.zip"
    resp = client_for(owner).post(f"/api/projects/uploads/datasets/{ds.pk}/uploads", {"file": upload},
                                  format="multipart")
    assert resp.status_code == 202, resp.content
    job = IngestJob.objects.get(pk=resp.json()["id"])
    run_job(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    paths = set(Document.objects.filter(dataset=ds).values_list("path", flat=True))
    assert len(paths) == 1 and next(iter(paths)).endswith("refunds.html")
    [refused] = job.result["skipped"]
    assert refused["path"].endswith("attrs.html")
    assert refused["reason"] == "markup refused: an element has 3000 attributes (at most 256 are read)"


def test_an_xhtml_page_with_an_xml_declaration_keeps_its_real_headings():
    """DocBook and other XHTML pages open with `<?xml version="1.0" encoding="UTF-8"?>`; lxml refuses a str that
    declares an encoding, and the page lost every heading."""
    page = ('<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
            '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN" '
            '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
            '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Packages</title></head><body>'
            '<h1>Package management</h1><p>' + "Debian keeps packages in archives you can mirror. " * 8 + '</p>'
            '<h2>Filename encoding</h2><p>' + "Names are stored as bytes in the encoding of the locale. " * 8
            + '</p></body></html>')
    _, _, _, headings = html_to_markdown(page)
    assert {"package management", "filename encoding"} <= headings
