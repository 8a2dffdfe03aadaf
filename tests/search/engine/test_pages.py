"""Printed pages read back from chunks: labels parsed and merged, citations and prompts naming them, and context
pack spans of a paged document saying where they are printed (other files' spans unchanged)."""
from __future__ import annotations

from types import SimpleNamespace

from search.engine.packing import build_pack, render_pack
from search.engine.pages import cite, label_of, merged_label, page_range, prompt_pages


def test_a_label_reads_back_as_the_range_the_reader_wrote():
    for first, last in ((12, 12), (112, 113), (1, 300)):
        assert page_range(label=label_of(first=first, last=last)) == (first, last)
    assert page_range(label="pp. 12-14") == (12, 14)
    assert page_range(label="12") == (12, 12)  # a JSON record's page, as its publisher gave it
    assert cite(book="core", page="12") == "core, p. 12"


def test_a_file_name_or_nonsense_is_not_a_page():
    for label in ("", "Conditions.md", "p.", "pp. 14–12", "p. 0", "page 12", "12a"):
        assert page_range(label=label) == (0, 0), label
    assert cite(book="core", page="Conditions.md") == "core"  # a chunk stored before books had pages
    assert prompt_pages(page="Conditions.md") == ""


def test_citations_and_prompts_name_the_book_and_page():
    assert cite(book="srd", page="p. 112") == "srd, p. 112"
    assert cite(book="srd", page="pp. 112–113") == "srd, pp. 112–113"
    assert cite(book="srd", page="") == "srd"
    assert prompt_pages(page="p. 112") == "Page 112" and prompt_pages(page="pp. 112–113") == "Pages 112–113"


def test_merged_spans_cover_every_page_of_their_chunks():
    assert merged_label(labels=["p. 12", "pp. 12–13", "p. 15"]) == "pp. 12–15"
    assert merged_label(labels=["", "p. 7"]) == "p. 7"
    assert merged_label(labels=["", ""]) == ""


def _chunk(pk: int, start: int, end: int, *, page: str | None, path: str):
    ns = SimpleNamespace(pk=pk, dataset_id=1, path=path, repo="", lang="markdown", document_id=1,
                         start_line=start, end_line=end, text="\n".join(f"l{n}" for n in range(start, end + 1)))
    if page is not None:
        ns.page = page
    return ns


def test_a_pack_span_of_a_paged_document_carries_its_pages():
    pack = build_pack([_chunk(1, 1, 4, page="p. 12", path="srd.pdf"), _chunk(2, 5, 9, page="pp. 12–13",
                                                                               path="srd.pdf"),
                       _chunk(3, 30, 31, page="p. 15", path="srd.pdf")])
    (f,) = pack["files"]
    assert [(s["span"], s["page"]) for s in f["spans"]] == [("srd.pdf:1-9", "pp. 12–13"), ("srd.pdf:30-31", "p. 15")]
    text = render_pack(pack)
    assert "--- srd.pdf:1-9 (pp. 12–13)\n" in text and "--- srd.pdf:30-31 (p. 15)\n" in text


def test_a_pack_span_of_a_file_without_pages_is_unchanged():
    pack = build_pack([_chunk(1, 1, 4, page="", path="a.md"), _chunk(2, 8, 9, page=None, path="b.py")])
    for f in pack["files"]:
        assert all("page" not in s for s in f["spans"])
    assert set(pack["files"][0]["spans"][0]) == {"start_line", "end_line", "chunk_ids", "text", "source", "order",
                                                 "tokens", "span"}
    assert "(p" not in render_pack(pack)
