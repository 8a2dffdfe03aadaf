"""Hostile PDFs of at most 1 MB: each is refused with a reason that names it, or read within bounds; one bad
PDF fails alone and the good document beside it is read."""
from __future__ import annotations

import time

import pytest

from search.ingest.formats.documents import read_document
from search.ingest.formats.pdf import read_pdf
from search.ingest.formats.text_layer import Refused
from tests.hardening import hostile_pdfs as hp

GENEROUS_S = 90  # the child's own limit is 30 s here; a loaded machine gets the rest


@pytest.fixture(autouse=True)
def _tight_bounds(settings):
    settings.PDF_MAX_SECONDS = 30
    settings.PDF_MAX_MEMORY_MB = 768


def _outcome(data: bytes, name: str) -> tuple[str, object]:
    started = time.monotonic()
    try:
        layer = read_pdf(data=data, name=name)
        result: tuple[str, object] = ("read", layer)
    except Refused as exc:
        result = ("refused", exc.reason)
    assert time.monotonic() - started < GENEROUS_S
    return result


@pytest.mark.parametrize("case", [c for c in hp.CASES if "bomb" not in c])
def test_each_hostile_pdf_is_refused_by_name_or_read_within_bounds(case, settings):
    build, expected = hp.CASES[case]
    data = build()
    assert len(data) <= hp.MB
    kind, detail = _outcome(data, "hostile.pdf")
    if expected != "either":
        assert kind == ("refused" if expected == "refuse" else "read"), detail
    if kind == "refused":
        assert str(detail).startswith("hostile.pdf: ") and len(str(detail)) > len("hostile.pdf: ") + 10
    else:
        assert len(detail.markdown) <= settings.PDF_MAX_CHARS
        assert detail.pages <= settings.PDF_MAX_PAGES
        assert len(detail.line_pages) == len(detail.markdown.split("\n")) or not detail.markdown


def test_a_flate_bomb_is_stopped_by_the_memory_bound():
    data = hp.flate_bomb(512 * hp.MB)
    assert len(data) <= hp.MB
    kind, detail = _outcome(data, "bomb.pdf")
    assert kind == "refused"
    assert str(detail).startswith("bomb.pdf: ")


def test_a_text_bomb_is_refused_not_read_into_memory():
    kind, detail = _outcome(hp.text_bomb(), "text-bomb.pdf")
    assert kind == "refused"
    assert "text-bomb.pdf" in str(detail)


def test_a_declared_page_count_past_the_limit_is_refused_before_pages_are_read(settings):
    settings.PDF_MAX_PAGES = 1000
    kind, detail = _outcome(hp.many_kids(5000), "fan.pdf")
    assert kind == "refused" and "5000 pages" in str(detail) and "1000" in str(detail)


def test_a_page_over_the_character_limit_is_refused_by_page(settings):
    settings.PDF_MAX_PAGE_CHARS = 50_000
    kind, detail = _outcome(hp.tiny_text_objects(), "dense.pdf")
    assert kind == "refused" and "page 1" in str(detail)


def test_the_wall_deadline_stops_a_slow_document(settings):
    settings.PDF_MAX_SECONDS = 1
    kind, detail = _outcome(hp.text_bomb(), "slow.pdf")
    assert kind == "refused" and "slow.pdf" in str(detail)


def test_an_encrypted_pdf_says_it_needs_a_password():
    kind, detail = _outcome(hp.encrypted(), "secret.pdf")
    assert kind == "refused" and "encrypted" in str(detail)


def test_one_bomb_fails_alone_and_the_good_pdf_beside_it_is_read():
    files = [("manuals/bomb.pdf", hp.flate_bomb(512 * hp.MB)), ("manuals/good.pdf", hp.good("The good manual."))]
    read, left_out = [], {}
    for name, data in files:
        draft, why = read_document(kind="web", data=data, name=name)
        if draft is None:
            left_out[name] = why
        else:
            read.append((name, draft))
    assert [name for name, _ in read] == ["manuals/good.pdf"]
    assert "The good manual." in "\n".join(c.text for c in read[0][1].chunks)
    assert list(left_out) == ["manuals/bomb.pdf"] and "the PDF reader stopped on it" in left_out["manuals/bomb.pdf"]


@pytest.mark.django_db
def test_a_folder_job_with_a_bomb_and_a_good_pdf_reads_the_good_one_and_names_the_bomb(make_user, make_project,
                                                                                       tmp_path):
    from search.ingest.jobs import start_ingest
    from search.models import Chunk, Dataset, Document, IngestJob

    owner = make_user("pdf-owner@example.com")
    ds = Dataset.objects.create(project=make_project("manuals", owner), name="manuals", kind="web")
    (tmp_path / "bomb.pdf").write_bytes(hp.flate_bomb(512 * hp.MB))
    (tmp_path / "good.pdf").write_bytes(hp.good("The good manual says to oil the hinges."))
    job = start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="web"), sync=True, apply_index=False)
    job.refresh_from_db()
    assert job.status == "done", job.error
    assert list(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == ["good.pdf"]
    assert "oil the hinges" in " ".join(Chunk.objects.filter(dataset=ds).values_list("text", flat=True))
    assert [s["path"] for s in job.result["skipped"]] == ["bomb.pdf"]
    assert "the PDF reader stopped on it" in job.result["skipped"][0]["reason"]
