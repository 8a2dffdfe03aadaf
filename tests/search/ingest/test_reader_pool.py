"""Files read in reader processes come back exactly as read in the job's own process, in the order given, with the
items that are not read passed through in place; a reader process that dies costs at most the file it was reading;
and a code job with many files reads them in the pool and writes the same rows as one that reads them itself."""
from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from search.ingest import reader_pool
from search.ingest.base import row_sparse_arrays, sparse_arrays_ok
from search.ingest.code import walk
from search.ingest.jobs import start_ingest
from search.ingest.reader_child import decode_answer, encode_answer
from search.ingest.reader_pool import CRASHED, ToRead, read_files
from search.ingest.writer import Skip
from search.models import Chunk, Dataset, IngestJob, SymbolRef

STDLIB = Path(os.__file__).parent
SAMPLE = ("json", "email", "http")  # packages of Python and of many definitions, references and chunk kinds


def _files() -> list[ToRead]:
    items = []
    for package in SAMPLE:
        root = STDLIB / package
        items += [ToRead(f"{package}/{rel}", path.read_bytes()) for rel, path, why in walk(root) if not why]
    items.append(ToRead("notes.md", b"# Notes\n\nSome *prose* in Markdown.\n"))
    items.append(ToRead("blob.bin", bytes(range(256)) * 4))  # no reader takes it: left out with the reason
    return items


def _mixed(files: list[ToRead]) -> list[ToRead | Skip]:
    out: list[ToRead | Skip] = []
    for i, f in enumerate(files):
        out.append(f)
        if i % 7 == 0:
            out.append(Skip(f"kept-{i}.py", keep=True))
    return out


@pytest.fixture
def started(monkeypatch) -> list[reader_pool._Child]:
    """Every reader process the pool starts during the test, in order."""
    children: list[reader_pool._Child] = []
    real = reader_pool._Child.__init__

    def watched(self, **kwargs) -> None:
        real(self, **kwargs)
        children.append(self)

    monkeypatch.setattr(reader_pool._Child, "__init__", watched)
    return children


@pytest.fixture(scope="module")
def read_here() -> list:
    return list(read_files(items=_mixed(_files()), kind="code", repo="r", processes=0))


@pytest.mark.parametrize("processes", [1, 3])
def test_drafts_from_reader_processes_equal_those_read_here_in_the_order_given(processes, read_here):
    pooled = list(read_files(items=_mixed(_files()), kind="code", repo="r", processes=processes))
    assert [r.item for r in pooled] == [r.item for r in read_here]
    assert [(r.draft, r.why) for r in pooled] == [(r.draft, r.why) for r in read_here]
    drafts = [r.draft for r in read_here if r.draft is not None]
    assert any(d.facts is not None for d in drafts) and sum(len(d.chunks) for d in drafts) > 500
    # the sparse analysis done in the reader processes: each chunk row's term ids and weights, as the writer would
    assert all(c.terms is None and c.weights is None for d in drafts for c in d.chunks)
    assert [[(c.terms, c.weights) for c in r.draft.chunks] for r in pooled if r.draft is not None] == \
        [[row_sparse_arrays(chunk=c, path=d.path) for c in d.chunks] for d in drafts]
    assert read_here[-1].draft is None and read_here[-1].why  # the binary file, with why it was left out


def test_a_draft_survives_the_wire_with_its_original_bytes_and_symbol_facts(read_here):
    read = next(r.draft for r in read_here if r.draft is not None and r.draft.facts is not None)
    draft = dataclasses.replace(read, original=b"\x00\xffbytes")
    assert decode_answer(encode_answer(draft, "")) == (draft, "")
    with pytest.raises(ValueError):
        decode_answer(b'{"draft": {"path": "x"}, "why": ""}')


