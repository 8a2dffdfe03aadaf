"""read_document: the one reader every entry point calls. A document format becomes a web-like document chunked by
its headings in a code or a web dataset alike, each chunk with the page label of its line span; the text kinds go
to the dataset kind's own chunker; bytes no reader takes come back with the reason."""
from __future__ import annotations

import pytest

from search.ingest.formats.documents import layer_document, read_document
from search.ingest.formats.text_layer import TextLayer
from tests.search.ingest.formats.samples import docx_bytes, epub_bytes, pdf_bytes

MANUAL = docx_bytes([("Heading1", "Installing"), ("", "Unpack the archive and run the installer as an administrator."),
                     ("Heading1", "Upgrading"), ("", "Stop the service before you replace its files.")])


@pytest.mark.parametrize("kind", ["code", "web"])
def test_a_docx_is_a_web_like_document_chunked_by_its_headings_in_any_dataset(kind):
    draft, why = read_document(kind=kind, data=MANUAL, name="docs/manual.docx", repo="shop")
    assert why == "" and draft is not None
    assert [c.heading_path for c in draft.chunks] == [["Installing"], ["Upgrading"]]
    assert {c.kind for c in draft.chunks} == {"web"} and draft.meta["format"] == "docx"
    assert draft.title == "Installing" and draft.repo == "shop"


def test_an_epub_named_as_text_is_read_as_a_book():
    book = epub_bytes([("a.xhtml", "<h1>Harbour</h1><p>Ships came in at dawn, heavy with salt and grain.</p>"
                       "<h2>Tides</h2><p>The tide tables were posted at the harbour master's door each week.</p>")])
    draft, why = read_document(kind="code", data=book, name="notes.txt")
    assert why == "" and draft.meta["format"] == "epub"
    assert ["Harbour", "Tides"] in [c.heading_path for c in draft.chunks]


def test_the_text_kinds_keep_their_dataset_kinds_chunker():
    code, _ = read_document(kind="code", data=b"def total(items):\n    return sum(items)\n", name="cart.py")
    assert code.lang == "python" and code.chunks[0].kind == "code" and code.chunks[0].symbol == "total"
    page, _ = read_document(kind="web", data=b"# Refunds\n\nRefunds take five days.\n", name="help/refunds.md")
    assert page.chunks[0].heading_path == ["Refunds"]


def test_bytes_no_reader_takes_and_source_files_in_a_web_dataset_come_back_with_their_reason():
    assert read_document(kind="code", data=b"\x00\x01\x02binary", name="blob.py") == (None, "binary: no reader")
    draft, why = read_document(kind="web", data=b"body { color: red }", name="site/style.css")
    assert draft is None and why.startswith("code: a web dataset reads pages and documents")
    draft, why = read_document(kind="web", data=b"PK\x03\x04[Content_Types].xml word/document.xml", name="x.docx")
    assert draft is None and why.startswith("DOCX refused:")


def test_each_chunk_of_a_paged_document_carries_the_pages_of_its_line_span():
    layer = TextLayer(markdown="# Combat\nRoll a d20.\nAdd your modifier.\n# Resting\nA short rest is an hour.",
                      line_pages=(1, 1, 2, 3, 3), pages=3, meta={"format": "pdf"})
    draft, why = layer_document(layer=layer, rel="rules.pdf", data=b"%PDF-", url="https://example.com/rules.pdf")
    assert why == ""
    assert [(c.heading_path, c.page) for c in draft.chunks] == [(["Combat"], "pp. 1–2"), (["Resting"], "p. 3")]
    assert draft.meta == {"format": "pdf", "pages": 3, "pages_without_text": 0}
    assert {c.meta["url"] for c in draft.chunks} == {"https://example.com/rules.pdf"}


def test_a_pdf_in_a_code_dataset_is_chunked_by_its_headings_with_the_pages_each_chunk_spans():
    pdf = pdf_bytes([["# Combat", "Roll a d20 and add your modifier to hit."],
                     ["The attack goes on onto this page.", "# Resting", "A short rest takes one hour."]])
    draft, why = read_document(kind="code", data=pdf, name="docs/rules.txt")  # a PDF by its bytes
    assert why == ""
    assert [(c.heading_path, c.page) for c in draft.chunks] == [(["Combat"], "pp. 1–2"), (["Resting"], "p. 2")]
    assert draft.meta["format"] == "pdf" and draft.meta["pages"] == 2
