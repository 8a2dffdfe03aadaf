"""A rulebook file that is read but holds nothing to cite (a PDF whose pages have no text layer) is named in the
job's report with its reason, like every refused file, and the rest of the book is read."""
from __future__ import annotations

from tests.hardening import hostile_pdfs as hp


def test_a_rulebook_pdf_with_no_text_is_named_with_a_reason_and_the_rest_of_the_book_is_read(tmp_path, settings):
    from search.ingest.rules import read_rulebook

    settings.PDF_MAX_SECONDS = 60
    (tmp_path / "Conditions.md").write_text("# Conditions\n\n## Grappled\n\nA grappled creature's speed is 0.\n")
    (tmp_path / "scan.pdf").write_bytes(hp.nested_dicts())  # one page, no text layer
    refused: dict[str, str] = {}
    docs = read_rulebook(path=tmp_path, ruleset_id="srd", book_id="core", refused=refused)
    assert [d.path for d in docs] == ["Conditions.md"]
    assert refused["scan.pdf"].startswith("no readable text: 1 of 1 pages have no text layer"), refused
