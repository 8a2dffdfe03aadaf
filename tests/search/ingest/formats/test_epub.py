"""EPUB reading: the spine's chapters in reading order, each through the web reader with its real headings, and
the book bounded as a web page is (elements per chapter and for the whole book)."""
from __future__ import annotations

import pytest

from search.ingest.formats.epub import BOOK_PAGES_OF_ELEMENTS, read_epub
from search.ingest.formats.text_layer import Refused
from tests.search.ingest.formats.samples import epub_bytes

ROAD = ("<h1>The Road North</h1><p>The first chapter tells of a long road north through the hills.</p>"
        "<h2>Rain</h2><p>Rain fell for days and days on the hills and on the road, and nobody went out.</p>")
FORD = ("<h1>The Ford</h1><p>At the ford the travellers met a ferryman who wanted three silver coins.</p>"
        "<h2>Crossing</h2><p>They crossed at dawn, when the water was lowest and the ferryman was asleep.</p>")


def test_chapters_are_read_in_spine_order_with_their_headings_and_the_books_title():
    layer = read_epub(data=epub_bytes([("road.xhtml", ROAD), ("ford.xhtml", FORD)], title="Two Roads"),
                      name="book.epub")
    lines = layer.markdown.split("\n")
    assert lines.index("# The Road North") < lines.index("## Rain") < lines.index("# The Ford")
    assert "## Crossing" in lines
    assert layer.title == "Two Roads"
    assert {"the road north", "rain", "the ford", "crossing"} <= set(layer.meta["headings"])


def test_a_chapter_past_the_web_readers_element_cap_refuses_the_book(settings):
    settings.WEB_READER_MAX_ELEMENTS = 40
    crowded = "<h1>Lists</h1>" + "<p>item</p>" * 60
    with pytest.raises(Refused) as exc:
        read_epub(data=epub_bytes([("road.xhtml", ROAD), ("crowded.xhtml", crowded)]), name="book.epub")
    assert exc.value.reason.startswith("EPUB refused:")


def test_a_book_past_its_element_budget_is_refused_however_small_each_chapter(settings):
    settings.WEB_READER_MAX_ELEMENTS = 30
    chapter = "<h1>Part</h1>" + "<p>line</p>" * 10  # about 15 elements with the page's own
    budget = 30 * BOOK_PAGES_OF_ELEMENTS
    chapters = [(f"c{i}.xhtml", chapter) for i in range(budget // 10)]
    with pytest.raises(Refused) as exc:
        read_epub(data=epub_bytes(chapters), name="long.epub")
    assert f"more than {budget} elements in the book" in exc.value.reason


def test_a_package_without_its_container_is_refused_by_what_it_lacks():
    data = epub_bytes([("road.xhtml", ROAD)]).replace(b"META-INF/container.xml", b"META-INF/containex.xml")
    with pytest.raises(Refused) as exc:
        read_epub(data=data, name="broken.epub")
    assert exc.value.reason == "EPUB refused: it has no 'META-INF/container.xml'"


def test_a_books_text_past_what_one_uploaded_file_may_hold_is_refused(settings):
    settings.UPLOAD_MAX_FILE_BYTES = 200
    with pytest.raises(Refused) as exc:
        read_epub(data=epub_bytes([("road.xhtml", ROAD), ("ford.xhtml", FORD)]), name="book.epub")
    assert exc.value.reason == "EPUB refused: more than 200 characters of text"


def test_a_book_of_more_chapters_than_are_read_is_refused_before_any_is_read(monkeypatch):
    from search.ingest.formats import epub

    monkeypatch.setattr(epub, "MAX_CHAPTERS", 2)
    with pytest.raises(Refused) as exc:
        read_epub(data=epub_bytes([("a.xhtml", ROAD), ("b.xhtml", FORD), ("c.xhtml", ROAD)]), name="book.epub")
    assert exc.value.reason == "EPUB refused: 3 chapters (at most 2 are read)"
