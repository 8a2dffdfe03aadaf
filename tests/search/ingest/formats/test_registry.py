"""The format registry decides a file's reader from its bytes, not its name, and a new format is one module plus
one registry line: the test registers a "toy" format and an upload of it is read through the ordinary upload job."""
from __future__ import annotations

import json

import pytest

from search.ingest.formats import registry
from search.ingest.formats.base import Format
from search.ingest.formats.text_layer import Refused, TextLayer
from tests.search.ingest.formats.samples import docx_bytes, epub_bytes

DOCX = docx_bytes([("Heading1", "Setup"), ("", "Install the package and run the server.")])
EPUB = epub_bytes([("one.xhtml", "<h1>One</h1><p>A first chapter of some length to read.</p>")])
HTML = b"<!DOCTYPE html><html><head><title>Error</title></head><body><h1>Not found</h1></body></html>"


@pytest.mark.parametrize(("data", "name", "expected"), [
    (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n", "notes.txt", "pdf"),
    (DOCX, "notes.txt", "docx"),  # magic numbers win over the name
    (EPUB, "book.zip", "epub"),
    (HTML, "manual.pdf", "html"),  # an error page saved under a document's name is the page it is
    (HTML, "manual.docx", "html"),
    (b"\n  <html><body><p>x</p></body></html>", "page", "html"),
    (json.dumps([{"text": "Dodge: attackers have disadvantage."}]).encode(), "rules.json", "json-rules"),
    (json.dumps({"records": [{"text": "Dash"}]}).encode(), "data", "json-rules"),
    (b'{"name": "app", "version": 1}', "package.json", "code"),  # JSON that is not rule records: code by its name
    (b"# Title\n\nText.", "guide.md", "markdown"),
    (b"def f():\n    return 1\n", "app.py", "code"),
    (b"all:\n\tmake test\n", "Makefile", "code"),
    (b"plain words", "notes.txt", "text"),
    (b"plain words", "LICENSE", "text"),
])
def test_the_format_comes_from_the_bytes_and_the_name_only_breaks_a_tie_between_text_kinds(data, name, expected):
    assert registry.detect(data=data, name=name).format == expected


def test_bytes_no_reader_accepts_are_refused_with_a_reason():
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)
    found = registry.detect(data=png, name="logo.txt")
    assert found == ("", registry.BINARY) and found.reason == "binary: no reader"
    with pytest.raises(Refused) as exc:
        registry.read(data=png, name="logo.txt")
    assert exc.value.reason == "binary: no reader"


def test_a_content_type_breaks_a_tie_between_text_kinds_but_never_beats_the_bytes():
    assert registry.detect(data=b"<p>fragment</p>", name="https://x/page", media_type="text/html").format == "html"
    assert registry.detect(data=b"# Notes", name="https://x/notes", media_type="text/markdown").format == "markdown"
    assert registry.detect(data=DOCX, name="https://x/page", media_type="text/html").format == "docx"


def test_every_document_format_registered_declares_its_names_and_content_types_for_walks_and_crawls():
    assert {".pdf", ".docx", ".epub"} <= registry.document_suffixes()
    assert {"application/pdf", "application/epub+zip", "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "text/html", "text/markdown", "text/plain"} <= registry.media_types()


# ------------------------------------------------------------------------------------------------ a new format
def _read_toy(*, data: bytes, name: str) -> TextLayer:
    """TOY1 files: a title line, then `##` sections; two lines make a page."""
    lines = data.decode()[len("TOY1\n"):].split("\n")
    return TextLayer(markdown="\n".join(lines), line_pages=tuple(i // 2 + 1 for i in range(len(lines))),
                     pages=(len(lines) + 1) // 2, title=lines[0].lstrip("# "), meta={"format": "toy"})


TOY = Format(name="toy", sniff=lambda data: data.startswith(b"TOY1\n"), read=_read_toy, suffixes=(".toy",),
             media_types=("application/x-toy",))


@pytest.fixture
def toy_format():
    registry.register(TOY)
    yield TOY
    registry.FORMATS.pop("toy")


@pytest.mark.django_db
def test_a_registered_format_is_read_by_an_upload_with_its_pages_on_the_chunks(toy_format, make_user, make_project):
    from search.ingest.content import upload
    from search.ingest.jobs import run_job
    from search.models import Chunk, Dataset, Document

    owner = make_user("toy-owner@example.com")
    dataset = Dataset.objects.create(project=make_project("toys", owner), name="manuals", kind="web")
    body = b"TOY1\n# Toy Manual\nWelcome to the toy.\n## Winding\nTurn the key three times.\nThen let it go.\n"
    job = upload(user=owner, dataset=dataset, filename="manual.bin", data=body)  # its name says nothing
    run_job(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    doc = Document.objects.get(dataset=dataset, path="manual.bin")
    assert doc.title == "Toy Manual"
    pages = dict(Chunk.objects.filter(document=doc).values_list("symbol", "page"))
    assert pages == {"Toy Manual": "p. 1", "Winding": "pp. 2–3"}