@pytest.mark.parametrize("terms, weights", [
    ("{1,2}", "{0.5}"),  # fewer weights than terms
    ("{1,2}", None),  # one of the two
    ("{1,2); DROP", "{0.5,1.0}"),  # not an array of ids
    ("{1,2}", "{0.5,NaN}"),  # not a weight
    ("{-1}", "{0.5}"),  # a term id is unsigned
    ([1, 2], [0.5, 1.0]),  # lists: the wire carries the row's literals
])
def test_an_answer_whose_chunk_has_sparse_arrays_of_another_shape_is_refused(read_here, terms, weights):
    read = next(r.draft for r in read_here if r.draft is not None)
    chunks = [dataclasses.replace(read.chunks[0], terms=terms, weights=weights), *read.chunks[1:]]
    with pytest.raises(ValueError, match="sparse arrays"):
        decode_answer(encode_answer(dataclasses.replace(read, chunks=chunks), ""))


def test_the_sparse_arrays_a_reader_sends_are_the_ones_it_computed_and_pass_the_check(read_here):
    draft = next(r.draft for r in read_here if r.draft is not None)
    terms, weights = row_sparse_arrays(chunk=draft.chunks[0], path=draft.path)
    assert sparse_arrays_ok(terms=terms, weights=weights) and terms.count(",") > 5
    sent = [dataclasses.replace(c, terms=terms, weights=weights) for c in draft.chunks]
    back, _ = decode_answer(encode_answer(dataclasses.replace(draft, chunks=sent), ""))
    assert [(c.terms, c.weights) for c in back.chunks] == [(terms, weights)] * len(sent)
    assert sparse_arrays_ok(terms="{}", weights="{}") and sparse_arrays_ok(terms="{7}", weights="{1e-05}")


def test_a_reader_process_that_dies_costs_at_most_the_file_it_was_reading(started, read_here):
    results = read_files(items=_mixed(_files()), kind="code", repo="r", processes=1)
    got = [next(results)]
    os.kill(started[0].proc.pid, signal.SIGKILL)
    got += list(results)
    assert [r.item for r in got] == [r.item for r in read_here]
    lost = [i for i, (a, b) in enumerate(zip(got, read_here, strict=True)) if (a.draft, a.why) != (b.draft, b.why)]
    assert len(lost) <= 1 and all(got[i].draft is None and got[i].why == CRASHED for i in lost)
    assert len(started) == 2 and all(c.proc.poll() is not None for c in started)  # a fresh one, and both stopped


def test_closing_the_reader_early_stops_its_processes(started):
    results = read_files(items=_files(), kind="code", repo="r", processes=2)
    assert next(results).draft is not None
    results.close()  # what a cancelled or timed-out job does to its drafts
    assert len(started) == 2 and all(c.proc.poll() is not None for c in started)


def test_reader_processes_that_cannot_work_at_all_fail_the_read_instead_of_leaving_every_file_out(monkeypatch):
    monkeypatch.setattr(reader_pool, "CHILD", "search.ingest.no_such_reader")  # every child exits at once
    results = read_files(items=_files(), kind="code", repo="r", processes=1)
    with pytest.raises(reader_pool.ReadersFailing, match="INGEST_READER_PROCESSES=0"):
        list(results)


@pytest.mark.django_db
def test_a_code_job_with_many_files_reads_them_in_the_pool_and_writes_the_same_rows(settings, make_user,
                                                                                    make_project, started):
    project = make_project("reader-pool", make_user())
    rows = {}
    for processes in (0, 2):
        settings.INGEST_READER_PROCESSES, settings.INGEST_READER_MIN_FILES = processes, 10
        ds = Dataset.objects.create(project=project, name=f"email-{processes}", kind="code")
        job = start_ingest(job=IngestJob(dataset=ds, source=str(STDLIB / "email"), kind="code",
                                         options={"repo": "email"}), sync=True, apply_index=False)
        assert job.status == "done", job.error
        rows[processes] = (list(Chunk.objects.filter(dataset=ds).order_by("path", "ordinal").values_list(
            "path", "start_line", "end_line", "text", "terms")),
            SymbolRef.objects.filter(dataset=ds).count())
    assert len(started) == 2 and rows[0][0] and rows[0] == rows[2]


def test_the_reader_process_imports_no_models():
    code = ("import sys, search.ingest.reader_child; print(sorted(m for m in sys.modules if m.endswith('.models') "
            "and m.split('.')[0] in {'accounts', 'projects', 'credits', 'search', 'people', 'inference'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"})
    assert out.stdout.strip() == "[]"
