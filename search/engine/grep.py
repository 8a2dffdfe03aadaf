"""Exact and regular-expression search over the indexed text, for agents that know the string they want.

Why RE2: a pattern comes from the caller, and a backtracking engine (Python's `re`, Postgres's ARE) can take
exponential time on a hostile one; google-re2 matches in time linear in the text, so the only bounds needed are
on how much text is read and how many hits come back (MAX_MATCHES, GREP_BUDGET_S).

Why trigrams of our own: reading every line of a 100k-chunk dataset takes far longer than an agent should wait,
and the embedded Postgres has no pg_trgm. So each document's casefolded character trigrams (within lines: a hit
never spans a newline) are stored on its CodeFile row with a GIN index, written with its chunks
(search.ingest.code_facts). A literal, or the literal runs a regular expression cannot match without, become
`trigrams @> {...}`: only documents holding every trigram are read, then RE2 confirms line by line. A pattern
with no literal of three characters narrows nothing and reads documents in path order until the budget ends,
and says so (`complete: false`).

Why the clock is read inside the scan: RE2 is linear, but its slow engine (a pattern whose DFA outgrows its
memory) reads about 0.1-0.2 MB/s, so one 1 MB document took 7-12 s, and a budget checked only between batches
of files let a request run for tens of seconds and still say `complete: true`. The scan now looks at the clock
before each file, between slices of SLICE_CHARS of a file's lines (a slice is whole lines: matches are within a
line, so cutting between lines changes nothing), and between windows of a line longer than a slice; it stops at
GREP_BUDGET_S or the request's deadline (config.deadlines), whichever comes first, with `complete: false`.
"""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from re import _parser as sre_parse  # the stdlib's own parse of a pattern: which literals it cannot match without
from typing import Any

import numpy as np
import re2
from django.conf import settings
from django.db import connection

from config import deadlines
from config.errors import BadInput
from projects.models import Project
from search.engine.code_graph import datasets_for
from search.engine.globs import Glob, compile_glob

MAX_PATTERN = 1000
MAX_MATCHES = 500
DEFAULT_MATCHES = 100
MAX_LINE_CHARS = 500  # a hit's line is cut here
DOC_BATCH = 64
BATCH_BYTES = 4 << 20  # the documents' text fetched at once (a batch of 64 files of 1 MB each: 64 MB)
SLICE_CHARS = 16 * 1024  # text matched between two looks at the clock (about 0.1 s for RE2's slowest engine)
WINDOW_OVERLAP = 4 * 1024  # a line longer than a slice is matched in windows overlapping by this much
_SHIFT = 21  # code points fit in 21 bits: a trigram is three of them in one int64


