"""The PDF reader reads as a person reads: columns in order, running heads gone, words whole, headings from the
outline or the type, tables as rows, and every Markdown line on its page. Each PDF is typeset here by reportlab."""
from __future__ import annotations

import os

import pytest
import reportlab
from reportlab.pdfbase import pdfmetrics
from reportlab.pdfbase.ttfonts import TTFont

from search.ingest.formats.pdf import read_pdf
from search.ingest.formats.text_layer import Refused
from tests.search.ingest.formats.samples import pdf_drawn as _pdf

FONTS = os.path.join(os.path.dirname(reportlab.__file__), "fonts")
pdfmetrics.registerFont(TTFont("Vera", os.path.join(FONTS, "Vera.ttf")))  # has the fi and fl ligature glyphs

LOREM = ("The ranger moves through difficult terrain without slowing and leaves no tracks unless it "
         "chooses to").split()


def _lines(text: str) -> list[str]:
    return text.split("\n")


def test_two_columns_are_read_column_by_column_even_when_drawn_line_by_line_across():
    left = [f"Left column sentence {i} about the wizard." for i in range(30)]
    right = [f"Right column sentence {i} about the rogue." for i in range(30)]

    def draw(c):
        c.setFont("Helvetica-Bold", 18)
        c.drawCentredString(297, 780, "Classes of the Realm")  # short, centred: it crosses the gutter
        c.setFont("Helvetica", 10)
        for i in range(30):  # drawn across: right line first, then left, as some producers do
            y = 740 - i * 16
            c.drawString(310, y, right[i])
            c.drawString(60, y, left[i])
        c.showPage()

    layer = read_pdf(data=_pdf(draw), name="columns.pdf")
    text = layer.markdown
    assert text.index("Classes of the Realm") < text.index("Left column sentence 0 ")
    positions = [text.index(s) for s in left + right]
    assert positions == sorted(positions), text
    assert "wizard. Right" not in text and "rogue. Left" not in text


def test_running_header_footer_and_page_numbers_are_removed():
    def draw(c):
        for n in range(1, 6):
            c.setFont("Helvetica", 8)
            c.drawString(72, 810, "The Book of Tests")
            c.drawCentredString(297, 30, str(n))
            c.setFont("Helvetica", 11)
            c.drawString(72, 700, f"Body text of page {n} that a reader keeps.")
            c.showPage()

    layer = read_pdf(data=_pdf(draw), name="heads.pdf")
    assert "The Book of Tests" not in layer.markdown
    for n in range(1, 6):
        assert f"Body text of page {n} that a reader keeps." in layer.markdown
    assert not any(line.strip().isdigit() for line in _lines(layer.markdown))
    assert layer.pages == 5


def test_a_word_hyphenated_at_a_line_end_is_joined_and_ligatures_are_plain_letters():
    def draw(c):
        c.setFont("Vera", 11)
        c.drawString(72, 700, "The \ufb01ghter may \ufb02ee or stand; a spell of conjur-")
        c.drawString(72, 686, "ation summons an ally of the \ufb02ame.")
        c.showPage()

    text = read_pdf(data=_pdf(draw), name="words.pdf").markdown
    assert "conjuration summons" in text
    assert "fighter may flee" in text and "flame" in text
    assert "\ufb01" not in text and "\ufb02" not in text


def test_outline_bookmarks_become_the_heading_path():
    def draw(c):
        for chapter, sections in (("Combat", ("Attacks", "Cover")), ("Magic", ("Casting",))):
            c.bookmarkPage(chapter)
            c.addOutlineEntry(chapter, chapter, level=0)
            c.setFont("Helvetica", 11)  # printed at body size: only the outline says it is a chapter
            c.drawString(72, 780, chapter)
            y = 740
            for section in sections:
                c.drawString(72, y, section)
                key = chapter + section
                c.bookmarkHorizontal(key, 0, y + 12)
                c.addOutlineEntry(section, key, level=1)
                c.drawString(72, y - 16, f"Rules text about {section.lower()}.")
                y -= 60
            c.showPage()

    layer = read_pdf(data=_pdf(draw), name="outline.pdf")
    lines = _lines(layer.markdown)
    assert [ln for ln in lines if ln.startswith("#")] == ["# Combat", "## Attacks", "## Cover", "# Magic",
                                                           "## Casting"]
    assert layer.meta["headings_from"] == "outline"
    assert lines.index("## Attacks") < lines.index("Rules text about attacks.") < lines.index("## Cover")


