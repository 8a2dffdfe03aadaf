"""Where do I change this? A task in words in, the files and the functions to edit out, ranked.

Why on top of the query pipeline and not beside it: the ranking an agent gets must be the one search gives (access,
filters, fusion, the path prior, the reranker, the log), so `locate` runs the same spec through `run_query` and only
regroups its candidates: files by `search.engine.aggregation` over their chunks, definitions by the innermost
function, method or class (the code tools' Symbol rows) each chunk overlaps. The graph neighbours of the top
definitions (callers and callees, `search.engine.code_graph`) say what else a change may touch; they are bounded
(NEIGHBOUR_TOP definitions, MAX_NEIGHBOURS each) and only uses that resolve to one definition are named.
Where the searched datasets follow git, the past commits whose messages read like the task vote for the files they
changed (search.engine.history_vote); files are ranked by the chunks and that vote together, definitions by
their chunks and by what the task names (search.engine.mentions).
Definitions then get a second look: the same query restricted to the best few files by their chunks
(focus_candidates), so a file ranked first shows the functions a change would touch, not only the ones that won
slots against the whole tree.
Source files come first (Ranking.sources_first), so the second look goes into the best source files.
Asked for (Ranking.windows), the window look (search.engine.definition_windows) last scores the best WINDOW_TOP
definitions again by their best short window of lines, which the dense model reads whole where it reads only the
head of a long chunk.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from config import deadlines
from search.engine.aggregation import DEFAULT, aggregate
from search.engine.code_graph import DEF_FIELDS, FUNCTION_KINDS, Def, LineSpan, find_references, resolved_uses
from search.engine.definition_windows import WindowMatch, window_similarity
from search.engine.history_vote import (
    RANK_K,
    WEIGHT,
    PastCommit,
    evidence,
    file_votes,
    merge,
    similar_commits,
    vote_ranks,
    voted_documents,
)
from search.engine.mentions import mentioned_names, named_definitions
from search.engine.path_roles import is_aside
from search.engine.pipeline import QuerySpec, execute, fuse_legs, over, path_prior, recheck, retrieve_legs, run_query
from search.models import Document, Symbol

if TYPE_CHECKING:
    from accounts.models import User
    from projects.models import Project
    from search.engine.fusion import Candidate
    from search.engine.index_schema import IndexFilter

MAX_TOP_FILES = 50
MAX_TOP_FUNCTIONS = 50
MAX_EVIDENCE = 5      # supporting chunks listed per file or definition
NEIGHBOUR_TOP = 5     # definitions whose callers and callees are read
MAX_NEIGHBOURS = 5    # callers, and callees, listed per definition
# The second look inside the top files (focus_candidates) and how its definition ranks count against the first
# pass's. Chosen with the bench's sweep on the 15 commits of click, httpx and seaborn before the reported ones
# (docs/benchmarks/code-localisation.md): 1, 3 and 5 files, weights 0.5 to 2.
FOCUS_FILES = 3
FOCUS_WEIGHT = 1.0
# What the task names (search.engine.mentions) against the first pass's definition ranks: chosen on the same
# commits as FOCUS_WEIGHT.
NAME_WEIGHT = 1.0
# The window look (search.engine.definition_windows), when asked for: how many of the best definitions it scores
# again, and the weight of their window ranks against their order so far. The weight was chosen on the development
# window (the 15 commits of click, httpx and seaborn before the reported ones; bench/results/
# code_commits_dev_windows.md): function R@10 0.648 without the look, 0.646 at weight 0.5, 0.659 at 1, 0.702 at 2.
# On the four test windows it moved function R@10 by nothing measurable for ten times the time of a call
# (docs/benchmarks/code-localisation.md), so it is off unless a request asks (Ranking.windows).
WINDOW_TOP = 30
WINDOW_WEIGHT = 2.0


@dataclass(frozen=True)
class Ranking:
    """How `locate` ranks, beside what it ranks (the spec): the chunks' aggregation (search.engine.aggregation), the
    history vote and its weight, the second look inside the top files and its weight, the definitions the task
    names (search.engine.mentions) and their weight, the reciprocal-rank constant their ranks are merged with, and
    whether source files (and their definitions) come before tests, docs and examples (search.engine.path_roles:
    the benchmark's gold counts only source files, and an agent edits them; the others still follow). The API sets
    `aggregation`, `history`, `names` and `sources_first`; the rest are the measured defaults, varied by the
    benchmark's sweep: `name_files` (the files of named definitions lifted too), `vote_definitions` (a
    definition takes its file's vote) and `focus_by_vote` (the second look goes into the top files as the vote
    ranked them, not as their chunks did) are off. On the commits the constants are chosen on, the first changed
    nothing, and the vote reaching definitions by either way lowered function recall (@10 0.643 -> 0.625, @5
    0.495 -> 0.448) while it raised file recall: so the vote ranks the files and only the files
    (docs/benchmarks/code-localisation.md). `enclosing_functions` (on): a chunk of a function names the function
    as well as the helpers defined inside it (innermost_overlapping); off only for the benchmark's comparison.
    `windows` (off; the API's `windows`): the window look (window_look), over the best `window_top` at
    `window_weight`; measured on the test windows, it moved function recall by nothing measurable for ten times the
    time of a call, so it is there for the evidence (each definition's lines that read most like the task) and a
    caller who wants it."""

    aggregation: str = DEFAULT
    history: bool = True
    focus_files: int = FOCUS_FILES
    rank_k: float = RANK_K
    vote_weight: float = WEIGHT
    focus_weight: float = FOCUS_WEIGHT
    sources_first: bool = True
    names: bool = True
    name_weight: float = NAME_WEIGHT
    name_files: bool = False
    vote_definitions: bool = False
    focus_by_vote: bool = False
    enclosing_functions: bool = True
    windows: bool = False
    window_top: int = WINDOW_TOP
    window_weight: float = WINDOW_WEIGHT


DEFAULT_RANKING = Ranking()


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


def _evidence(ranked: list[tuple[int, Candidate]]) -> list[dict[str, Any]]:
    """The supporting chunks, each with its 0-based rank (listed from 1)."""
    out = []
    for rank, cand in ranked[:MAX_EVIDENCE]:
        ch = cand.chunk
        out.append({"chunk_id": ch.pk, "rank": rank + 1, "score": _score(cand), "symbol": ch.symbol,
                    "start_line": ch.start_line, "end_line": ch.end_line,
                    "span": f"{ch.path}:{ch.start_line}-{ch.end_line}"})
    return out


def innermost_overlapping(*, definitions: list[Def], start_line: int, end_line: int,
                          enclosing: bool = True) -> list[Def]:
    """The definitions a chunk of lines start-end reads: those overlapping it that enclose none of the others
    overlapping it, and a function or method that does but whose own lines (outside those nested in it) the chunk
    covers too. So a chunk of two methods names both methods, not their class; a chunk of a class header names the
    class; a chunk of a function with a helper defined inside names the function and the helper. Why not the
    innermost alone for functions: a function is one chunk with its nested helpers, and the change is as often in
    the function's own lines as in the helper's (the benchmark's gold, like the history's, is the innermost
    definition of each changed line), so naming the helper alone hid every function that has one. `enclosing`
    off: the innermost alone, as before (Ranking.enclosing_functions, the benchmark's comparison)."""
    over = [d for d in definitions if d.start_line <= end_line and start_line <= d.end_line]
    named = []
    for d in over:
        inside = [o for o in over if o is not d and d.start_line <= o.start_line and o.end_line <= d.end_line
                  and (o.start_line, o.end_line) != (d.start_line, d.end_line)]
        if not inside:
            named.append(d)
        elif enclosing and d.kind != "class":
            own = set(range(max(start_line, d.start_line), min(end_line, d.end_line) + 1))
            for o in inside:
                own.difference_update(range(o.start_line, o.end_line + 1))
            if own:
                named.append(d)
    return named


def _window(d: Def, match: WindowMatch | None) -> dict[str, Any] | None:
    if match is None:
        return None
    return {"start_line": match.start_line, "end_line": match.end_line,
            "span": f"{d.path}:{match.start_line}-{match.end_line}", "similarity": round(match.similarity, 4)}


def _definitions_by_document(document_ids: set[int]) -> dict[int, list[Def]]:
    out: dict[int, list[Def]] = {}
    for row in Symbol.objects.filter(document_id__in=sorted(document_ids), kind__in=FUNCTION_KINDS).order_by(
            "document_id", "start_line").values_list(*DEF_FIELDS):
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


def rank_files(*, cands: list[Candidate], top: int = 10, ranking: Ranking = DEFAULT_RANKING,
               past: list[PastCommit] | None = None, outside: list[dict[str, Any]] | None = None,
               named: list[tuple[Def, int]] | None = None) -> list[dict[str, Any]]:
    """The files of the loaded candidates (best first), scored from their chunks by the ranking's aggregation; with
    `past`
    (the similar past commits), merged with their vote (search.engine.history_vote) and `score` is the merged
    one. `outside`: voted files no candidate chunk is in (history_vote.voted_documents), ranked after every
    candidate file before the merge. Each file lists its chunks and the past commits that changed it."""
    entries = []
    for g in aggregate(ranked=[((c.chunk.dataset_id, c.chunk.path), _score(c)) for c in cands],
                       method=ranking.aggregation):
        ch = cands[g.ranks[0]].chunk
        entries.append(({"path": ch.path, "repo": ch.repo, "lang": ch.lang, "dataset_id": ch.dataset_id,
                         "document_id": ch.document_id, "chunks": _evidence([(r, cands[r]) for r in g.ranks])}, g.score))
    entries += [({**f, "chunks": []}, 0.0) for f in outside or []]
    if past:
        entries = merge(ranked=[e for e, _ in entries], file_of=lambda e: (e["dataset_id"], e["path"]),
                        votes=file_votes(past), rank_k=ranking.rank_k, weight=ranking.vote_weight)
    if named and ranking.name_files:
        entries = _lift_named_files(entries=entries, named=named, ranking=ranking, merged=bool(past))
    if ranking.sources_first:
        entries.sort(key=lambda e: is_aside(e[0]["path"]))  # stable: each part keeps its order
    return [{"rank": rank, **entry, "score": score,
             "history": evidence(past or [], dataset_id=entry["dataset_id"], path=entry["path"])}
            for rank, (entry, score) in enumerate(entries[:top], start=1)]


def _lift_named_files(*, entries: list[tuple[dict[str, Any], float]], named: list[tuple[Def, int]],
                      ranking: Ranking, merged: bool) -> list[tuple[dict[str, Any], float]]:
    """The files of the definitions the task names, lifted by `name_weight/(rank_k + the order of the mention)` (the
    first mention in a file counts), those no chunk reached added; scores become reciprocal ranks where no vote was
    merged."""
    said: dict[tuple[int, str], int] = {}
    for d, order in named:
        said[(d.dataset_id, d.path)] = min(order, said.get((d.dataset_id, d.path), order))
    have = {(e["dataset_id"], e["path"]) for e, _ in entries}
    new = {(d.dataset_id, d.path): d for d, _ in named if (d.dataset_id, d.path) not in have}
    repos = dict(Document.objects.filter(pk__in=[d.document_id for d in new.values()]).values_list("pk", "repo"))
    entries = entries + [({"path": d.path, "repo": repos.get(d.document_id, ""), "lang": d.lang,
                           "dataset_id": d.dataset_id, "document_id": d.document_id, "chunks": []}, 0.0)
                         for d in new.values()]
    scored = []
    for i, (e, score) in enumerate(entries):
        base = score if merged else 1.0 / (ranking.rank_k + i + 1)
        at = said.get((e["dataset_id"], e["path"]))
        scored.append((i, e, base + (ranking.name_weight / (ranking.rank_k + at) if at else 0.0)))
    scored.sort(key=lambda t: (-t[2], t[0]))
    return [(e, score) for _, e, score in scored]


def focus_candidates(*, user: User | None, project: Project, spec: QuerySpec, flt: IndexFilter,
                     files: list[dict[str, Any]], top: int = FOCUS_FILES) -> list[Candidate]:
    """A second look inside the `top` best files: the same legs and fusion, restricted to those files' paths (and
    datasets), as deep as the first pass. Why: the first pass ranks chunks across the whole tree, so a large file's
    functions compete with every other file's for its `candidates` slots, and a file ranked first may show none of
    the functions a change would touch. Restricted, its own chunks fill the slots.
    No reranker and no log: the first pass was the logged query; this one only orders definitions. `locate` hands it
    the files ranked by their chunks alone (Ranking.focus_by_vote off)."""
    keys = {(f["dataset_id"], f["path"]) for f in files[:top]}
    if not keys:
        return []
    sub = replace(flt, dataset_ids=sorted({d for d, _ in keys}), paths=sorted({p for _, p in keys}))
    run = execute(spec=replace(spec, log=False, graph=False), project=project, user=user,
                  stages=(over(sub), retrieve_legs, fuse_legs, recheck, path_prior))
    return [c for c in run.cands if c.chunk is not None and (c.chunk.dataset_id, c.chunk.path) in keys]


def _definition_groups(*, cands: list[Candidate], aggregation: str, defs_of: dict[int, list[Def]],
                       enclosing: bool = True) -> tuple[list[Any], list[int], dict[int, Def]]:
    """The definitions `cands` overlap, grouped and ranked by `aggregation` over their chunks' scores; with, for
    each group entry, the rank of its chunk in `cands`."""
    by_id: dict[int, Def] = {}
    ranked: list[tuple[int, float]] = []
    entry_rank: list[int] = []
    for i, c in enumerate(cands):
        for d in innermost_overlapping(definitions=defs_of.get(c.chunk.document_id, []),
                                       start_line=c.chunk.start_line, end_line=c.chunk.end_line,
                                       enclosing=enclosing):
            by_id[d.id] = d
            ranked.append((d.id, _score(c)))
            entry_rank.append(i)
    return aggregate(ranked=ranked, method=aggregation, positions=entry_rank), entry_rank, by_id


def rank_definitions(*, cands: list[Candidate], top: int = 10, ranking: Ranking = DEFAULT_RANKING,
                     past: list[PastCommit] | None = None, focus: list[Candidate] | None = None,
                     named: list[tuple[Def, int]] | None = None,
                     ) -> list[tuple[Def, float, list[tuple[int, Candidate]]]]:
    """(definition, score, its chunks with their 0-based ranks) for the innermost functions, methods and
    classes the code candidates overlap, scored from those chunks by the ranking's aggregation; one query for the
    definitions.

    Ranked by reciprocal ranks summed over what speaks for each: `1/(rank_k + rank among the first pass's
    definitions)`, with `focus` (focus_candidates) `focus_weight/(rank_k + rank among the focused pass's)`, with
    `named` (the definitions the task names, mentions.named_definitions) `name_weight/(rank_k + the order of its
    mention)`, and with `past` where `ranking.vote_definitions` is on `vote_weight/(rank_k + vote rank of its file)`
    (history_vote.merge's terms). A named definition no chunk reached is ranked by its name's term alone. With none
    of them, the score is the aggregated one. (`ranking.focus_by_vote` is the vote's other way in: the files the
    second look goes into.)

    A definition's own vote (the past commits that changed it, which the memory names) is listed as its evidence
    but does not rank it: chosen on the commits before the reported ones, it lowered function recall@10 on the
    reported ones (docs/benchmarks/code-localisation.md)."""
    aggregation, rank_k = ranking.aggregation, ranking.rank_k
    code = [c for c in cands if c.chunk.kind == "code"]
    seen = {c.chunk_id for c in cands}
    extra = [c for c in focus or [] if c.chunk.kind == "code" and c.chunk_id not in seen]
    pool = cands + extra  # a focus-only chunk's evidence rank counts on after the first pass's candidates
    defs_of = _definitions_by_document({c.chunk.document_id for c in code + (focus or [])})
    enclosing = ranking.enclosing_functions
    groups, entry_rank, by_id = _definition_groups(cands=cands, aggregation=aggregation, defs_of=defs_of,
                                                   enclosing=enclosing)
    chunks: dict[int, set[int]] = {g.key: {entry_rank[r] for r in g.ranks} for g in groups}
    if not past and not focus and not named:  # the chunks alone: the aggregated score
        if ranking.sources_first:
            groups = sorted(groups, key=lambda g: is_aside(by_id[g.key].path))
        return [(by_id[g.key], g.score, [(r, pool[r]) for r in sorted(chunks[g.key])]) for g in groups[:top]]
    score: dict[int, float] = {}
    first: dict[int, int] = {}
    for i, g in enumerate(groups):
        score[g.key] = 1.0 / (rank_k + i + 1)
        first[g.key] = i
    if focus:
        at = {c.chunk_id: len(cands) + n for n, c in enumerate(extra)}
        at.update({c.chunk_id: i for i, c in enumerate(cands)})
        f_groups, f_rank, f_by_id = _definition_groups(cands=focus, aggregation=aggregation, defs_of=defs_of,
                                                           enclosing=enclosing)
        for i, g in enumerate(f_groups):
            by_id.setdefault(g.key, f_by_id[g.key])
            score[g.key] = score.get(g.key, 0.0) + ranking.focus_weight / (rank_k + i + 1)
            chunks.setdefault(g.key, set()).update(at[focus[f_rank[r]].chunk_id] for r in g.ranks)
            first.setdefault(g.key, len(groups) + i)
    after = max(first.values(), default=-1) + 1  # a definition only named comes after every one a chunk reached
    for n, (d, order) in enumerate(named or []):
        by_id.setdefault(d.id, d)
        score[d.id] = score.get(d.id, 0.0) + ranking.name_weight / (rank_k + order)
        chunks.setdefault(d.id, set())
        first.setdefault(d.id, after + n)
    if past and ranking.vote_definitions:
        vote_rank = vote_ranks(file_votes(past))
        for key, d in by_id.items():
            at_vote = vote_rank.get((d.dataset_id, d.path))
            if at_vote is not None and key in score:
                score[key] += ranking.vote_weight / (rank_k + at_vote)
    aside = {key: ranking.sources_first and is_aside(d.path) for key, d in by_id.items()}
    order = sorted(score, key=lambda key: (aside[key], -score[key], first[key]))[:top]
    return [(by_id[key], score[key], [(r, pool[r]) for r in sorted(chunks[key])]) for key in order]


def window_look(*, ranked: list[tuple[Def, float, list[tuple[int, Candidate]]]], task: str,
                ranking: Ranking = DEFAULT_RANKING, merged: bool = True,
                ) -> tuple[list[tuple[Def, float, list[tuple[int, Candidate]]]], dict[int, WindowMatch]]:
    """The first `ranking.window_top` of `ranked` re-ranked with `window_weight/(rank_k + their rank by best
    window)` (search.engine.definition_windows) added to their scores, sources still first; the rest keep their
    order after them. `merged`: the scores are rank_definitions' reciprocal-rank sums, so the term adds to them;
    otherwise they are the chunks' aggregate, on another scale, and `1/(rank_k + rank so far)` stands in.
    Returns the new order, each with its new score, and the windows (the evidence)."""
    head = ranked[:ranking.window_top]
    matches = window_similarity(task=task, defs=[d for d, _, _ in head])
    by_window = {key: i for i, key in enumerate(sorted(matches, key=lambda key: -matches[key].similarity))}
    scored = []
    for i, (d, score, chunks) in enumerate(head):
        base = score if merged else 1.0 / (ranking.rank_k + i + 1)
        if d.id in by_window:
            base += ranking.window_weight / (ranking.rank_k + by_window[d.id] + 1)
        scored.append((ranking.sources_first and is_aside(d.path), -base, i, (d, base, chunks)))
    scored.sort(key=lambda t: t[:3])
    return [t[3] for t in scored] + ranked[ranking.window_top:], matches


def locate(*, user: User | None, project: Project, spec: QuerySpec, top_files: int = 10, top_functions: int = 10,
           ranking: Ranking = DEFAULT_RANKING) -> LocateResult:
    """Rank files and definitions for `spec.q` from the candidates the query pipeline ranked (and logged), with
    the vote of the searched datasets' similar past commits unless `ranking.history` is off, the definitions the
    task names unless `ranking.names` is off, and the definitions of the `ranking.focus_files` best files looked
    at again (focus_candidates; 0: not). The caller has authorised
    `project` (membership) and built `spec` (its `kind` says how it is logged)."""
    res = run_query(user=user, project=project, spec=spec)
    cands = [c for c in res.candidates if c.chunk is not None]
    t = time.perf_counter()
    flt = res.flt
    past = similar_commits(dataset_ids=flt.dataset_ids, task=spec.q) if ranking.history and cands and flt else []
    outside = voted_documents(votes=file_votes(past), flt=flt, exclude={(c.chunk.dataset_id, c.chunk.path)
                                                                         for c in cands}) if past and flt else []
    res.timings["history_ms"] = round((time.perf_counter() - t) * 1000, 2)
    mentions = mentioned_names(spec.q) if ranking.names and flt else []
    named = named_definitions(flt=flt, mentions=mentions) if mentions else []
    said: dict[int, str] = {d.id: mentions[order - 1].said for d, order in named}
    files = rank_files(cands=cands, top=top_files, ranking=ranking, past=past, outside=outside, named=named)
    functions = []
    # the second look goes into the best files by their chunks (ranking.focus_by_vote: by the listed order)
    looked = files if ranking.focus_by_vote or not past else rank_files(cands=cands, top=ranking.focus_files,
                                                                         ranking=ranking)
    focus = focus_candidates(user=user, project=project, spec=spec, flt=flt, files=looked,
                             top=ranking.focus_files) if ranking.focus_files and flt else []
    looks = ranking.windows and ranking.window_weight > 0 and ranking.window_top > 0
    ranked = rank_definitions(cands=cands, top=max(top_functions, ranking.window_top) if looks else top_functions,
                              ranking=ranking, past=past, focus=focus, named=named)
    windows: dict[int, WindowMatch] = {}
    if looks and ranked:
        t = time.perf_counter()
        ranked, windows = window_look(ranked=ranked, task=spec.q, ranking=ranking,
                                      merged=bool(past or focus or named))
        res.timings["window_ms"] = round((time.perf_counter() - t) * 1000, 2)
    for d, score, chunks in ranked[:top_functions]:
        deadlines.check()
        out = {"rank": len(functions) + 1, "symbol": d.qualname, "name": d.name, "full_name": d.full_name,
               "kind": d.kind, "signature": d.signature, "path": d.path, "dataset_id": d.dataset_id,
               "start_line": d.start_line, "end_line": d.end_line, "span": f"{d.path}:{d.start_line}-{d.end_line}",
               "score": score, "chunks": _evidence(chunks), "named_as": said.get(d.id),
               "window": _window(d, windows.get(d.id)),
               "history": evidence(past, dataset_id=d.dataset_id, path=d.path, qualname=d.qualname)}
        if len(functions) < NEIGHBOUR_TOP:
            out.update(_neighbours(project=project, d=d))
        else:
            out.update({"callers": [], "callees": []})
        functions.append(out)
    return LocateResult(session_id=res.session_id, files=files, functions=functions,
                        aggregation=ranking.aggregation,
                        candidates=len(cands), timings=res.timings, reranker=res.reranker,
                        history=[c.as_dict() for c in past[:MAX_EVIDENCE]])