def trigrams(text: str) -> list[int]:
    """The distinct casefolded trigrams of `text` that lie within one line, sorted, as int64 ids.

    casefold, not lower: it maps each character alone (lower() turns a Greek sigma by its neighbours), so the
    trigrams of a substring are always trigrams of the whole."""
    folded = text.casefold()
    if len(folded) < 3:
        return []
    cps = np.frombuffer(folded.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    ids = (cps[:-2] << (2 * _SHIFT)) | (cps[1:-1] << _SHIFT) | cps[2:]
    newline = ord("\n")
    keep = (cps[:-2] != newline) & (cps[1:-1] != newline) & (cps[2:] != newline)
    # sorted, then each run kept once: np.unique gives the same ids, but NumPy 2's takes several times longer
    ids = np.sort(ids[keep])
    if not ids.size:
        return []
    return ids[np.concatenate(([True], ids[1:] != ids[:-1]))].tolist()


@dataclass(frozen=True)
class GrepSpec:
    """A checked grep request: the pattern compiled, the literal runs that narrow the documents."""

    pattern: str
    regex: bool
    case_sensitive: bool
    compiled: Any  # re2 pattern
    whole: Any  # the pattern in multi-line mode, run over a slice of whole lines at once: a line that matches
    # `compiled` matches it inside the slice too (^ $ \b read the same at a line's edges), so a slice it misses is
    # skipped
    required: tuple[str, ...]  # literal runs every hit contains (casefolded trigrams narrow by them)
    glob: Glob | None
    max_matches: int


def compile_grep(*, pattern: str, regex: bool = False, case_sensitive: bool = True, path: str | None = None,
                 max_matches: int = DEFAULT_MATCHES) -> GrepSpec:
    """Check and compile a request; a bad pattern or glob is a 400 naming its field."""
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN:
        raise BadInput(f"Must be 1 to {MAX_PATTERN} characters.", field="pattern")
    if "\n" in pattern:
        raise BadInput("Matches are within one line: the pattern may not hold a newline.", field="pattern")
    if not 1 <= max_matches <= MAX_MATCHES:
        raise BadInput(f"Must be between 1 and {MAX_MATCHES}.", field="max_matches")
    options = re2.Options()
    options.case_sensitive = case_sensitive
    options.max_mem = 8 << 20
    source = pattern if regex else re.escape(pattern)
    try:
        compiled = re2.compile(source, options)
        # \A and \z mean the text's edges, which a chunk's are not: such a pattern is matched line by line only
        whole = None if regex and ("\\A" in pattern or "\\z" in pattern) else re2.compile("(?m)" + source, options)
    except re2.error as exc:
        raise BadInput(f"Not a valid RE2 regular expression: {exc}.", field="pattern") from None
    required = required_literals(pattern) if regex else (pattern,)
    glob = None
    if path:
        try:
            glob = compile_glob(path if any(c in path for c in "*?[") else path.rstrip("/") + "**")
        except BadInput as exc:
            raise BadInput(exc.detail, field="path") from None
    return GrepSpec(pattern=pattern, regex=regex, case_sensitive=case_sensitive, compiled=compiled, whole=whole,
                    required=tuple(r for r in required if len(r.casefold()) >= 3), glob=glob,
                    max_matches=max_matches)


def required_literals(pattern: str) -> list[str]:
    """Literal runs that every match of `pattern` contains (conservative: [] when unsure).

    Read from Python's parse of the pattern (RE2's syntax is a subset for these purposes); only a top-level
    sequence counts: anything optional, repeated, alternated or grouped ends a run."""
    if "[:" in pattern or "\\x{" in pattern:  # POSIX classes, \x{...}: RE2 reads them otherwise than Python
        return []
    try:
        parsed = sre_parse.parse(pattern)
    except (re.error, ValueError, TypeError, OverflowError, RecursionError):
        return []
    runs, cur = [], []
    for op, arg in parsed:
        if str(op) == "LITERAL":
            cur.append(chr(arg))
            continue
        if str(op) == "MAX_REPEAT" or str(op) == "MIN_REPEAT":
            lo, _hi, item = arg
            if lo >= 1 and len(item) == 1 and str(item[0][0]) == "LITERAL":
                cur.append(chr(item[0][1]))  # `ab+c`: one b at least; the run ends after it
        runs.append("".join(cur))
        cur = []
    runs.append("".join(cur))
    return [r for r in runs if r]


def _candidates(*, dataset_ids: list[int], spec: GrepSpec, after: tuple[int, str] | None) -> list[tuple]:
    """The next DOC_BATCH documents (dataset, path order) that can hold a hit: (document, dataset, path, bytes)."""
    where = ["f.dataset_id = ANY(%(ids)s)"]
    params: dict[str, Any] = {"ids": dataset_ids, "n": DOC_BATCH}
    grams = sorted({g for lit in spec.required for g in trigrams(lit)})
    if grams:
        where.append("f.trigrams @> %(grams)s::bigint[]")
        params["grams"] = grams
    if spec.glob is not None:
        where.append("f.path LIKE %(like)s AND f.path ~ %(regex)s")
        params.update(like=spec.glob.like, regex=spec.glob.regex)
    if after is not None:
        where.append("(f.dataset_id, f.path) > (%(after_ds)s, %(after_path)s)")
        params.update(after_ds=after[0], after_path=after[1])
    sql = (f"SELECT f.document_id, f.dataset_id, f.path, d.size_bytes FROM search_codefile f "
           f"JOIN search_document d ON d.id = f.document_id WHERE {' AND '.join(where)} "
           "ORDER BY f.dataset_id, f.path LIMIT %(n)s")
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def _groups(batch: list[tuple]) -> Iterator[list[tuple]]:
    """The batch in runs of about BATCH_BYTES of text (at least one document each), fetched one run at a time."""
    run: list[tuple] = []
    size = 0
    for row in batch:
        if run and size + (row[3] or 0) > BATCH_BYTES:
            yield run
            run, size = [], 0
        run.append(row)
        size += row[3] or 0
    if run:
        yield run


def _lines(document_ids: list[int]) -> dict[int, dict[int, str]]:
    """document -> {line number: text}, from its chunks; overlapping windows agree on every line."""
    out: dict[int, dict[int, str]] = {d: {} for d in document_ids}
    with connection.cursor() as cur:
        cur.execute("SELECT document_id, start_line, text FROM search_chunk WHERE document_id = ANY(%s) "
                    "ORDER BY document_id, start_line", [document_ids])
        for doc_id, start, text in cur.fetchall():
            lines = out[doc_id]
            for i, line in enumerate(text.split("\n")):
                lines.setdefault(start + i, line)
    return out


def matching_lines(*, lines: dict[int, str], spec: GrepSpec, stop_at: float, room: int) -> tuple[list[int], bool]:
    """The numbers of the lines `spec` matches, in order, at most `room`; and whether the file was read to its end
    (False: `stop_at` passed first).

    Lines are matched a slice at a time (whole lines, at most SLICE_CHARS together): `spec.whole` over the slice
    first, which skips a slice without a hit in one call, then line by line. A line longer than a slice is matched
    alone, in windows (matching_long_line). The clock is read before each slice and window."""
    found: list[int] = []
    order = sorted(lines)
    i = 0
    while i < len(order):
        if deadlines.passed(stop_at):
            return found, False
        if len(lines[order[i]]) > SLICE_CHARS:
            hit = matching_long_line(line=lines[order[i]], compiled=spec.compiled, stop_at=stop_at)
            if hit is None:
                return found, False
            if hit:
                found.append(order[i])
            i += 1
        else:
            j, size = i, 0
            while j < len(order) and len(lines[order[j]]) <= SLICE_CHARS and \
                    (j == i or size + len(lines[order[j]]) + 1 <= SLICE_CHARS):
                size += len(lines[order[j]]) + 1
                j += 1
            part = order[i:j]
            if spec.whole is None or spec.whole.search("\n".join(lines[n] for n in part)) is not None:
                found += [n for n in part if spec.compiled.search(lines[n]) is not None]
            i = j
        if len(found) >= room:
            return found[:room], True
    return found, True


def matching_long_line(*, line: str, compiled: Any, stop_at: float) -> bool | None:
    """Whether `compiled` matches in `line` (longer than a slice), read in windows of SLICE_CHARS that overlap by
    WINDOW_OVERLAP, with the clock read before each; None when `stop_at` passed first.

    Each window is searched with the line as its context (RE2's pos/endpos): `^`, `$` and `\b` see the line's real
    edges, never a window's, so a window finds no match the line does not hold. A single match longer than
    WINDOW_OVERLAP that crosses a window's edge can be missed: the price of a bounded scan, on lines of more than
    16 KiB only (minified files), where a hit's text is cut at MAX_LINE_CHARS anyway."""
    step = SLICE_CHARS - WINDOW_OVERLAP
    for start in range(0, len(line), step):
        if deadlines.passed(stop_at):
            return None
        end = min(len(line), start + SLICE_CHARS)
        if compiled.search(line, start, end) is not None:
            return True
        if end >= len(line):
            break
    return False


def grep(*, project: Project, dataset_ids: list[int], spec: GrepSpec) -> dict[str, Any]:
    """Hits (`path:line`) of `spec` in the documents of `dataset_ids` (already within the project's access), in
    dataset and path order; stops at spec.max_matches (`truncated`), or at GREP_BUDGET_S or the request's deadline
    (`complete: false`, checked inside the scan: matching_lines). `files_read` counts the files read to their end."""
    t0 = time.perf_counter()
    stop_at = deadlines.budget(seconds=settings.GREP_BUDGET_S)
    hits: list[dict[str, Any]] = []
    files_read = 0
    after: tuple[int, str] | None = None
    complete, truncated = True, False
    while complete and not truncated:
        if deadlines.passed(stop_at):
            complete = False
            break
        batch = _candidates(dataset_ids=sorted(dataset_ids), spec=spec, after=after)
        if not batch:
            break
        for group in _groups(batch):
            if deadlines.passed(stop_at):
                complete = False
                break
            texts = _lines([row[0] for row in group])
            for doc_id, ds_id, path, _size in group:
                lines = texts.pop(doc_id)
                found, finished = matching_lines(lines=lines, spec=spec, stop_at=stop_at,
                                                 room=spec.max_matches - len(hits))
                hits += [{"dataset_id": ds_id, "document_id": doc_id, "path": path, "line": n, "span": f"{path}:{n}",
                          "text": lines[n][:MAX_LINE_CHARS]} for n in found]
                if len(hits) >= spec.max_matches:
                    truncated = True
                    break
                if not finished:
                    complete = False
                    break
                files_read += 1
                after = (ds_id, path)
            if truncated or not complete:
                break
        if len(batch) < DOC_BATCH:
            break
    return {"project": project.slug, "pattern": spec.pattern, "regex": spec.regex,
            "case_sensitive": spec.case_sensitive, "hits": hits, "truncated": truncated, "complete": complete,
            "narrowed": bool(spec.required), "files_read": files_read,
            "took_ms": round((time.perf_counter() - t0) * 1000, 2)}


def grep_project(*, project: Project, pattern: str, regex: bool = False, case_sensitive: bool = True,
                 path: str | None = None, dataset: str | int | None = None,
                 max_matches: int = DEFAULT_MATCHES) -> dict[str, Any]:
    """The grep service the API view and the MCP tool call: check the request, resolve the readable datasets,
    search them."""
    spec = compile_grep(pattern=pattern, regex=regex, case_sensitive=case_sensitive, path=path,
                        max_matches=max_matches)
    ids = [ds.pk for ds in datasets_for(project=project, dataset=dataset)]
    return grep(project=project, dataset_ids=ids, spec=spec)