def test_without_an_outline_headings_come_from_font_size_and_weight():
    def draw(c):
        c.setFont("Helvetica-Bold", 22)
        c.drawString(72, 780, "Chapter One: Spells")
        c.setFont("Helvetica-Bold", 15)
        c.drawString(72, 740, "Casting a Spell")
        y = 716
        c.setFont("Helvetica", 10)
        for i in range(6):
            c.drawString(72, y, f"Body line {i} explains how a spell is cast in the usual way.")
            y -= 13
        c.setFont("Helvetica-Bold", 10)
        c.drawString(72, y - 10, "Components")
        c.setFont("Helvetica", 10)
        c.drawString(72, y - 26, "Verbal, somatic and material components are listed for each spell.")
        c.showPage()

    lines = _lines(read_pdf(data=_pdf(draw), name="fonts.pdf").markdown)
    assert "# Chapter One: Spells" in lines
    assert "## Casting a Spell" in lines
    assert "### Components" in lines
    assert any(ln.startswith("Body line 0 explains") and "Body line 5" in ln for ln in lines)  # one paragraph


def test_a_table_is_read_as_markdown_rows():
    rows = [("Weapon", "Cost", "Damage"), ("Club", "1 sp", "1d4"), ("Dagger", "2 gp", "1d4"),
            ("Longsword", "15 gp", "1d8")]

    def draw(c):
        c.setFont("Helvetica", 10)
        c.drawString(72, 780, "Simple weapons are listed below with their cost and damage.")
        for i, row in enumerate(rows):
            y = 750 - i * 14
            for x, cell in zip((72, 200, 300), row, strict=True):
                c.drawString(x, y, cell)
        c.drawString(72, 680, "Martial weapons follow on the next page of the handbook.")
        c.showPage()

    lines = _lines(read_pdf(data=_pdf(draw), name="table.pdf").markdown)
    assert "| Weapon | Cost | Damage |" in lines
    assert "| Club | 1 sp | 1d4 |" in lines
    assert "| Longsword | 15 gp | 1d8 |" in lines
    assert lines.index("| Weapon | Cost | Damage |") < lines.index("| Longsword | 15 gp | 1d8 |")


def test_every_line_has_its_page_and_a_page_without_text_is_counted():
    def draw(c):
        for n in (1, 2):
            c.setFont("Helvetica", 11)
            c.drawString(72, 700, f"Words printed on page {n}.")
            c.showPage()
        c.rect(100, 100, 300, 300, fill=1)  # a scan: a picture, no text layer
        c.showPage()
        c.setFont("Helvetica", 11)
        c.drawString(72, 700, "Words printed on page 4.")
        c.showPage()

    layer = read_pdf(data=_pdf(draw), name="pages.pdf")
    lines = _lines(layer.markdown)
    assert len(layer.line_pages) == len(lines)
    for n in (1, 2, 4):
        assert layer.line_pages[lines.index(f"Words printed on page {n}.")] == n
    assert layer.pages == 4
    assert layer.pages_without_text == 1
    assert layer.page_span(start_line=1, end_line=len(lines)) == (1, 4)


def test_bytes_that_are_not_a_pdf_are_refused_with_the_name():
    with pytest.raises(Refused) as err:
        read_pdf(data=b"<html>an error page</html>", name="manual.pdf")
    assert "manual.pdf" in err.value.reason and "not a PDF" in err.value.reason
