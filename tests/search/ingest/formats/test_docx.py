"""DOCX reading: Heading styles become the Markdown headings chunks are cut by, and the package is bounded (the
upload archive's checks, bytes counted while inflating, paragraphs capped) and never resolves an entity."""
from __future__ import annotations

import io
import zipfile

import pytest

from search.ingest.formats.docx import read_docx
from search.ingest.formats.text_layer import Refused
from tests.search.ingest.formats.samples import W, docx_bytes


def test_heading_styles_become_headings_by_their_style_name_and_tables_become_pipe_tables():
    data = docx_bytes([("Heading1", "Combat"), ("", "# not a heading: body text that starts with a hash"),
                       ("Berschrift2", "Dodge"),  # a translated style id: its name says "heading 2"
                       ("", "Attackers have disadvantage.")],
                      table=[["Die", "Result"], ["1", "Miss | fumble"]])
    layer = read_docx(data=data, name="rules.docx")
    lines = layer.markdown.split("\n")
    assert "# Combat" in lines and "## Dodge" in lines
    assert "\\# not a heading: body text that starts with a hash" in lines
    assert "| Die | Result |" in lines and "| 1 | Miss \\| fumble |" in lines
    assert layer.title == "Combat" and layer.pages == 0 and layer.line_pages == ()


def _package(document: str, *, extra: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", document)
        for name, body in (extra or {}).items():
            zf.writestr(name, body)
    return out.getvalue()


def test_an_external_entity_is_never_resolved(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    document = (f'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "{secret.as_uri()}">]>'
                f'<w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>before &x; after</w:t></w:r></w:p>'
                '</w:body></w:document>')
    try:
        layer = read_docx(data=_package(document), name="x.docx")
    except Refused:
        return  # refusing the document is as safe as reading it without the entity
    assert "TOP-SECRET-VALUE" not in layer.markdown


def test_a_part_that_inflates_far_past_its_size_is_refused_before_it_is_inflated():
    padding = "<w:p/>" * 2_000_000  # 12 MB of markup that deflates to a few KB
    data = _package(f'<w:document xmlns:w="{W}"><w:body>{padding}</w:body></w:document>')
    assert len(data) < 100_000
    with pytest.raises(Refused) as exc:
        read_docx(data=data, name="bomb.docx")
    assert exc.value.reason.startswith("DOCX refused:") and "compression bomb" in exc.value.reason


def test_a_part_whose_bytes_outgrow_its_declared_size_stops_there():
    document = f'<w:document xmlns:w="{W}"><w:body>' + "<w:p><w:r><w:t>word</w:t></w:r></w:p>" * 2000 + \
        "</w:body></w:document>"
    data = bytearray(_package(document))
    name, lie = b"word/document.xml", (1000).to_bytes(4, "little")  # it declares 1,000 bytes; it holds 80,000
    local = data.find(name) - 30  # its local header: the name follows the 30-byte fixed part
    assert data[local:local + 4] == b"PK\x03\x04"
    data[local + 22:local + 26] = lie
    central = data.rfind(name) - 46  # its central directory entry: the name follows the 46-byte fixed part
    assert data[central:central + 4] == b"PK\x01\x02"
    data[central + 24:central + 28] = lie
    with pytest.raises(Refused) as exc:
        read_docx(data=bytes(data), name="liar.docx")
    assert exc.value.reason.startswith("DOCX refused:")


def test_paragraphs_past_the_web_readers_element_cap_are_refused(settings):
    settings.WEB_READER_MAX_ELEMENTS = 50
    data = docx_bytes([("", f"paragraph {i}") for i in range(51)])
    with pytest.raises(Refused) as exc:
        read_docx(data=data, name="long.docx")
    assert "more than 50 paragraphs" in exc.value.reason
    assert read_docx(data=docx_bytes([("", f"paragraph {i}") for i in range(50)]), name="ok.docx").markdown


def test_a_zip_that_is_not_a_word_document_is_refused_by_name():
    with pytest.raises(Refused) as exc:
        read_docx(data=_package("<not-closed>"), name="broken.docx")
    assert exc.value.reason == "DOCX refused: word/document.xml is not well-formed XML"


def test_text_past_what_one_uploaded_file_may_hold_is_refused(settings):
    settings.UPLOAD_MAX_FILE_BYTES = 1000
    data = docx_bytes([("", f"sentence number {i} of a long and wordy report") for i in range(40)])
    with pytest.raises(Refused) as exc:
        read_docx(data=data, name="long.docx")
    assert exc.value.reason == "DOCX refused: more than 1,000 characters of text"
