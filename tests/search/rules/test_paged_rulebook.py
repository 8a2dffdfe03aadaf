"""A paged rulebook (SRD sections typeset as pages, read into a text layer) goes through the same rules lawyer as a
Markdown one: its chunks carry their printed pages, search results and streamed answers cite `book, p. N`, the
answer prompt quotes "Page N", and the graph, traversal config, aliases and chapter routing are built from it.
"""
from __future__ import annotations

import hashlib

import pytest

from search.ingest.formats.text_layer import TextLayer
from search.ingest.rules import rulebook_document
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture
from tests.search.ingest.test_rules_enrichment import SRD
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures

LINES_PER_PAGE = 40
FIRST_PAGE = 201  # a chapter typeset as part of a book starts mid-book


def srd_layer() -> TextLayer:
    """Combat and Conditions typeset as one book, LINES_PER_PAGE lines to a page, from page FIRST_PAGE."""
    md = "\n\n".join((SRD / rel).read_text(encoding="utf-8").rstrip("\n")
                     for rel in ("Gameplay/Combat.md", "Gamemastering/Conditions.md"))
    lines = md.split("\n")
    pages = tuple(FIRST_PAGE + i // LINES_PER_PAGE for i in range(len(lines)))
    return TextLayer(markdown=md, line_pages=pages, pages=pages[-1] - FIRST_PAGE + 1, title="SRD 5.1")


def printed_page(layer: TextLayer, heading: str) -> int:
    """The page a heading line is printed on, found in the layer itself (not through the chunker)."""
    no = layer.markdown.split("\n").index(heading)
    return layer.line_pages[no]


@pytest.fixture
def srd_pdf_book(db, edge_index, make_project):
    from search.engine.applier import apply_outbox
    from search.models import Dataset
    from search.rules.ingest import ingest_rulebook_documents

    project = make_project("srd-paged")
    ds = Dataset.objects.create(project=project, name="srd-paged", kind="rules")
    layer = srd_layer()
    doc = rulebook_document(layer=layer, rel="srd.pdf", content_hash=hashlib.sha256(b"srd.pdf").hexdigest(),
                            ruleset_id="srd51", book_id="srd")
    stats = ingest_rulebook_documents(dataset=ds, drafts=[doc], ruleset_id="srd51", book_id="srd")
    apply_outbox()
    return {"project": project, "dataset": ds, "layer": layer, "stats": stats}


def test_paged_chunks_cite_the_pages_their_lines_are_printed_on():
    layer = srd_layer()
    doc = rulebook_document(layer=layer, rel="srd.pdf", content_hash="x", ruleset_id="srd51", book_id="srd")
    (grappled,) = [c for c in doc.chunks if c.symbol == "Grappled"]
    first, last = layer.line_pages[grappled.start_line - 1], layer.line_pages[grappled.end_line - 1]
    assert grappled.page == (f"p. {first}" if first == last else f"pp. {first}–{last}")
    assert first == printed_page(layer, "## Grappled")
    # the enrichment is the Markdown chunker's: kind, section path, tags
    assert grappled.content_kind == "condition" and grappled.section_path == ["Conditions", "Grappled"]
    assert "condition:grappled" in grappled.tags and grappled.book_id == "srd"
    # every chunk has a page inside the book, and a chunk over a page break names both pages
    assert all(c.page.startswith("p") for c in doc.chunks)
    assert any(c.page.startswith("pp. ") for c in doc.chunks)
    assert doc.meta["pages"] == layer.pages and doc.title == "COMBAT"


def test_search_and_answer_cite_book_and_page_of_a_paged_rulebook(srd_pdf_book, settings):
    from search.rules.answer import _context_prompt, stream_answer
    from search.rules.search import RulesSpec, rules_search

    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    page = printed_page(srd_pdf_book["layer"], "## Grappled")
    found = rules_search(user=None, project=srd_pdf_book["project"],
                         spec=RulesSpec(q="what happens when I'm grappled?", log=False))
    top = found["results"][0]
    assert top["section_path"] == ["Conditions", "Grappled"] and top["path"] == "srd/srd.pdf"
    assert top["page"].startswith(f"p. {page}") or top["page"].startswith(f"pp. {page}–")
    assert top["cite"] == f"srd, {top['page']}"

    events = list(stream_answer(q="what happens when I'm grappled?", search=lambda: found))
    done = dict(events)["complete"]
    grappled = [c for c in done["citations"] if c["section_path"] == ["Conditions", "Grappled"]]
    assert grappled and grappled[0]["cite"] == top["cite"] and grappled[0]["page"] == top["page"]
    # the model reads where each passage is printed
    quoted = f"Page {page})" if top["page"] == f"p. {page}" else f"Pages {page}–"
    assert f"(srd: Conditions > Grappled, {quoted}" in _context_prompt("q", found["results"])


def test_graph_config_aliases_and_routing_are_built_from_a_paged_rulebook(srd_pdf_book):
    from search.models import GraphEdge
    from search.rules.search import RulesSpec, rules_search
    from search.rules.traversal import load_config

    ds = srd_pdf_book["dataset"]
    assert srd_pdf_book["stats"]["graph_edges"].get("references", 0) > 0
    config = load_config(ruleset_id="srd51")
    assert "Grappled" in config.condition_names and "Dash" in config.action_names
    assert config.aliases  # the defaults plus what the book's text defines
    grappling = ds.chunks.get(symbol="Grappling").pk
    grappled = ds.chunks.get(symbol="Grappled", content_kind="condition").pk
    assert GraphEdge.objects.filter(source_id=f"chunk:{grappling}", target_id=f"chunk:{grappled}",
                                    relation="references").exists()
    routed = rules_search(user=None, project=srd_pdf_book["project"],
                          spec=RulesSpec(q="what happens when I'm grappled?", log=False, route_chapters=1))
    assert routed["routing"]["chapters"] == [{"book_id": "srd", "chapter": "Conditions"}]
    assert routed["results"][0]["section_path"] == ["Conditions", "Grappled"]
    assert routed["results"][0]["cite"].startswith("srd, p")


def test_the_demo_has_a_pdf_book_whose_answers_cite_its_pages(demo_project, settings):
    """`make run`'s demo: the Emberfall booklet typeset as a PDF (bench/typeset_demo_pdf.py), read by the PDF reader."""
    from search.rules.answer import stream_answer
    from search.rules.search import RulesSpec, rules_search

    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    found = rules_search(user=None, project=demo_project, spec=RulesSpec(q="what does a long rest restore?", log=False))
    top = found["results"][0]
    assert (top["book_id"], top["path"]) == ("roads-and-rest", "roads-and-rest/Roads and Rest.pdf")
    assert top["section_path"] == ["Resting", "Long Rest"] and top["cite"] == "roads-and-rest, p. 2"
    done = dict(stream_answer(q="what does a long rest restore?", search=lambda: found))["complete"]
    assert any(c["cite"] == "roads-and-rest, p. 2" and c["section_path"] == ["Resting", "Long Rest"]
               for c in done["citations"])


def test_the_rules_pages_show_the_book_and_page_of_a_pdf_citation(demo_project, client, make_user, settings):
    from projects.models import Membership

    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""
    member = make_user()
    Membership.objects.create(project=demo_project, user=member, role="member")
    client.force_login(member)
    body = client.get("/rules/", {"q": "what does a long rest restore?", "project": demo_project.slug,
                                  "render": "1"}).content.decode()
    assert "roads-and-rest, p. 2 · Resting › Long Rest" in body
    long_rest = demo_project_chunk(book_id="roads-and-rest", symbol="Long Rest")
    page = client.get(f"/rules/chunk/{long_rest}").content.decode()
    assert "roads-and-rest, p. 2 · roads-and-rest/Roads and Rest.pdf:" in page


def demo_project_chunk(**kw) -> int:
    from search.models import Chunk

    return Chunk.objects.get(kind="rules", **kw).pk


def test_an_unchanged_pdf_rulebook_is_skipped_by_its_hash_before_it_is_read(db, edge_index, make_project,
                                                                           monkeypatch, tmp_path):
    """Reading a PDF (in its own child process) is the costly part of a re-ingest: an unchanged book is not read."""
    import shutil
    from pathlib import Path

    from search.ingest.formats import registry
    from search.models import Dataset, Document
    from search.rules.ingest import ingest_rulebook

    book = tmp_path / "book"
    book.mkdir()
    shutil.copy(Path("search/rules/demo_rules/roads-and-rest/Roads and Rest.pdf"), book / "Roads and Rest.pdf")
    ds = Dataset.objects.create(project=make_project("reread"), name="roads", kind="rules")
    first = ingest_rulebook(dataset=ds, path=book, ruleset_id="emberfall", book_id="roads", graph=False)
    assert first["chunks"] > 0
    stored = set(Document.objects.filter(dataset=ds).values_list("path", "content_hash"))

    def no_reading(**_kw):
        raise AssertionError("an unchanged file was read")

    monkeypatch.setattr(registry, "read", no_reading)
    again = ingest_rulebook(dataset=ds, path=book, ruleset_id="emberfall", book_id="roads", graph=False)
    assert again["chunks"] == 0 and again["skipped"] == 1
    assert set(Document.objects.filter(dataset=ds).values_list("path", "content_hash")) == stored
