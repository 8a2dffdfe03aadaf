"""Every entry point reads documents through the format registry: uploads (a file, an archive), folder jobs, git
sources, web crawls and rulebook uploads each read a DOCX and an EPUB by their bytes, and report every file no
reader takes by name and reason, counted by reason (never skipped silently)."""
from __future__ import annotations

import io
import os
import zipfile

import pytest

from search.models import Chunk, Document, IngestJob
from tests.search.ctx_fixtures import edge_index  # noqa: F401
from tests.search.ingest.formats.samples import docx_bytes, epub_bytes, pdf_bytes
from tests.search.sources.git.test_sync import attach, dataset, git_settings, remote  # noqa: F401
from tests.search.sources.git.test_sync import sync as git_sync
from tests.search.sources.site_server import SiteProcess, html_page
from tests.search.sources.web.test_crawler import crawl_settings, make_source, web_dataset  # noqa: F401
from tests.search.sources.web.test_crawler import sync as crawl_sync

pytestmark = pytest.mark.django_db

MANUAL = docx_bytes([("Heading1", "Installing"), ("", "Unpack the archive and run the installer as an administrator."),
                     ("Heading1", "Upgrading"), ("", "Stop the service before you replace its files.")])
BOOK = epub_bytes([("a.xhtml", "<h1>Harbour</h1><p>Ships came in at dawn, heavy with salt and grain from the south.</p>"
                    "<h2>Tides</h2><p>The tide tables were posted at the harbour master's door every week.</p>")])
