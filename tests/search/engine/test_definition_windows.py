"""search.engine.definition_windows and locate's window look: a long definition read whole, window by window."""
from __future__ import annotations

from dataclasses import replace

import pytest

from config import deadlines
from inference.models import EmbeddingCache
from search.engine import definition_windows
from search.engine.code_graph import DEF_FIELDS, FUNCTION_KINDS, Def
from search.engine.definition_windows import (
    WINDOW_LINES,
    WINDOW_STEP,
    definition_lines,
    nested_spans,
    window_similarity,
    windows_of,
)
from search.engine.locate import DEFAULT_RANKING, locate, window_look
from search.engine.pipeline import QuerySpec
from search.models import Symbol
from tests.search.ctx_fixtures import edge_index, ingest  # noqa: F401 - fixtures

# A long function whose head is column bookkeeping and whose tail alone says what the task is about.
FILLER = "\n".join(f"    columns.append(('col{i}', width * {i}, 'left'))" for i in range(40))
REPORT_PY = f'''def build_report(rows, width):
    """Lay out the monthly report."""
    columns = []
{FILLER}
    table = [columns]
    for row in rows:
        table.append(row)
    # retry the upload to the storage bucket when the network times out
    for attempt in range(3):
        try:
            return bucket_upload(table, timeout=30)
        except NetworkTimeout:
            continue
    return None


def format_cell(value, width):
    """Pad one cell of the report to its column width."""
    return str(value).ljust(width)


class Uploader:
    """Sends finished reports to the storage bucket."""

    retries = 3

    def send(self, table):
        return bucket_upload(table)

    chunk_size = 4096
'''
TASK = "retry the upload to the storage bucket when the network times out"


def _def(start: int, end: int) -> Def:
    return Def(id=1, dataset_id=1, document_id=1, path="report.py", lang="python", name="f", qualname="Report.f",
               kind="method", signature="", start_line=start, end_line=end)


def test_windows_cover_every_line_of_a_long_definition_and_name_it():
    lines = {n: f"line {n}" for n in range(10, 71)}
    windows = windows_of(d=_def(10, 70), lines=lines)
    covered = {n for w in windows for n in range(w.start_line, w.end_line + 1)}
    assert covered == set(range(10, 71))
    assert all(w.end_line - w.start_line + 1 <= WINDOW_LINES for w in windows)
    assert [w.start_line for w in windows] == list(range(10, 71 - WINDOW_LINES + WINDOW_STEP + 1, WINDOW_STEP))
    assert all(w.text.startswith("report.py Report.f\n") for w in windows)


def test_a_short_definition_is_one_window():
    windows = windows_of(d=_def(3, 8), lines={n: f"x = {n}" for n in range(1, 20)})
    assert [(w.start_line, w.end_line) for w in windows] == [(3, 8)]
    assert windows[0].text.endswith("x = 8") and "x = 9" not in windows[0].text


def test_a_class_is_read_by_its_own_lines_without_its_methods():
    lines = {n: f"line {n}" for n in range(1, 40)}
    windows = windows_of(d=_def(1, 39), lines=lines, skip=[(5, 30)])
    assert len(windows) == 1 and (windows[0].start_line, windows[0].end_line) == (1, 39)
    read = {n for n in range(1, 40) if f"line {n}\n" in windows[0].text + "\n"}
    assert read == set(range(1, 5)) | set(range(31, 40)) and "line 4\nline 31" in windows[0].text


@pytest.fixture
def report_world(db, edge_index, tmp_path, make_user, make_project):
    alice = make_user("alice@example.com")
    project = make_project("reports", alice)
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "report.py").write_text(REPORT_PY)
    dataset, _ = ingest(project, "app", tmp_path / "app", repo="app")
    rows = Symbol.objects.filter(dataset=dataset, kind__in=FUNCTION_KINDS).values_list(*DEF_FIELDS)
    defs = {row[6]: Def(*row) for row in rows}
    return {"alice": alice, "project": project, "defs": defs}


def test_the_stored_chunks_give_back_a_definitions_lines(report_world):
    d = report_world["defs"]["build_report"]
    lines = definition_lines(defs=[d])[d.document_id]
    source = REPORT_PY.split("\n")
    assert all(lines[n] == source[n - 1] for n in range(d.start_line, d.end_line + 1))


