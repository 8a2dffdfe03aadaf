"""Where do I change this? A task in words in, the files and the functions to edit out, ranked.

Why on top of the query pipeline and not beside it: the ranking an agent gets must be the one search gives (access,
filters, fusion, the path prior, the reranker, the log), so `locate` runs the same spec through `run_query` and only
regroups its candidates: files by `search.engine.aggregation` over their chunks, definitions by the innermost
function, method or class (the code tools' Symbol rows) each chunk overlaps. The graph neighbours of the top
definitions (callers and callees, `search.engine.code_graph`) say what else a change may touch; they are bounded
(NEIGHBOUR_TOP definitions, MAX_NEIGHBOURS each) and only uses that resolve to one definition are named.
Where the searched datasets follow git, the past commits whose messages read like the task vote for the files they
changed (search.engine.history_vote); files and definitions are ranked by the chunks and that vote together.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config import deadlines
from search.engine.aggregation import DEFAULT, aggregate
from search.engine.code_graph import Def, LineSpan, find_references, resolved_uses
from search.engine.history_vote import (
    RANK_K,
    WEIGHT,
    PastCommit,
    evidence,
    file_votes,
    merge,
    similar_commits,
    voted_documents,
)
from search.engine.pipeline import QuerySpec, run_query
from search.models import Symbol

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Project
    from search.engine.fusion import Candidate

FUNCTION_KINDS = ("function", "method", "class")
MAX_TOP_FILES = 50
MAX_TOP_FUNCTIONS = 50
MAX_EVIDENCE = 5      # supporting chunks listed per file or definition
NEIGHBOUR_TOP = 5     # definitions whose callers and callees are read
MAX_NEIGHBOURS = 5    # callers, and callees, listed per definition
_FIELDS = ("id", "dataset_id", "document_id", "path", "lang", "name", "qualname", "kind", "signature",
           "start_line", "end_line")


@dataclass(frozen=True)
class LocateResult:
    session_id: str | None
    files: list[dict[str, Any]]
    functions: list[dict[str, Any]]
    aggregation: str
    candidates: int
    timings: dict[str, float]
    reranker: str | None
    history: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        return {"search_session_id": self.session_id, "aggregation": self.aggregation, "files": self.files,
                "functions": self.functions, "candidates": self.candidates, "timings_ms": self.timings,
                "reranker": self.reranker, "history": self.history}


def _score(c: Candidate) -> float:
    return c.rerank_score if c.rerank_score is not None else c.fused_score


def _evidence(cands: list[Candidate], ranks: list[int]) -> list[dict[str, Any]]:
    out = []
    for rank in ranks[:MAX_EVIDENCE]:
        ch = cands[rank].chunk
        out.append({"chunk_id": ch.pk, "rank": rank + 1, "score": _score(cands[rank]), "symbol": ch.symbol,
                    "start_line": ch.start_line, "end_line": ch.end_line,
                    "span": f"{ch.path}:{ch.start_line}-{ch.end_line}"})
    return out


def innermost_overlapping(*, definitions: list[Def], start_line: int, end_line: int) -> list[Def]:
    """The definitions overlapping lines start-end that enclose none of the others overlapping them: a chunk of two
    methods names both methods, not their class; a chunk of a class header names the class."""
    over = [d for d in definitions if d.start_line <= end_line and start_line <= d.end_line]
    return [d for d in over if not any(o is not d and d.start_line <= o.start_line and o.end_line <= d.end_line
                                       and (o.start_line, o.end_line) != (d.start_line, d.end_line) for o in over)]


def _definitions_by_document(document_ids: set[int]) -> dict[int, list[Def]]:
    out: dict[int, list[Def]] = {}
    for row in Symbol.objects.filter(document_id__in=sorted(document_ids), kind__in=FUNCTION_KINDS).order_by(
            "document_id", "start_line").values_list(*_FIELDS):
        d = Def(*row)
        out.setdefault(d.document_id, []).append(d)
    return out


def _neighbours(*, project: Project, d: Def) -> dict[str, Any]:
    """Who calls `d` (uses resolved to it, outside itself) and what it calls (uses inside it resolved to one
    definition), at most MAX_NEIGHBOURS each."""
    span = f"{d.path}:{d.start_line}-{d.end_line}"
    refs = find_references(project=project, symbol=d.full_name, dataset=d.dataset_id, limit=MAX_NEIGHBOURS * 4)
    callers = [{"name": r["container"] or "<file>", "path": r["path"], "line": r["line"], "span": r["span"],
                "relation": r["kind"]}
               for r in refs["references"]
               if r["resolution"] == "resolved" and r["definition"] == span and r["kind"] != "import"
               and not (r["path"] == d.path and d.start_line <= r["line"] <= d.end_line)][:MAX_NEIGHBOURS]
    uses = resolved_uses(spans=[LineSpan(d.dataset_id, d.document_id, d.start_line, d.end_line)],
                         max_uses=MAX_NEIGHBOURS * 4)[0]
    callees = [{"name": u.definition.qualname, "path": u.definition.path, "line": u.ref.line,
                "span": f"{u.definition.path}:{u.definition.start_line}-{u.definition.end_line}",
                "relation": u.ref.kind}
               for u in uses if u.definition.id != d.id][:MAX_NEIGHBOURS]
    return {"callers": callers, "callees": callees}


def rank_files(*, cands: list[Candidate], aggregation: str = DEFAULT, top: int = 10,
               past: list[PastCommit] | None = None, outside: list[dict[str, Any]] | None = None,
               rank_k: float = RANK_K, weight: float = WEIGHT) -> list[dict[str, Any]]:
    """The files of the loaded candidates (best first), scored from their chunks by `aggregation`; with `past`
    (the similar past commits), merged with their vote (search.engine.history_vote) and `score` is the merged
    one. `outside`: voted files no candidate chunk is in (history_vote.voted_documents), ranked after every
    candidate file before the merge. Each file lists its chunks and the past commits that changed it."""
    entries = []
    for g in aggregate(ranked=[((c.chunk.dataset_id, c.chunk.path), _score(c)) for c in cands], method=aggregation):
        ch = cands[g.ranks[0]].chunk
        entries.append(({"path": ch.path, "repo": ch.repo, "lang": ch.lang, "dataset_id": ch.dataset_id,
                         "document_id": ch.document_id, "chunks": _evidence(cands, g.ranks)}, g.score))
    entries += [({**f, "chunks": []}, 0.0) for f in outside or []]
    if past:
        entries = merge(ranked=[e for e, _ in entries], file_of=lambda e: (e["dataset_id"], e["path"]),
                        votes=file_votes(past), rank_k=rank_k, weight=weight)
    return [{"rank": rank, **entry, "score": score,
             "history": evidence(past or [], dataset_id=entry["dataset_id"], path=entry["path"])}
            for rank, (entry, score) in enumerate(entries[:top], start=1)]


def rank_definitions(*, cands: list[Candidate], aggregation: str = DEFAULT, top: int = 10,
                     past: list[PastCommit] | None = None, rank_k: float = RANK_K,
                     weight: float = WEIGHT) -> list[tuple[Def, float, list[int]]]:
    """(definition, score, the ranks of its chunks in `cands`) for the innermost functions, methods and classes the
    code candidates overlap, scored from those chunks by `aggregation` (with `past`, merged with their file's
    vote); one query for the definitions."""
    defs_of = _definitions_by_document({c.chunk.document_id for c in cands if c.chunk.kind == "code"})
    by_id: dict[int, Def] = {}
    ranked: list[tuple[int, float]] = []
    entry_rank: list[int] = []  # for each entry of `ranked`, the rank of its chunk in `cands`
    for i, c in enumerate(cands):
        defs = defs_of.get(c.chunk.document_id, [])
        for d in innermost_overlapping(definitions=defs, start_line=c.chunk.start_line, end_line=c.chunk.end_line):
            by_id[d.id] = d
            ranked.append((d.id, _score(c)))
            entry_rank.append(i)
    groups = aggregate(ranked=ranked, method=aggregation, positions=entry_rank)
    scored = [(g, g.score) for g in groups]
    if past:
        scored = merge(ranked=groups, file_of=lambda g: (by_id[g.key].dataset_id, by_id[g.key].path),
                       votes=file_votes(past), rank_k=rank_k, weight=weight)
    return [(by_id[g.key], score, sorted({entry_rank[r] for r in g.ranks})) for g, score in scored[:top]]


def locate(*, user: User | None, project: Project, spec: QuerySpec, top_files: int = 10, top_functions: int = 10,
           aggregation: str = DEFAULT, history: bool = True) -> LocateResult:
    """Rank files and definitions for `spec.q` from the candidates the query pipeline ranked (and logged), with
    the vote of the searched datasets' similar past commits unless `history` is off. The caller has authorised
    `project` (membership) and built `spec` (its `kind` says how it is logged)."""
    res = run_query(user=user, project=project, spec=spec)
    cands = [c for c in res.candidates if c.chunk is not None]
    t = time.perf_counter()
    flt = res.flt
    past = similar_commits(dataset_ids=flt.dataset_ids, task=spec.q) if history and cands and flt else []
    outside = voted_documents(votes=file_votes(past), flt=flt, exclude={(c.chunk.dataset_id, c.chunk.path)
                                                                         for c in cands}) if past and flt else []
    res.timings["history_ms"] = round((time.perf_counter() - t) * 1000, 2)
    files = rank_files(cands=cands, aggregation=aggregation, top=top_files, past=past, outside=outside)
    functions = []
    for d, score, chunk_ranks in rank_definitions(cands=cands, aggregation=aggregation, top=top_functions,
                                                  past=past):
        deadlines.check()
        out = {"rank": len(functions) + 1, "symbol": d.qualname, "name": d.name, "full_name": d.full_name,
               "kind": d.kind, "signature": d.signature, "path": d.path, "dataset_id": d.dataset_id,
               "start_line": d.start_line, "end_line": d.end_line, "span": f"{d.path}:{d.start_line}-{d.end_line}",
               "score": score, "chunks": _evidence(cands, chunk_ranks)}
        if len(functions) < NEIGHBOUR_TOP:
            out.update(_neighbours(project=project, d=d))
        else:
            out.update({"callers": [], "callees": []})
        functions.append(out)
    return LocateResult(session_id=res.session_id, files=files, functions=functions, aggregation=aggregation,
                        candidates=len(cands), timings=res.timings, reranker=res.reranker,
                        history=[c.as_dict() for c in past[:MAX_EVIDENCE]])