GUIDE = pdf_bytes([["# Safety", "Wear gloves when you handle the blades."], ["# Cleaning", "Rinse with warm water."]])
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def _zip(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return out.getvalue()


def _headings(dataset, path: str) -> list[list[str]]:
    return [c.heading_path for c in Chunk.objects.filter(dataset=dataset, path=path).order_by("ordinal")]


@pytest.fixture
def owner_and(make_user, make_project):
    from search.models import Dataset

    owner = make_user("formats-owner@example.com")
    project = make_project("formats", owner)

    def make(kind: str):
        return owner, Dataset.objects.create(project=project, name=f"{kind}-set", kind=kind)
    return make


def _run_upload(*, owner, dataset, filename: str, data: bytes):
    from search.ingest.content import upload
    from search.ingest.jobs import run_job

    job = upload(user=owner, dataset=dataset, filename=filename, data=data)
    run_job(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    return job


def test_an_uploaded_archive_reads_documents_by_their_bytes_and_counts_what_no_reader_takes(owner_and):
    owner, ds = owner_and("code")
    job = _run_upload(owner=owner, dataset=ds, filename="shop.zip", data=_zip({
        "app.py": b"def main():\n    return 0\n", "docs/manual.docx": MANUAL, "docs/book.txt": BOOK,
        "docs/guide.pdf": GUIDE, "img/logo.png": PNG, "broken.py": b"\x00\x00not text"}))
    assert set(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == {
        "app.py", "docs/manual.docx", "docs/book.txt", "docs/guide.pdf"}
    assert list(Chunk.objects.filter(dataset=ds, path="docs/guide.pdf").order_by("ordinal")
                .values_list("heading_path", "page")) == [(["Safety"], "p. 1"), (["Cleaning"], "p. 2")]
    assert _headings(ds, "docs/manual.docx") == [["Installing"], ["Upgrading"]]
    assert ["Harbour", "Tides"] in _headings(ds, "docs/book.txt")
    assert job.result["skipped_by_reason"] == {"binary": 2}
    assert job.result["skipped"] == [{"path": "broken.py", "reason": "binary: no reader"},
                                     {"path": "img/logo.png", "reason": "binary: no reader"}]


def test_a_single_uploaded_file_is_read_by_its_bytes_whatever_its_name(owner_and):
    owner, ds = owner_and("web")
    _run_upload(owner=owner, dataset=ds, filename="manual.txt", data=MANUAL)
    doc = Document.objects.get(dataset=ds, path="manual.txt")
    assert doc.meta["format"] == "docx" and _headings(ds, "manual.txt") == [["Installing"], ["Upgrading"]]


def test_a_folder_job_reads_documents_and_reports_a_binary_source_file(owner_and, tmp_path):
    from search.ingest.jobs import start_ingest

    _owner, ds = owner_and("code")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "manual.docx").write_bytes(MANUAL)
    (tmp_path / "docs" / "book.epub").write_bytes(BOOK)
    (tmp_path / "docs" / "guide.pdf").write_bytes(GUIDE)
    (tmp_path / "app.py").write_text("def main():\n    return 0\n")
    (tmp_path / "blob.js").write_bytes(b"\x00\x01\x02")
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True, apply_index=False)
    job.refresh_from_db()
    assert set(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == {
        "app.py", "docs/manual.docx", "docs/book.epub", "docs/guide.pdf"}
    assert job.result["skipped"] == [{"path": "blob.js", "reason": "binary: no reader"}]
    assert job.result["skipped_by_reason"] == {"binary": 1}


def test_a_document_may_outweigh_a_source_file_and_a_file_past_its_limit_is_named(owner_and, tmp_path):
    from search.ingest.jobs import start_ingest

    _owner, ds = owner_and("code")
    out = io.BytesIO()  # a manual with a photograph: 1.2 MB on disk, over a source file's 1 MB
    with zipfile.ZipFile(io.BytesIO(MANUAL)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for info in src.infolist():
            zf.writestr(info, src.read(info))
        zf.writestr("word/media/photo.jpg", os.urandom(1_200_000), zipfile.ZIP_STORED)
    (tmp_path / "manual.docx").write_bytes(out.getvalue())
    (tmp_path / "generated.py").write_text("x = 1\n" * 200_000)
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code"), sync=True, apply_index=False)
    job.refresh_from_db()
    assert list(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == ["manual.docx"]
    assert job.result["skipped"] == [{"path": "generated.py", "reason": "too large (over 1,000,000 bytes)"}]


def test_a_git_source_reads_documents_from_its_tree(dataset, remote):
    remote.commit({"app.py": "def main():\n    return 0\n", "docs/manual.docx": MANUAL, "docs/book.epub": BOOK,
                   "docs/guide.pdf": GUIDE, "data.py": b"\x00\x01binary"})
    attach(dataset, remote.url)
    job = git_sync(dataset)
    assert job.status == "done", job.error
    assert set(Document.objects.filter(dataset=dataset).values_list("path", flat=True)) == {
        "app.py", "docs/manual.docx", "docs/book.epub", "docs/guide.pdf"}
    assert _headings(dataset, "docs/manual.docx") == [["Installing"], ["Upgrading"]]
    assert job.result["skipped_by_reason"] == {"binary": 1}


def test_a_crawl_follows_links_to_documents_and_reads_each_body_by_its_bytes(crawl_settings, web_dataset):
    site = SiteProcess()
    try:
        site.page("/", html_page("Home", "Welcome to the handbook.", links=["/manual.docx", "/book", "/broken.docx",
                                                                            "/error.pdf", "/guide.pdf"]))
        site.page("/guide.pdf", GUIDE, content_type="application/pdf")
        site.page("/manual.docx", MANUAL,
                  content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document")
        site.page("/book", BOOK, content_type="application/epub+zip")
        site.page("/broken.docx", b"PK\x03\x04[Content_Types].xml word/document.xml",
                  content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document")
        site.page("/error.pdf", html_page("Gone", "This manual has moved to the new site."),
                  content_type="application/pdf")  # an HTML error page served as a PDF is read as the page it is
        make_source(web_dataset, [site.url("/")])
        job = crawl_sync(web_dataset)
    finally:
        site.close()
    job.refresh_from_db()
    paths = set(Document.objects.filter(dataset=web_dataset).values_list("path", flat=True))
    assert paths == {site.url("/"), site.url("/manual.docx"), site.url("/book"), site.url("/error.pdf"),
                     site.url("/guide.pdf")}
    assert list(Chunk.objects.filter(dataset=web_dataset, path=site.url("/guide.pdf")).order_by("ordinal")
                .values_list("page", flat=True)) == ["p. 1", "p. 2"]
    manual = Document.objects.get(dataset=web_dataset, path=site.url("/manual.docx"))
    assert manual.meta["format"] == "docx" and manual.meta["content_type"].endswith("document")
    assert _headings(web_dataset, site.url("/manual.docx")) == [["Installing"], ["Upgrading"]]
    refused = job.result["skipped"]["refused"]
    assert [r["path"] for r in refused["skipped"]] == [site.url("/broken.docx")]
    assert refused["skipped_by_reason"] == {"DOCX refused": 1}


def test_a_rulebook_upload_reads_a_docx_through_the_rules_chunker_and_reports_what_it_cannot_read(owner_and):
    owner, ds = owner_and("rules")
    combat = docx_bytes([("Heading1", "Combat"), ("Heading2", "Dodge"),
                         ("", "Until the start of your next turn, any attack roll made against you has "
                              "disadvantage if you can see the attacker.")])
    job = _run_upload(owner=owner, dataset=ds, filename="handbook.zip",
                      data=_zip({"combat.docx": combat, "safety.pdf": GUIDE, "notes.txt": b"\x00\x01 not text"}))
    chunks = Chunk.objects.filter(dataset=ds)
    assert {c.path for c in chunks} == {"handbook/combat.docx", "handbook/safety.pdf"}
    assert {c.page for c in chunks if c.path == "handbook/safety.pdf"} == {"p. 1", "p. 2"}
    dodge = next(c for c in chunks if c.symbol == "Dodge")
    assert dodge.kind == "rules" and dodge.section_path == ["Combat", "Dodge"] and dodge.is_rule_bearing
    assert job.result["skipped"] == [{"path": "notes.txt", "reason": "binary: no reader"}]