def test_the_best_window_of_a_long_definition_is_where_the_task_is_said(report_world):
    d = report_world["defs"]["build_report"]
    match = window_similarity(task=TASK, defs=[d])[d.id]
    said = next(n for n, line in enumerate(REPORT_PY.split("\n"), start=1) if "retry the upload" in line)
    assert match.start_line <= said <= match.end_line and match.start_line > d.start_line
    head = windows_of(d=d, lines=definition_lines(defs=[d])[d.document_id])[0]
    assert head.start_line == d.start_line and head.end_line < said  # the head alone never says it


def test_the_window_look_lifts_the_definition_whose_window_says_the_task(report_world):
    build, cell = report_world["defs"]["build_report"], report_world["defs"]["format_cell"]
    ranked = [(cell, 1.0 / 11, []), (build, 1.0 / 12, [])]
    light, _ = window_look(ranked=ranked, task=TASK, ranking=replace(DEFAULT_RANKING, window_weight=0.001))
    heavy, windows = window_look(ranked=ranked, task=TASK, ranking=replace(DEFAULT_RANKING, window_weight=100.0))
    assert [d.qualname for d, _, _ in light] == ["format_cell", "build_report"]
    assert [d.qualname for d, _, _ in heavy] == ["build_report", "format_cell"]
    assert windows[build.id].similarity > windows[cell.id].similarity
    assert heavy[0][1] == pytest.approx(1.0 / 12 + 100.0 / 11)  # the term adds to the score so far


def test_the_window_look_over_an_unmerged_ranking_uses_its_order_not_its_scores(report_world):
    build, cell = report_world["defs"]["build_report"], report_world["defs"]["format_cell"]
    ranked = [(cell, 50.0, []), (build, 0.2, [])]  # the chunks' aggregate, another scale than the term's
    ranking = replace(DEFAULT_RANKING, window_weight=2.0)
    looked, _ = window_look(ranked=ranked, task=TASK, ranking=ranking, merged=False)
    assert [d.qualname for d, _, _ in looked] == ["build_report", "format_cell"]
    kept, _ = window_look(ranked=ranked, task=TASK, ranking=ranking)  # taken as merged, 50 stays far ahead
    assert [d.qualname for d, _, _ in kept] == ["format_cell", "build_report"]


def test_locate_asked_for_windows_lists_each_definitions_best_window_and_writes_no_embedding(report_world):
    spec = QuerySpec(q=TASK, top_k=5, candidates=5, graph=False, kind="locate")
    cached = EmbeddingCache.objects.count()
    looked = locate(user=report_world["alice"], project=report_world["project"], spec=spec,
                    ranking=replace(DEFAULT_RANKING, windows=True))
    assert EmbeddingCache.objects.count() == cached  # a read: the windows are embedded, not stored
    build = next(f for f in looked.functions if f["symbol"] == "build_report")
    said = next(n for n, line in enumerate(REPORT_PY.split("\n"), start=1) if "retry the upload" in line)
    assert build["window"]["start_line"] <= said <= build["window"]["end_line"]
    assert build["window"]["span"] == f"report.py:{build['window']['start_line']}-{build['window']['end_line']}"
    assert "window_ms" in looked.timings
    off = locate(user=report_world["alice"], project=report_world["project"], spec=spec, ranking=DEFAULT_RANKING)
    assert {f["window"] for f in off.functions} == {None} and "window_ms" not in off.timings


def test_the_window_look_stops_at_the_requests_deadline(report_world):
    d = report_world["defs"]["build_report"]
    with deadlines.deadline_after(0), pytest.raises(deadlines.DeadlineExceeded):
        window_similarity(task=TASK, defs=[d])


def test_a_class_s_nested_spans_are_its_methods(report_world):
    uploader, send = report_world["defs"]["Uploader"], report_world["defs"]["Uploader.send"]
    assert nested_spans(classes=[uploader]) == {uploader.id: [(send.start_line, send.end_line)]}
    match = window_similarity(task="chunk size of an upload", defs=[uploader])[uploader.id]
    assert (match.start_line, match.end_line) == (uploader.start_line, uploader.end_line)  # one window, own lines


def test_a_second_look_at_the_same_code_embeds_no_window_again_unless_the_cache_is_off(report_world, settings):
    d = report_world["defs"]["build_report"]
    first = window_similarity(task=TASK, defs=[d])
    before = definition_windows.embedded
    again = window_similarity(task="a different task about the same function", defs=[d])
    assert definition_windows.embedded == before and again[d.id].similarity != first[d.id].similarity
    settings.LOCATE_WINDOW_CACHE = 0
    window_similarity(task=TASK, defs=[d])
    window_similarity(task=TASK, defs=[d])
    assert definition_windows.embedded > before  # nothing kept: each call embeds its windows
