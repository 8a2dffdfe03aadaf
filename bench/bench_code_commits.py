"""Code search judged on real work: the commit message is the query, the files and functions the
commit changed are the gold, and the repository is indexed at the commit's parent, through the product.

Why real commits: a benchmark written by the people who tuned the ranking measures their taste; a commit message
was written by someone else, for someone else, about code that had to change. The repositories are ones no part
of the platform was tuned on (by default pallets/click and encode/httpx, command-line libraries and an HTTP
client, and mwaskom/seaborn, statistical plotting, twice click's source and of another domain; never the Python
stdlib, SymPy or this repository).

In time order: the measured commits are a repository's newest qualifying ones, and the cut-off is the first one's
parent. Whatever learns from the repository (the adapted model, the self-judged fusion) does so once, at the
cut-off, from the history and code up to it; every measured commit is later than anything it saw, as a user's next
commit would be.

Method, per repository (a local git directory, bare or not; nothing here touches the network):

1. Commits: first-parent history from HEAD; non-merge commits changing 1-4 *source* files (a language the code
   chunker parses: Python or a tree-sitter grammar; not under tests/, docs/, examples/, not test_*.py, conftest.py,
   setup.py, ...), at least one of them modified or deleted, whose subject has >= 4 words and is not a
   release/bump/typo/format/lint/merge/pre-commit message. The newest `--commits` of them, run oldest first.
   Query: subject + body, trailers (Signed-off-by, Co-authored-by, ...) and `(#123)` / `#123` refs stripped.
   The rules are the product's (search.sources.git.history.judge, which the label-free fusion choice also
   uses on a git source's history); this script only reads the log and diffs with the git binary.
2. Index: one Project and one code Dataset whose git source (file:// URL, local) follows a branch `bench` of a
   local bare clone (hard-linked objects); before each commit the branch is moved to the commit's parent and the
   dataset synced with `start_sync(run_now=True)`: the first sync is full, every later one a fast-forward, so the
   product's diff sync re-ingests only the files that changed in between. The index outbox is applied (and
   checked empty) before any query.
3. Gold files: the source files the commit modifies or deletes (paths at the parent; added files are not gold;
   changed tests/docs are not gold). Gold functions: for each old-side line the diff (`git diff -U0`) removes or
   changes, the innermost Symbol row (kinds function/method/class, as the product stored them at the parent) whose
   span holds it; a pure insertion counts for the innermost definition that strictly contains it (lines before
   and after inside it). Innermost, not every enclosing one: a class spanning 500 lines around a changed method
   would otherwise be "found" by any chunk of the class.
4. Rows: dense, sparse, fused (today's default ranking: `legs="hybrid"`, `STAGES`), fused + graph expansion
   (`graph=True`), fused + graph boost (`graph_signal.graph_boost` after `path_prior`), fused with the fusion
   `choose_fusion --self-judged` picks at the cut-off; then the answers at the level agents edit: the fused
   candidates regrouped into files and definitions by each aggregation of search.engine.aggregation (max, top3,
   rrf; search.engine.locate's rank_files / rank_definitions), and `locate` itself (the product's call, the API's
   spec: graph off, candidates 100). The history-adapted rows: the product's adaptation
   (search.quality.adaptation.adapt, with history pairs: search.quality.history_training) runs once at the
   cut-off on the dataset as synced there, every qualifying commit before it training (`history_check` off: the
   measured commits are the check) and steps capped for a shared 2-core CPU (`--adapt-steps`, `--adapt-budget-s`);
   a second dataset searched with that model (Dataset.embedding_model) follows the same branch, synced to each
   parent as the first, and `fused` and `locate` run on it. Chunk rows run through `execute` with the same STAGES,
   top_k 50, candidates 100, budget 64,000 tokens, no logging.
   Metrics: file recall@5/@10 (distinct files in result order; locate's and the regrouped rows' file ranking),
   function recall@5/@10 (chunk rows: a gold function is found when a top-k result's chunk span overlaps it in the
   same file, the graph row also counting the graph spans its top-10 pack added; locate and regrouped rows: the
   gold definition is one of the top k definitions), tokens to cover the gold files (chunk rows: span tokens summed
   in the packer's spending order, each file's macro summary the first time, until every gold file is in the
   pack; locate rows: the listed definitions' source at the parent, in rank order, until every gold file has one),
   and tokens to read the gold functions (the ranked chunks, or definitions, in order until every gold function
   is among them): medians over the commits, a commit never covered counting as infinite, and the share covered.
   Paired 95 % intervals: a bootstrap over commits of each row's difference from `fused` (locate adapted: from
   locate).

Get the repositories once (any git clone works; the defaults are the mirrors the helper tooling writes):

    git clone --bare https://github.com/pallets/click /work/.mirror/pallets+click/repo
    git clone --bare https://github.com/encode/httpx /work/.mirror/encode+httpx/repo
    git clone --bare https://github.com/mwaskom/seaborn /work/.mirror/mwaskom+seaborn/repo

Run (needs `git` on PATH):

    nice -n 5 .venv/bin/python bench/bench_code_commits.py [--repo PATH ...] [--commits 40] [--name code_commits]
        [--adapt auto|off|label-free] [--adapt-steps 120] [--adapt-budget-s 600] [--no-self-judged]

One report over several runs (each kept under the time a shared CPU allows), measuring nothing:

    .venv/bin/python bench/bench_code_commits.py --pool bench/results/A.json --pool bench/results/B.json --name code_commits
"""
from __future__ import annotations

import argparse
import json
import random
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import RESULTS, amx_line, machine, setup_django, table, write_result

DEFAULT_REPOS = ["/work/.mirror/pallets+click/repo", "/work/.mirror/encode+httpx/repo",
                 "/work/.mirror/mwaskom+seaborn/repo"]
BRANCH = "bench"
TOP_K = 50
CANDIDATES = 100
BUDGET = 64_000
FN_K = 10
# --history-sweep: the vote's constants tried, on the commits before the reported ones (--skip-newest). The first
# sweep (2026-12-06) tried k 10 and 60, weights 0.25 to 2 and both aggregations with 20 voters, and chose top3,
# k 10, w 0.5 (docs/benchmarks/code-localisation.md); a second grid tried the voters (10, 20, 40) and the files
# outside the candidates, and chose 20 with them; this grid tries the second look inside the top files
# (search.engine.locate.focus_candidates: how many files, and the weight of its ranks), and chose 3 files, w 1. (A
# definitions' own vote was tried after it, chosen at weight 2 and dropped when it lowered function recall on the
# reported commits; its code is in the history, its results in code_commits_dev_functions, _dev_grid and _locate.)
SWEEP_AGGREGATIONS = ("top3",)
SWEEP_K = (10.0,)
SWEEP_WEIGHT = (0.5,)
SWEEP_VOTERS = (20,)
SWEEP_OUTSIDE = (True,)
SWEEP_FOCUS = ((0, 0.0), (1, 1.0), (3, 0.5), (3, 1.0), (3, 2.0), (5, 0.5), (5, 1.0), (5, 2.0))
# --names-sweep: the weight of the definitions the task names (search.engine.locate.NAME_WEIGHT) beside the default,
# and the Ranking variants below, tried on the same development window (2026-12-06: weight 1; the named definitions'
# files changed nothing; a definition taking its file's vote lowered function R@5, 0.460 -> 0.448, and raised R@10 by
# one gold function of 43 commits, 0.623 -> 0.625, so it is off). Then the vote's last way into the definitions, the
# second look's files, was taken out too: on that window `locate without history` had the better functions (R@10
# 0.643 against 0.625, R@5 0.495 against 0.448) and the worse files, and with the vote ranking files only, locate's
# functions are exactly its functions.
NAMES_SWEEP = (0.5, 2.0, 4.0)
RANKING_VARIANTS = (("the named definitions' files lifted", {"name_files": True}),
                    ("each definition takes its file's vote", {"vote_definitions": True}),
                    ("the second look in the files the vote ranked", {"focus_by_vote": True}))
# --windows-sweep: the window look (search.engine.locate.window_look, off unless asked for) at other weights than
# its own. Its weight was chosen on the development window (2026-12-06, with 1 its weight then): function R@10 0.648
# without the look, 0.646 at weight 0.5, 0.659 at 1, 0.702 at 2 (bench/results/code_commits_dev_windows.md); so 2.
# On the four test windows it then moved function R@10 by nothing measurable, so `locate` leaves it off.
WINDOWS_SWEEP = (("the window look at weight 0.5", {"window_weight": 0.5}),
                 ("the window look at weight 1", {"window_weight": 1.0}),
                 ("the window look at weight 4", {"window_weight": 4.0}))
GOLD_FN_KINDS = ("function", "method", "class")
HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@", re.M)


# --------------------------------------------------------------------------- git
def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "--git-dir", str(repo), *args], check=True, capture_output=True)
    return out.stdout.decode("utf-8", errors="replace")


def git_dir(path: str) -> Path:
    """The git directory of a bare repository or of a work tree."""
    p = Path(path).resolve()
    return p / ".git" if (p / ".git").is_dir() else p


def repo_label(path: Path) -> str:
    """pallets+click/repo -> pallets/click; click.git -> click."""
    if path.name in ("repo", ".git"):
        return path.parent.name.replace("+", "/")
    return path.name.removesuffix(".git")


@dataclass
class Commit:
    sha: str
    parent: str
    subject: str
    query: str
    when: int
    gold_files: list[str]  # modified or deleted source files (paths at the parent)
    other_source: list[str]  # added source files (not gold)
    changed_other: int  # tests, docs, config changed beside them
    old_lines: dict[str, list[tuple[int, int, bool]]] = field(default_factory=dict)  # (start, end, insertion)


def old_side_lines(repo: Path, parent: str, sha: str, path: str) -> list[tuple[int, int, bool]]:
    """Old-side line ranges the diff changes: (start, end, False), or (after, after, True) for a pure insertion
    after old line `after`."""
    diff = git(repo, "diff", "-U0", "--no-renames", "--no-color", "--no-ext-diff", parent, sha, "--", path)
    out = []
    for m in HUNK.finditer(diff):
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        out.append((start, start, True) if count == 0 else (start, start + count - 1, False))
    return out


def select_commits(repo: Path, *, n: int, parsed_langs: set[str], skip_newest: int = 0
                   ) -> tuple[list[Commit], dict[str, int]]:
    """The newest n qualifying first-parent commits after the newest `skip_newest` (a development window before the
    reported commits), oldest first; -> (commits, why others were skipped)."""
    # the product's commit filters, one copy; imported after setup_django (the module reaches the models)
    from search.sources.git.history import SKIPS, Verdict, judge
    log = git(repo, "log", "--first-parent", "--format=%x1e%H%x1f%P%x1f%ct%x1f%B", "HEAD")
    skipped = dict.fromkeys(SKIPS, 0)
    picked: list[Commit] = []
    for rec in log.split("\x1e")[1:]:
        sha, parents, when, body = rec.split("\x1f", 3)
        parents_l = parents.split()
        if len(parents_l) != 1:
            skipped["merge or root"] += 1
            continue

        def changes(parent: str = parents_l[0], sha: str = sha) -> list[tuple[str, str]]:
            return [(s, p) for s, p in (ln.split("\t", 1) for ln in git(
                repo, "diff-tree", "--no-renames", "-r", "--name-status", parent, sha).splitlines() if "\t" in ln)]

        v = judge(body, changes, parsed_langs)
        if not isinstance(v, Verdict):
            skipped[v] += 1
            continue
        gold = list(v.gold)
        c = Commit(sha=sha, parent=parents_l[0], subject=v.subject, query=v.query, when=int(when),
                   gold_files=gold, other_source=list(v.added), changed_other=v.other)
        c.old_lines = {p: old_side_lines(repo, c.parent, sha, p) for p in gold}
        picked.append(c)
        if len(picked) >= n + skip_newest:
            break
    return picked[skip_newest:][::-1], skipped


# --------------------------------------------------------------------------- gold and metrics
def gold_functions(dataset: Any, commit: Commit) -> list[dict[str, Any]]:
    """Innermost function/method/class definitions (Symbol rows at the parent) the old-side changes touch."""
    from search.models import Symbol

    found: dict[int, dict[str, Any]] = {}
    for path, ranges in commit.old_lines.items():
        syms = list(Symbol.objects.filter(dataset=dataset, path=path, kind__in=GOLD_FN_KINDS)
                    .values("pk", "path", "qualname", "kind", "start_line", "end_line"))
        for start, end, insertion in ranges:
            lines = [start] if insertion else range(start, end + 1)
            for line in lines:
                if insertion:
                    holders = [s for s in syms if s["start_line"] <= line and s["end_line"] >= line + 1]
                else:
                    holders = [s for s in syms if s["start_line"] <= line <= s["end_line"]]
                if holders:
                    inner = min(holders, key=lambda s: (s["end_line"] - s["start_line"], -s["start_line"]))
                    found[inner["pk"]] = inner
    return sorted(found.values(), key=lambda s: (s["path"], s["start_line"]))


def distinct_files(top: list[Any]) -> list[str]:
    seen: list[str] = []
    for c in top:
        if c.chunk.path not in seen:
            seen.append(c.chunk.path)
    return seen


def overlaps(span: tuple[str, int, int], sym: dict[str, Any]) -> bool:
    path, start, end = span
    return path == sym["path"] and start <= sym["end_line"] and end >= sym["start_line"]


def pack_spans(pack: dict[str, Any], top: list[Any]) -> list[dict[str, Any]]:
    """The pack's spans in the order the packer spent its budget, each with path, lines, tokens and source.

    The packer marks `order`, `tokens` and `source` on each span; a pack from before that is
    replayed here exactly as packing.build_pack spends (by best rank, the file's macro with its first span)."""
    from search.engine.packing import count_tokens

    spans = [{"path": f["path"], **s, "_macro": f.get("macro_summary") or ""} for f in pack.get("files", [])
             for s in f["spans"]]
    if spans and all("order" in s and "tokens" in s for s in spans):
        return sorted(spans, key=lambda s: s["order"])
    rank = {c.chunk.pk: i for i, c in enumerate(top, start=1)}
    spans.sort(key=lambda s: min(rank.get(pk, 10**6) for pk in s.get("chunk_ids", [])))
    seen: set[str] = set()
    for i, s in enumerate(spans, start=1):
        s["order"] = i
        s["tokens"] = count_tokens(s["text"]) + (0 if s["path"] in seen else count_tokens(s["_macro"]))
        s.setdefault("source", "result")
        seen.add(s["path"])
    return spans


def tokens_to_read(ranked: list[tuple[tuple[str, int, int], int]], gold_fns: list[dict[str, Any]]) -> int | None:
    """Tokens an agent reads, taking the ranked spans ((path, start, end), tokens) in order, until every gold
    function overlaps one of them; None when the list never covers them (or there is no gold function)."""
    if not gold_fns:
        return None
    used, missing = 0, list(gold_fns)
    for span, tokens in ranked:
        used += tokens
        missing = [f for f in missing if not overlaps(span, f)]
        if not missing:
            return used
    return None


def tokens_to_cover(spans: list[dict[str, Any]], gold: set[str]) -> int | None:
    used, missing = 0, set(gold)
    for s in spans:
        used += s["tokens"]
        missing.discard(s["path"])
        if not missing:
            return used
    return None


@dataclass
class Row:
    name: str
    spec: dict[str, Any]
    stages: tuple[Any, ...]
    graph_fn: bool = False  # also count the graph spans of a top-10 pack for function recall
    self_judged: bool = False  # run with the fusion `choose_fusion --self-judged` picks at the first parent
    group: str = ""  # "locate": the product's locate(); an aggregation name: the fused candidates regrouped by it
    adapted: bool = False  # on the project whose dataset is searched with the model adapted before the cut-off
    history: bool = True  # locate rows: with the vote of similar past commits (search.engine.history_vote)
    focus: bool = True  # locate rows: with the second look inside the top files (search.engine.locate)
    sources_first: bool = True  # locate rows: source files before tests, docs and examples (search.engine.locate)
    names: bool = True  # locate rows: lift the definitions the task names (search.engine.mentions)
    name_weight: float | None = None  # a names sweep row: that weight instead of the default
    variant: dict[str, Any] | None = None  # a sweep row: these Ranking fields instead of the defaults
    vote: dict[str, Any] | None = None  # a sweep row: the regrouped candidates merged with the vote's constants


def measure(*, row: Row, project: Any, commit: Commit, gold_files: list[str], gold_fns: list[dict[str, Any]]
            ) -> dict[str, Any]:
    from search.engine.packing import count_tokens
    from search.engine.pipeline import QuerySpec, execute

    spec = QuerySpec(q=commit.query, top_k=TOP_K, candidates=CANDIDATES, budget_tokens=BUDGET, log=False,
                     **row.spec)
    t = time.perf_counter()
    run = execute(spec=spec, project=project, stages=row.stages)
    ms = (time.perf_counter() - t) * 1000
    files = distinct_files(run.top)
    gold = set(gold_files)
    spans10 = [(c.chunk.path, c.chunk.start_line, c.chunk.end_line) for c in run.top[:FN_K]]
    graph_spans = 0
    if row.graph_fn:  # the pack an agent would get from the top 10: its results plus what the graph added
        spec10 = QuerySpec(q=commit.query, top_k=FN_K, candidates=CANDIDATES, budget_tokens=BUDGET, log=False,
                           **row.spec)
        run10 = execute(spec=spec10, project=project, stages=row.stages)
        extra = [s for s in pack_spans(run10.pack, run10.top) if s.get("source") == "graph"]
        graph_spans = len(extra)
        spans10 += [(s["path"], s["start_line"], s["end_line"]) for s in extra]
    found_fns = [f for f in gold_fns if any(overlaps(sp, f) for sp in spans10)]
    found5 = [f for f in gold_fns if any(overlaps(sp, f) for sp in spans10[:5])]
    spans = pack_spans(run.pack, run.top)
    cover = tokens_to_cover(spans, gold)
    first = next((i for i, p in enumerate(files, start=1) if p in gold), None)
    return {"file_r5": len(gold & set(files[:5])) / len(gold), "file_r10": len(gold & set(files[:10])) / len(gold),
            "fn_r5": (len(found5) / len(gold_fns)) if gold_fns else None,
            "fn_r10": (len(found_fns) / len(gold_fns)) if gold_fns else None,
            "fn_tokens": tokens_to_read(
                [((c.chunk.path, c.chunk.start_line, c.chunk.end_line), count_tokens(c.chunk.text)) for c in run.top],
                gold_fns),
            "cover_tokens": cover, "pack_tokens": run.pack.get("tokens"), "pack_truncated": run.pack.get("truncated"),
            "graph_spans_top10": graph_spans if row.graph_fn else None,
            "graph_spans": sum(1 for s in spans if s.get("source") == "graph"),
            "first_gold_file_rank": first, "top_files": files[:10], "found_fns": [f["qualname"] for f in found_fns],
            "ms": round(ms, 1), "reranker": run.reranker_name, "models": run.embedding_models}


def source_lines(*, clone: Path, sha: str, path: str, cache: dict[tuple[str, str], list[str]]) -> list[str]:
    """The file's lines at `sha` (for the tokens of a definition's span), read once per commit and path."""
    if (sha, path) not in cache:
        cache[(sha, path)] = git(clone, "show", f"{sha}:{path}").splitlines()
    return cache[(sha, path)]


# --dump-definitions: the JSONL file each locate row's commit appends its ranked files and definitions to, with the
# gold, so an ordering over them can be studied offline without running the windows again
DUMP: dict[str, Path] = {}


def dump_definitions(*, row: Row, commit: Commit, res: Any, gold_files: list[str],
                     gold_fns: list[dict[str, Any]]) -> None:
    """One line: the commit, the gold, and locate's files and definitions as ranked (each definition with its
    kind, score, evidence ranks, whether the task named it, and its enclosing class's span where it is a method)."""
    from search.models import Symbol  # here, as in gold_functions: the models load only after main's setup_django()

    classes: dict[tuple[int, str, str], list[int] | None] = {}
    defs = []
    for f in res.functions:
        owner = f["symbol"].rpartition(".")[0]
        key = (f["dataset_id"], f["path"], owner)
        if owner and key not in classes:
            span = (Symbol.objects.filter(dataset_id=f["dataset_id"], path=f["path"], qualname=owner, kind="class")
                    .values_list("start_line", "end_line").first())
            classes[key] = list(span) if span else None
        defs.append({"path": f["path"], "start": f["start_line"], "end": f["end_line"], "symbol": f["symbol"],
                     "kind": f["kind"], "score": f["score"], "ranks": [c["rank"] for c in f["chunks"]],
                     "named": f["named_as"] is not None, "history": len(f["history"]),
                     "owner": owner, "owner_span": classes.get(key) if owner else None})
    line = {"row": row.name, "sha": commit.sha, "query": commit.query, "gold_files": gold_files,
            "gold_fns": [{"path": g["path"], "start": g["start_line"], "end": g["end_line"], "kind": g["kind"],
                          "symbol": g["qualname"]} for g in gold_fns],
            "files": [{"path": f["path"], "score": f["score"]} for f in res.files], "defs": defs}
    with DUMP["path"].open("a") as out:
        out.write(json.dumps(line, default=str) + "\n")


def measure_grouped(*, row: Row, project: Any, commit: Commit, gold_files: list[str], gold_fns: list[dict[str, Any]],
                    clone: Path, lines: dict[tuple[str, str], list[str]]) -> dict[str, Any]:
    """Files and definitions as an agent gets them: `locate` itself (row.group "locate", the API's spec: graph off,
    candidates 100), or the fused row's candidates regrouped by one aggregation (search.engine.aggregation).
    Function recall: a gold definition is one of the top definitions (same file and span). Tokens: the listed
    definitions' spans (their source at the parent) read in rank order, until every gold file has one listed and
    until every gold function is listed."""
    from search.engine.locate import (
        MAX_TOP_FILES,
        MAX_TOP_FUNCTIONS,
        Ranking,
        locate,
        rank_definitions,
        rank_files,
    )
    from search.engine.packing import count_tokens
    from search.engine.pipeline import QuerySpec, execute

    t = time.perf_counter()
    if row.group == "locate":
        ranking = replace(Ranking(), history=row.history, **({} if row.focus else {"focus_files": 0}),
                          **({} if row.sources_first else {"sources_first": False}),
                          **({} if row.names else {"names": False}),
                          **({} if row.name_weight is None else {"name_weight": row.name_weight}),
                          **(row.variant or {}))
        res = locate(user=None, project=project, spec=QuerySpec(q=commit.query, top_k=FN_K, candidates=CANDIDATES,
                                                                graph=False, log=False),
                     top_files=MAX_TOP_FILES, top_functions=MAX_TOP_FUNCTIONS, ranking=ranking)
        files = [f["path"] for f in res.files]
        defs = [(f["path"], f["start_line"], f["end_line"]) for f in res.functions]
        if "path" in DUMP:
            dump_definitions(row=row, commit=commit, res=res, gold_files=gold_files, gold_fns=gold_fns)
        models: list[str] = []
        reranker = res.reranker
    else:
        spec = QuerySpec(q=commit.query, top_k=TOP_K, candidates=CANDIDATES, budget_tokens=BUDGET, log=False,
                         **row.spec)
        run = execute(spec=spec, project=project, stages=row.stages)
        cands = [c for c in run.cands if c.chunk is not None]
        ranking = Ranking(aggregation=row.group)
        vote: dict[str, Any] = {}
        outside: list[dict[str, Any]] = []
        if row.vote is not None:  # the sweep: the same candidates and past commits, merged with other constants
            from search.engine.history_vote import file_votes, similar_commits, voted_documents

            past = similar_commits(dataset_ids=run.flt.dataset_ids, task=commit.query, voters=row.vote["voters"])
            vote = {"past": past}
            ranking = replace(ranking, rank_k=row.vote["rank_k"], vote_weight=row.vote["weight"],
                              focus_weight=row.vote["focus_weight"])
            if row.vote["outside"]:
                outside = voted_documents(votes=file_votes(past), flt=run.flt,
                                          exclude={(c.chunk.dataset_id, c.chunk.path) for c in cands})
        ranked_files = rank_files(cands=cands, top=MAX_TOP_FILES, ranking=ranking, outside=outside, **vote)
        files = [f["path"] for f in ranked_files]
        focus: dict[str, Any] = {}
        if row.vote is not None and row.vote.get("focus"):
            from search.engine.locate import focus_candidates

            focus = {"focus": focus_candidates(user=None, project=project, spec=spec, flt=run.flt,
                                               files=ranked_files, top=row.vote["focus"])}
        defs = [(d.path, d.start_line, d.end_line)
                for d, _, _ in rank_definitions(cands=cands, top=MAX_TOP_FUNCTIONS, ranking=ranking, **vote,
                                                **focus)]
        models, reranker = run.embedding_models, run.reranker_name
    ms = (time.perf_counter() - t) * 1000
    gold = set(gold_files)
    key = {(f["path"], f["start_line"], f["end_line"]): f for f in gold_fns}
    ranked = [(d, count_tokens("\n".join(source_lines(clone=clone, sha=commit.parent, path=d[0], cache=lines)
                                         [d[1] - 1:d[2]]))) for d in defs]
    cover, used, missing = None, 0, set(gold)
    for (path, _, _), tokens in ranked:
        used += tokens
        missing.discard(path)
        if not missing:
            cover = used
            break
    fn_tokens = None
    if gold_fns:
        used, want = 0, set(key)
        for d, tokens in ranked:
            used += tokens
            want.discard(d)
            if not want:
                fn_tokens = used
                break
    first = next((i for i, p in enumerate(files, start=1) if p in gold), None)
    return {"file_r5": len(gold & set(files[:5])) / len(gold), "file_r10": len(gold & set(files[:10])) / len(gold),
            "fn_r5": (len(set(key) & set(defs[:5])) / len(gold_fns)) if gold_fns else None,
            "fn_r10": (len(set(key) & set(defs[:FN_K])) / len(gold_fns)) if gold_fns else None,
            "fn_tokens": fn_tokens, "cover_tokens": cover, "pack_tokens": None, "pack_truncated": None,
            "graph_spans_top10": None, "graph_spans": 0, "first_gold_file_rank": first, "top_files": files[:10],
            "found_fns": [key[d]["qualname"] for d in defs[:FN_K] if d in key], "ms": round(ms, 1),
            "gold_fn_ranks": [defs.index(d) + 1 if d in defs else None for d in key],
            "reranker": reranker, "models": models}


def summarise(per_commit: list[dict[str, Any]], row: str) -> dict[str, Any]:
    outs = [c["rows"][row] for c in per_commit if row in c["rows"]]
    fns = [o["fn_r10"] for o in outs if o["fn_r10"] is not None]
    covered = [o["cover_tokens"] for o in outs if o["cover_tokens"] is not None]
    cover_all = sorted(o["cover_tokens"] if o["cover_tokens"] is not None else float("inf") for o in outs)
    cover_median = statistics.median(cover_all) if cover_all else None
    fn5 = [o.get("fn_r5") for o in outs if o.get("fn_r5") is not None]
    fn_read = sorted(o["fn_tokens"] if o.get("fn_tokens") is not None else float("inf") for o in outs
                     if o["fn_r10"] is not None)
    fn_read_median = statistics.median(fn_read) if fn_read else None
    return {"commits": len(outs), "file_r5": statistics.fmean(o["file_r5"] for o in outs) if outs else 0.0,
            "file_r10": statistics.fmean(o["file_r10"] for o in outs) if outs else 0.0,
            "fn_commits": len(fns), "fn_r10": statistics.fmean(fns) if fns else 0.0,
            "fn_r5": statistics.fmean(fn5) if fn5 else 0.0,
            # the published anchors' measure: a commit counts only where every gold file (function) is listed
            "file_all5": statistics.fmean(o["file_r5"] >= 1 - 1e-9 for o in outs) if outs else 0.0,
            "fn_all10": statistics.fmean(x >= 1 - 1e-9 for x in fns) if fns else 0.0,
            "fn_tokens_median": fn_read_median if fn_read_median != float("inf") else None,
            "fn_read": (sum(1 for x in fn_read if x != float("inf")) / len(fn_read)) if fn_read else 0.0,
            "cover_median": cover_median if cover_median != float("inf") else None,
            "covered": len(covered) / len(outs) if outs else 0.0,
            "graph_spans": statistics.fmean(o["graph_spans"] for o in outs) if outs else 0.0,
            "ms_p50": statistics.median(o["ms"] for o in outs) if outs else 0.0}


def paired_ci(per_commit: list[dict[str, Any]], a: str, b: str, metric: str, *, n: int = 2000,
              seed: int = 31) -> tuple[float, float, float, int] | None:
    """Mean of (a - b) over commits with both, and its 95 % paired-bootstrap interval."""
    diffs = [c["rows"][a][metric] - c["rows"][b][metric] for c in per_commit
             if a in c["rows"] and b in c["rows"] and c["rows"][a][metric] is not None
             and c["rows"][b][metric] is not None]
    if not diffs:
        return None
    rnd = random.Random(seed)
    means = sorted(statistics.fmean(rnd.choices(diffs, k=len(diffs))) for _ in range(n))
    return statistics.fmean(diffs), means[int(0.025 * n)], means[int(0.975 * n) - 1], len(diffs)


# --------------------------------------------------------------------------- indexing
def sync_to(*, dataset: Any, clone: Path, sha: str) -> dict[str, Any]:
    """Move the source's branch to `sha`, sync through the product, and make sure the index applied it."""
    from search.engine.applier import apply_until_indexed, last_outbox_id
    from search.engine.index import get_index, model_index
    from search.sources.sync import start_sync

    git(clone, "update-ref", f"refs/heads/{BRANCH}", sha)
    t = time.perf_counter()
    job = start_sync(dataset=dataset, run_now=True)
    if job.status != "done":
        raise RuntimeError(f"sync to {sha[:10]} failed: {job.error}")
    # the product's own read-your-writes wait (a count of rows past the watermark stays above zero for up to
    # GAP_GRACE_S while another model's rows sit between this model's: they look like a young gap)
    dataset.refresh_from_db()
    index = get_index()
    store = model_index(index, name=dataset.embedding_model)  # "" (the configured model) is `index` itself
    if not apply_until_indexed(index=index, store=store, through=last_outbox_id(index=store), timeout=300):
        raise RuntimeError("the index did not take the sync's rows within 300 s")
    return {"s": time.perf_counter() - t, "mode": (job.result or {}).get("mode"),
            "files": (job.result or {}).get("changed_total", 0) + (job.result or {}).get("deleted_total", 0),
            "chunks_written": job.chunks_written, "embeddings": job.embeddings_computed}


def check_exact(*, dataset: Any, clone: Path, sha: str) -> dict[str, Any]:
    """After the diff syncs: do the dataset's documents and symbols equal a fresh read of the tree at `sha`, and do
    the product's own checks (reconcile_code's, reconcile_index's) find it exact?"""
    from dulwich.repo import Repo

    from search.engine.reconcile import reconcile
    from search.ingest.code import code_document
    from search.ingest.code_facts import check, facts_of
    from search.ingest.formats import registry
    from search.models import Document, Symbol
    from search.sources.git.objects import read_blob
    from search.sources.git.sync import tree_files

    repo = Repo(str(clone))
    try:
        store = repo.object_store
        want_docs: dict[str, str] = {}
        want_defs: dict[str, set[tuple[Any, ...]]] = {}
        for rel, blob in tree_files(store, store[sha.encode()].tree, kind="code").items():
            data, _ = read_blob(store, blob, limit=registry.max_bytes(rel))  # the sync's own size limit
            if data is None:
                continue
            draft, _ = code_document(rel=rel, data=data, repo="x")
            if draft is None:
                continue
            want_docs[rel] = draft.content_hash
            text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
            want_defs[rel] = {(d.start_line, d.end_line, d.qualname, d.kind)
                              for d in facts_of(path=rel, lang=draft.lang, text=text).definitions}
    finally:
        repo.close()
    have_docs = dict(Document.objects.filter(dataset=dataset).values_list("path", "content_hash"))
    have_defs: dict[str, set[tuple[Any, ...]]] = {}
    for row in Symbol.objects.filter(dataset=dataset).values_list("path", "start_line", "end_line", "qualname",
                                                                   "kind"):
        have_defs.setdefault(row[0], set()).add(row[1:])
    differ = sorted(p for p in want_docs if want_defs.get(p, set()) != have_defs.get(p, set()))
    code = check(dataset_ids=[dataset.pk])
    index = reconcile(record=False)
    return {"missing": sorted(set(want_docs) - set(have_docs)), "extra": sorted(set(have_docs) - set(want_docs)),
            "stale": sorted(p for p in want_docs if p in have_docs and have_docs[p] != want_docs[p]),
            "symbols_differ": differ, "reconcile_code_exact": code.exact, "reconcile_index_exact": index.exact}


def rows_available(*, self_judged: bool = True, adapt: str = "auto", graph: bool = True,
                   sweep: bool = False, names_sweep: bool = False, windows_sweep: bool = False,
                   ) -> tuple[list[Row], list[str], list[str]]:
    """The rows this checkout can run, a TODO line for each it cannot yet, and what the product's default does.

    The dense, sparse and fused rows run without graph expansion and without the graph boost whatever the
    deployment's defaults (CODE_GRAPH_PACK, STAGES), so each graph row differs from `fused` by one thing."""
    import dataclasses
    import importlib.util

    from search.engine.pipeline import STAGES, QuerySpec, path_prior, with_stage

    todo: list[str] = []
    defaults: list[str] = []
    has_graph = "graph" in {f.name for f in dataclasses.fields(QuerySpec)}
    boost = None
    if importlib.util.find_spec("search.engine.graph_signal") is not None:
        from search.engine import graph_signal

        boost = getattr(graph_signal, "graph_boost", None)
    base = tuple(s for s in STAGES if s is not boost)
    off = {"graph": False} if has_graph else {}
    rows = [Row("dense", {"legs": "dense", **off}, base), Row("sparse", {"legs": "sparse", **off}, base),
            Row("fused", dict(off), base)]
    if not self_judged:
        todo.append("fused, self-judged fusion: not run (--no-self-judged)")
    elif importlib.util.find_spec("search.quality.self_judged") is not None:
        rows.append(Row("fused, self-judged fusion", dict(off), base, self_judged=True))
    else:
        todo.append("fused, self-judged fusion: TODO, not measured (no search.quality.self_judged in this checkout)")
    if not graph:
        todo.append("fused + graph expansion, fused + graph boost: not run (--no-graph)")
    elif has_graph:
        from search.engine.graph_context import graph_wanted

        rows.append(Row("fused + graph expansion", {"graph": True}, base, graph_fn=True))
        defaults.append(f"graph expansion in the product's default packs: {'on' if graph_wanted(graph=None) else 'off'}")
    else:
        todo.append("fused + graph expansion: TODO, not measured (QuerySpec has no `graph` field in this checkout)")
    if graph and boost is not None:
        rows.append(Row("fused + graph boost", dict(off), with_stage(base, boost, after=path_prior)))
        defaults.append(f"graph boost in the default STAGES: {'yes' if boost in STAGES else 'no'}")
    elif graph:
        todo.append("fused + graph boost: TODO, not measured (no search.engine.graph_signal.graph_boost in this "
                    "checkout)")
    if importlib.util.find_spec("search.engine.locate") is not None:
        from search.engine.aggregation import AGGREGATIONS, DEFAULT

        rows += [Row(f"fused, regrouped by {m}" + (" (locate's default)" if m == DEFAULT else ""), dict(off), base,
                     group=m) for m in AGGREGATIONS]
        rows.append(Row("locate", {}, STAGES, group="locate"))
        if importlib.util.find_spec("search.engine.history_vote") is not None:
            rows.append(Row("locate without history", {}, STAGES, group="locate", history=False))
            if importlib.util.find_spec("search.engine.locate") and hasattr(
                    importlib.import_module("search.engine.locate"), "focus_candidates"):
                rows.append(Row("locate without the second look", {}, STAGES, group="locate", focus=False))
            if hasattr(importlib.import_module("search.engine.locate").Ranking, "sources_first"):
                rows.append(Row("locate with tests and docs in place", {}, STAGES, group="locate",
                                sources_first=False))
            if hasattr(importlib.import_module("search.engine.locate").Ranking, "enclosing_functions"):
                rows.append(Row("locate naming only the innermost definitions", {}, STAGES, group="locate",
                                variant={"enclosing_functions": False}))
            if hasattr(importlib.import_module("search.engine.locate").Ranking, "windows"):
                rows.append(Row("locate with the window look", {}, STAGES, group="locate",
                                variant={"windows": True}))
                rows += [Row(f"locate, {label}", {}, STAGES, group="locate", variant={"windows": True} | variant)
                         for label, variant in (WINDOWS_SWEEP if windows_sweep else ())]
            if hasattr(importlib.import_module("search.engine.locate").Ranking, "names"):
                rows.append(Row("locate without the task's names", {}, STAGES, group="locate", names=False))
                rows += [Row(f"locate, the task's names at weight {w:g}", {}, STAGES, group="locate", name_weight=w)
                         for w in (NAMES_SWEEP if names_sweep else ())]
                rows += [Row(f"locate, {label}", {}, STAGES, group="locate", variant=variant)
                         for label, variant in (RANKING_VARIANTS if names_sweep else ())]
            if sweep:  # the merge's constants, for choosing them on commits before the reported ones
                rows += [Row(f"fused by {m} + history vote, k={k:g} w={w:g}, {n} voters"
                             + (", voted files outside the candidates" if out else "")
                             + (f", a second look in the top {nf} files (w {wf:g})" if nf else ""), dict(off), base,
                             group=m, vote={"rank_k": k, "weight": w, "voters": n, "outside": out, "focus": nf,
                                            "focus_weight": wf})
                         for m in SWEEP_AGGREGATIONS for k in SWEEP_K for w in SWEEP_WEIGHT for n in SWEEP_VOTERS
                         for out in SWEEP_OUTSIDE for nf, wf in SWEEP_FOCUS]
        else:
            todo.append("locate without history: TODO, not measured (no search.engine.history_vote in this "
                        "checkout)")
    else:
        todo.append("locate and the aggregations: TODO, not measured (no search.engine.locate in this checkout)")
    history = history_adaptation()
    if adapt == "off":
        todo.append("history-adapted model: not run (--adapt off)")
    elif history or adapt == "label-free":
        kind = "history-adapted" if history else "label-free adapted (no history pairs in this checkout)"
        rows += [Row(f"fused, {kind} model", dict(off), base, adapted=True),
                 Row(f"locate, {kind} model", {}, STAGES, group="locate", adapted=True)]
    else:
        todo.append("history-adapted model: TODO, not measured (search.quality.adaptation does not mine commit "
                    "pairs from a git source's history in this checkout; `--adapt label-free` measures the "
                    "label-free adaptation in its place)")
    return rows, todo, defaults


def history_adaptation() -> bool:
    """Does this checkout's adaptation mine (commit message -> changed function) pairs from a git source's history,
    beside the label-free ones? (search.quality.adaptation reading search.sources.git.history.)"""
    import dataclasses

    from search.quality.adaptation import AdaptConfig

    return "history" in {f.name for f in dataclasses.fields(AdaptConfig)}


def adapt_before_cutoff(*, dataset: Any, name: str, steps: int, budget_s: float) -> dict[str, Any]:
    """The product's adaptation on the dataset as synced at the cut-off (the first measured commit's parent), so only
    the history before it (and the code at it) can train; -> the model's manifest. Every qualifying commit before
    the cut-off trains (`history_check` off: the measured commits after it are this benchmark's check), no mined
    pair is held out (its check is not what decides on code with history, and encoding it twice would cost more
    than training here), and steps and time are capped for this CPU (the product's defaults: AdaptConfig)."""
    import dataclasses

    from search.quality.adaptation import AdaptConfig, adapt

    known = {f.name for f in dataclasses.fields(AdaptConfig)}
    want = {"steps": steps, "time_budget_s": budget_s, "heldout": 0.0, "history": True, "history_check": False}
    cfg = AdaptConfig(**{k: v for k, v in want.items() if k in known})
    res = adapt(name=name, dataset_ids=[dataset.pk], cfg=cfg, progress=False,
                log=lambda m: print(f"adapt {name}: {m}", file=sys.stderr))
    return res.manifest


def start_adapted(*, dataset: Any, label: str, clone: Path, cutoff: str, steps: int, budget_s: float
                  ) -> tuple[dict[str, Any], Any, Any]:
    """Adapt at the cut-off, then a project whose dataset is searched with the model, synced to the cut-off;
    -> (what the report says, that project, its dataset); a failed adaptation -> ({"error": ...}, None, None)."""
    from projects.models import Project
    from search.models import Dataset
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source

    name = label.rsplit("/", 1)[-1]
    model = f"bench-adapted-{name}"[:64]
    t = time.perf_counter()
    try:
        manifest = adapt_before_cutoff(dataset=dataset, name=model, steps=steps, budget_s=budget_s)
    except Exception as exc:  # noqa: BLE001 - the other rows still measure; the report says why this one did not
        print(f"{label}: adaptation failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {exc}"}, None, None
    adapt_s = time.perf_counter() - t
    project = Project.objects.create(slug=f"bench-adapted-{name}"[:50], name=f"Bench adapted {label}")
    ds = Dataset.objects.create(project=project, name=name, kind="code", embedding_model=model)
    set_source(user=None, dataset=ds, interval_s=None,
               spec=SourceSpec(type="git", config={"url": clone.as_uri(), "ref": BRANCH, "subdir": ""}, local=True))
    first = sync_to(dataset=ds, clone=clone, sha=cutoff)
    data = manifest.get("data", {})
    return ({"model": model, "cutoff": cutoff, "adapt_s": round(adapt_s, 1), "first_sync": first,
             "train_pairs": data.get("train_pairs"), "steps_by_type": data.get("steps_by_type"),
             "training": {k: v for k, v in (manifest.get("training") or {}).items() if isinstance(v, (int, float, str))},
             "cost": manifest.get("cost"),
             "history": {k: v for k, v in (data.get("history") or {}).items() if k not in ("check", "train_shas")}},
            project, ds)


def bench_repo(*, path: Path, n: int, rows: list[Row], tmp: Path, parsed_langs: set[str], skip_newest: int = 0,
               adapt_steps: int = 0, adapt_budget_s: float = 600.0,
               checkpoint: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    from tqdm import tqdm

    from projects.models import Project
    from search.models import Chunk, Dataset, Document, ProjectRanking, Symbol
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source

    label = repo_label(path)
    name = label.rsplit("/", 1)[-1]
    t0 = time.perf_counter()
    commits, skipped = select_commits(path, n=n, parsed_langs=parsed_langs, skip_newest=skip_newest)
    select_s = time.perf_counter() - t0
    print(f"{label}: {len(commits)} commits selected in {select_s:.1f} s (skipped {skipped})", file=sys.stderr)
    clone = tmp / f"{name}.git"
    subprocess.run(["git", "clone", "--bare", "--quiet", str(path), str(clone)], check=True)
    project = Project.objects.create(slug=f"bench-commits-{name}"[:50], name=f"Bench commits {label}")
    dataset = Dataset.objects.create(project=project, name=name, kind="code")
    set_source(user=None, dataset=dataset, interval_s=None,
               spec=SourceSpec(type="git", config={"url": clone.as_uri(), "ref": BRANCH, "subdir": ""}, local=True))
    per_commit: list[dict[str, Any]] = []
    syncs: list[dict[str, Any]] = []
    dropped: list[str] = []
    query_s = 0.0
    choice: dict[str, Any] = {}
    judged_project = project
    adapted: dict[str, Any] = {}
    adapted_project = adapted_dataset = None
    errors: list[str] = []
    lines: dict[tuple[str, str], list[str]] = {}
    for c in tqdm(commits, desc=label, unit="commit"):
        syncs.append(sync_to(dataset=dataset, clone=clone, sha=c.parent))
        if adapt_steps and not adapted and any(r.adapted for r in rows):
            # the cut-off: the first measured commit's parent; the model trains on what the dataset holds now (its
            # history and code up to here), then a second dataset searched with it follows the same branch
            adapted, adapted_project, adapted_dataset = start_adapted(
                dataset=dataset, label=label, clone=clone, cutoff=c.parent, steps=adapt_steps, budget_s=adapt_budget_s)
        elif adapted_dataset is not None:
            sync_to(dataset=adapted_dataset, clone=clone, sha=c.parent)
        if not choice and any(r.self_judged for r in rows):
            # label-free fusion choice, once, on the code as it stood before the first measured commit (no commit
            # message or later code takes part); the row runs it on an in-memory copy of the project
            from search.quality.self_judged import choose_self_judged

            picked = choose_self_judged(project=project, save=False)
            choice = {"adopted": picked.adopted, "label": picked.setting.label, "reason": picked.reason,
                      "pairs": picked.evidence.get("pairs"), "history": picked.evidence.get("history"),
                      "git_sources": picked.evidence.get("git_sources"),
                      "types": picked.evidence.get("types"),
                      "pick": picked.evidence.get("pick") and {**picked.evidence["pick"],
                                                               "baseline": picked.evidence.get("baseline")}}
            judged_project = Project.objects.get(pk=project.pk)
            judged_project.ranking = ProjectRanking(project=judged_project, fusion=picked.as_dict())  # not stored
        indexed = set(Document.objects.filter(dataset=dataset, path__in=c.gold_files).values_list("path", flat=True))
        gold_files = [p for p in c.gold_files if p in indexed]
        if not gold_files:
            dropped.append(c.sha[:10])
            continue
        c.old_lines = {p: r for p, r in c.old_lines.items() if p in indexed}
        fns = gold_functions(dataset, c)
        t = time.perf_counter()
        outs = {}
        for row in rows:
            on = adapted_project if row.adapted else judged_project if row.self_judged else project
            if on is None:
                continue
            try:
                outs[row.name] = measure_grouped(row=row, project=on, commit=c, gold_files=gold_files, gold_fns=fns,
                                                 clone=clone, lines=lines) if row.group else \
                    measure(row=row, project=on, commit=c, gold_files=gold_files, gold_fns=fns)
            except Exception as exc:  # noqa: BLE001 - one row's failure is reported, the others still measure
                errors.append(f"{row.name} at {c.sha[:10]}: {type(exc).__name__}: {exc}")
                print(f"{label}: {errors[-1]}", file=sys.stderr)
        lines.clear()
        query_s += time.perf_counter() - t
        per_commit.append({"repo": label, "sha": c.sha, "parent": c.parent, "subject": c.subject, "query": c.query,
                           "gold_files": gold_files, "added_source": c.other_source, "changed_other": c.changed_other,
                           "gold_functions": [f"{f['path']}:{f['qualname']} ({f['kind']} {f['start_line']}-"
                                              f"{f['end_line']})" for f in fns],
                           "rows": outs})
        if checkpoint is not None:  # a run stopped before the end still leaves what it measured
            checkpoint({"repo": label, "path": str(path), "head": "", "selected": len(commits),
                        "measured": len(per_commit), "partial": True, "per_commit": per_commit, "adapted": adapted,
                        "errors": errors, "query_s": query_s, "index": {}})
    exact = check_exact(dataset=dataset, clone=clone, sha=commits[-1].parent) if commits else {}
    first, later = (syncs[0], syncs[1:]) if syncs else ({}, [])
    return {"repo": label, "path": str(path), "head": git(path, "rev-parse", "HEAD").strip(),
            "selected": len(commits), "measured": len(per_commit), "dropped_not_indexed": dropped,
            "skipped": skipped, "per_commit": per_commit,
            "span": [time.strftime("%Y-%m-%d", time.gmtime(commits[0].when)),
                     time.strftime("%Y-%m-%d", time.gmtime(commits[-1].when))] if commits else [],
            "index": {"chunks": Chunk.objects.filter(dataset=dataset).count(),
                      "files": Document.objects.filter(dataset=dataset).count(),
                      "symbols": Symbol.objects.filter(dataset=dataset).count(),
                      "first_sync": first,
                      "later_syncs": {"n": len(later), "modes": sorted({s["mode"] for s in later}),
                                      "median_s": statistics.median(s["s"] for s in later) if later else None,
                                      "median_files": statistics.median(s["files"] for s in later) if later else None,
                                      "total_s": sum(s["s"] for s in later)}},
            "exact": exact, "query_s": query_s, "self_judged": choice, "adapted": adapted, "errors": errors}


# --------------------------------------------------------------------------- report
def exact_line(x: dict[str, Any]) -> str:
    if not x:
        return ""
    tree_ok = not (x["missing"] or x["extra"] or x["stale"])
    parts = [f"After the last diff sync the documents {'equal' if tree_ok else '**differ from**'} a fresh read of "
             f"the tree at the last parent"
             + ("" if tree_ok else f" (missing {len(x['missing'])}, extra {len(x['extra'])}, stale "
                                   f"{len(x['stale'])})"),
             f"the stored definitions {'equal' if not x['symbols_differ'] else '**differ from**'} a fresh "
             f"extraction" + (f" in {len(x['symbols_differ'])} files" if x["symbols_differ"] else ""),
             f"reconcile_code: {'exact' if x['reconcile_code_exact'] else '**not exact**'}",
             f"reconcile_index: {'exact' if x['reconcile_index_exact'] else '**not exact**'}"]
    return "; ".join(parts) + "."


def summary_table(per_commit: list[dict[str, Any]], rows: list[Row]) -> str:
    out = []
    for row in rows:
        s = summarise(per_commit, row.name)
        if not s["commits"]:
            continue
        cover = f"{s['cover_median']:,.0f}" if s["cover_median"] is not None else "not covered"
        fn_read = f"{s['fn_tokens_median']:,.0f}" if s["fn_tokens_median"] is not None else "not covered"
        out.append([row.name, s["commits"], f"{s['file_r5']:.3f}", f"{s['file_r10']:.3f}",
                    f"{s['fn_r5']:.3f}", f"{s['fn_r10']:.3f} ({s['fn_commits']})", f"{s['file_all5']:.0%}",
                    f"{s['fn_all10']:.0%}", cover,
                    f"{fn_read} ({s['fn_read']:.0%})",
                    f"{s['graph_spans']:.1f}" if row.spec.get("graph") else "—", f"{s['ms_p50']:.0f}"])
    return table(["row", "commits", "file R@5", "file R@10", "function R@5",
                  "function R@10 (commits with gold functions)", "every gold file in the top 5",
                  "every gold function in the top 10", "tokens to cover the gold files (median)",
                  "tokens to read the gold functions (median; share covered)", "graph spans per pack",
                  "query p50 ms"], out)


def chart(reports: dict[str, list[dict[str, Any]]], rows: list[Row], *, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = [("file_r5", "file R@5"), ("file_r10", "file R@10"), ("fn_r10", "function R@10"),
               ("covered", "gold files in pack")]
    fig, axes = plt.subplots(1, len(reports), figsize=(5.2 * len(reports), 4.6), squeeze=False)
    for ax, (name, per_commit) in zip(axes[0], reports.items(), strict=True):
        sums = {r.name: summarise(per_commit, r.name) for r in rows}
        width = 0.8 / len(metrics)
        for i, (m, label) in enumerate(metrics):
            ax.bar([x + (i - (len(metrics) - 1) / 2) * width for x in range(len(rows))],
                   [sums[r.name][m] for r in rows], width, label=label)
        ax.set_xticks(range(len(rows)), [r.name for r in rows], fontsize=8, rotation=25, ha="right")
        ax.set_ylim(0, 1.15)
        ax.set_title(f"{name} ({len(per_commit)} commits)", fontsize=10)
        ax.legend(loc="upper center", ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def repo_section(r: dict[str, Any]) -> list[str]:
    """A repository's paragraphs before its table: the index, the self-judged choice, the adapted model."""
    if r.get("partial"):
        return [f"## {r['repo']}", "", f"**A stopped run:** {r['measured']} of {r['selected']} selected commits "
                f"measured before it stopped (the index figures and exactness checks come at a run's end).", ""]
    parts: list[str] = []
    ix = r["index"]
    ls = ix["later_syncs"]
    parts += [f"## {r['repo']}", "",
              f"HEAD `{r['head'][:12]}`; {r['measured']} commits measured ({r['selected']} selected, "
              f"{r['span'][0] if r['span'] else '—'} to {r['span'][1] if r['span'] else '—'}); the index at the "
              f"last parent: {ix['files']} files, {ix['chunks']} chunks, {ix['symbols']} symbols. First sync "
              f"{ix['first_sync'].get('s', 0):.0f} s ({ix['first_sync'].get('mode')}); "
              f"{ls['n']} later syncs ({', '.join(ls['modes'])}): median {ls['median_s'] or 0:.1f} s and "
              f"{ls['median_files'] or 0:g} files re-ingested or deleted each. Gold functions found in "
              f"{sum(1 for c in r['per_commit'] if c['gold_functions'])} of {r['measured']} commits. "
              + exact_line(r["exact"]), ""]
    sj = r.get("self_judged") or {}
    if sj:
        kinds = "; ".join(
            f"{name}: {t['queries']} queries" + (
                f", its own pick-half best {t['pick_best']} (nDCG@10 {t['grid'][t['pick_best']]:.4f}; the "
                f"default {t['grid'][sj['pick']['baseline']]:.4f})" if "grid" in t and sj.get("pick") else "") + (
                f", confirm-half gain {t['confirm']['gain']:+.4f} (95 % lower bound "
                f"{t['confirm']['gain_lower_95']:+.4f}, {'passes' if t.get('passes') else 'fails'})"
                if "confirm" in t else ("" if t.get("used") else ", too few to take part"))
            for name, t in (sj.get("types") or {}).items())
        parts += [f"Self-judged fusion (choose_fusion --self-judged at the first parent, {sj['pairs']} documented "
                  f"functions and {sj.get('history') or 0} commit messages from the history up to that parent, "
                  f"never a measured commit): {'adopted' if sj['adopted'] else 'kept the default'} "
                  f"{sj['label']}: {sj['reason']}." + (f" Pick-half best {sj['pick']['best']}; {kinds}."
                                                       if sj.get("pick") else ""), ""]
    if r.get("errors"):
        parts += [f"Rows that failed ({len(r['errors'])}, left out of the means): " + "; ".join(r["errors"][:5]), ""]
    ad = r.get("adapted") or {}
    if ad.get("error"):
        parts += [f"Adapted model: the adaptation at the cut-off failed ({ad['error']}); its rows were not measured.",
                  ""]
    elif ad:
        tr = ad.get("training") or {}
        hi = ad.get("history") or {}
        cost = ad.get("cost") or {}
        parts += [f"Adapted model `{ad['model']}`, trained at the cut-off `{ad['cutoff'][:12]}` (the first measured "
                  f"commit's parent: only the history and code up to it) in {ad['adapt_s']:.0f} s (mining "
                  f"{cost.get('mine_seconds', '?')} s, training {cost.get('train_seconds', '?')} s): "
                  f"{tr.get('steps_run', '?')} steps ({tr.get('stopped', '')}); steps by pair type "
                  f"{ad.get('steps_by_type')}; training pairs by type {ad.get('train_pairs')}; history: "
                  + (f"{hi.get('train_commits')} commits, {hi.get('train_functions')} changed functions"
                     if hi.get("used") else f"not used ({hi.get('why', 'no history in this checkout')})")
                  + f". Its dataset's first sync at the cut-off: {ad['first_sync'].get('s', 0):.0f} s.", ""]
    return parts


def paired_lines(pooled: list[dict[str, Any]], rows: list[Row]) -> list[str]:
    """Each row's paired difference from the default (fused) and the baselines', the adapted locate's from locate,
    and locate's from locate without history and without the second look."""
    cis = []
    for other in ("dense", "sparse"):
        for metric, label in (("file_r10", "file R@10"), ("fn_r10", "function R@10")):
            ci = paired_ci(pooled, "fused", other, metric)
            if ci:
                cis.append(f"fused − {other}, {label}: {ci[0]:+.3f} (95 % paired bootstrap {ci[1]:+.3f} to "
                           f"{ci[2]:+.3f}, {ci[3]} commits)")
    for extra in [r.name for r in rows if r.name not in ("dense", "sparse", "fused")]:
        if any(r.name == extra for r in rows):
            for metric, label in (("file_r10", "file R@10"), ("fn_r10", "function R@10")):
                ci = paired_ci(pooled, extra, "fused", metric)
                if ci:
                    cis.append(f"{extra} − fused, {label}: {ci[0]:+.3f} (95 % paired bootstrap {ci[1]:+.3f} to "
                               f"{ci[2]:+.3f}, {ci[3]} commits)")
    base = next((r for r in rows if r.name.startswith("locate") and not r.adapted), None)
    for r in rows:
        ablation = r.group == "locate" and (not r.history or not r.focus or not r.sources_first or not r.names
                                            or r.name_weight is not None or r.variant is not None)
        if base is not None and ((r.adapted and r.group == "locate") or ablation):
            for metric, label in (("file_r10", "file R@10"), ("fn_r10", "function R@10")):
                a, b = (base.name, r.name) if ablation else (r.name, base.name)
                ci = paired_ci(pooled, a, b, metric)
                if ci:
                    cis.append(f"{a} − {b}, {label}: {ci[0]:+.3f} (95 % paired bootstrap {ci[1]:+.3f} "
                               f"to {ci[2]:+.3f}, {ci[3]} commits)")
    return cis


def rows_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [{"name": r.name, "graph": bool(r.spec.get("graph")), "group": r.group, "adapted": r.adapted,
             "self_judged": r.self_judged} for r in rows]


def write_report(*, reports: list[dict[str, Any]], rows: list[Row], meta: dict[str, Any], name: str) -> None:
    """The markdown (per repository, pooled, the paired intervals, the chart, each run's command and machine) and
    the JSON a later `--pool` reads back."""
    pooled = [c for r in reports for c in r["per_commit"]]
    for c in pooled:  # the JSON keeps each row's first five files; the models and reranker are said once
        for o in c["rows"].values():
            o["top_files"] = o["top_files"][:5]
            o.pop("models", None)
            o.pop("reranker", None)
    (RESULTS / f"{name}.json").write_text(json.dumps(
        {**meta, "rows": rows_json(rows),
         "top_k": TOP_K, "candidates": CANDIDATES, "budget": BUDGET,
         "pooled": {r.name: summarise(pooled, r.name) for r in rows},
         "repos": [{**rep, "summary": {r.name: summarise(rep["per_commit"], r.name) for r in rows}}
                   for rep in reports]}, indent=1, default=str) + "\n")
    parts = ["# Code search judged on real commits, in time order", "",
             f"The commit message is the query; the source files the commit modified or deleted, and the innermost "
             f"functions/methods/classes its old-side diff touches, are the gold; each repository is indexed at the "
             f"commit's parent through the product's git source (one full sync, then a diff sync per commit). "
             f"The measured commits are the newest qualifying ones; the cut-off is the first one's parent: what "
             f"trains or chooses (the adapted model, the self-judged fusion) sees only the history and code up to "
             f"it. Chunk rows: top_k {TOP_K}, candidates {CANDIDATES}, budget {BUDGET:,} tokens, the same STAGES "
             f"(path prior included); function R@k: a top-k chunk overlaps the gold definition; tokens to cover the "
             f"gold files: the pack's spans in the packer's spending order. Locate and regrouped rows: the files and "
             f"definitions of the same candidates; function R@k: the gold definition is one of the top k; tokens: "
             f"the listed definitions' source read in rank order. Tokens to read the gold functions: the ranked "
             f"chunks (or definitions) read in order until every gold function is among them. Medians count a "
             f"commit never covered as infinite. Recall is the mean over commits. Baselines, in the same run: the "
             f"dense and sparse rows, and `fused` (today's default ranking). Method: the script's docstring.", ""]
    for r in reports:
        parts += repo_section(r)
        parts += [summary_table(r["per_commit"], rows), ""]
    repos = len({r["repo"] for r in reports})
    most = max(Counter(r["repo"] for r in reports).values(), default=1)
    windows = f", {most} windows" if most > 1 else ""  # --pool over several windows of each repository
    every = [r for r in rows if all(r.name in c["rows"] for c in pooled)]
    some = [r for r in rows if r not in every and any(r.name in c["rows"] for c in pooled)]
    parts += [f"## Pooled ({repos} repositories{windows}, {len(pooled)} commits)", "", summary_table(pooled, every), ""]
    if some:  # --pool over runs with different rows (a sweep in some windows only): not comparable with the above
        parts += ["Rows only some of the pooled runs measured, each over the commits it was measured on (compare "
                  "them with the table above only through the paired differences below):", "",
                  summary_table(pooled, some), ""]
    cis = paired_lines(pooled, rows)
    parts += ["Paired differences, pooled (a bootstrap over commits, 2,000 resamples):", ""] + [f"- {x}" for x in cis] + [""]
    if meta["defaults"]:
        parts += ["The product's defaults in this checkout (the fused row runs without either): "
                  + "; ".join(meta["defaults"]) + ".", ""]
    if meta["todo"]:
        parts += ["Not measured in this run:", ""] + [f"- {t}" for t in meta["todo"]] + [""]
    png = chart({**{r["repo"]: r["per_commit"] for r in reports}, "pooled": pooled}, rows, path=RESULTS / f"{name}.png")
    syncs = sum(r["index"]["first_sync"].get("s", 0) + r["index"]["later_syncs"]["total_s"] for r in reports
                if r.get("index"))
    parts += [f"![code commits]({png.relative_to(RESULTS.parent.parent)})", "",
              f"Dense model(s): {', '.join(meta['models']) or '—'}; reranker: {', '.join(meta['rerankers'])}. "
              f"Whole run{'s' if len(meta['runs']) > 1 else ''} {meta['total_s'] / 60:.1f} min (syncs {syncs:.0f} s, "
              f"adaptation {sum((r.get('adapted') or {}).get('adapt_s', 0) for r in reports):.0f} s, "
              f"queries {sum(r['query_s'] for r in reports):.0f} s).", ""]
    for run in meta["runs"]:
        parts += [f"`{run['command']}` ({run['minutes']:.1f} min)", "", run["machine"], ""]
    write_result(name, "\n".join(parts))


def pool_runs(*, files: list[str], name: str, leave_out: tuple[str, ...] = ()) -> None:
    """One report over earlier runs' JSON files (each run under the per-run time a shared CPU allows), without the
    repositories named in `leave_out` (owner/name): the aims are pooled over three repositories, and a run of four
    reports both."""
    runs = [json.loads(Path(f).read_text()) for f in files]
    for run in runs:
        run["repos"] = [rep for rep in run["repos"] if rep["repo"] not in leave_out]
    rows: list[Row] = []
    for run in runs:
        for r in run["rows"]:
            if all(x.name != r["name"] for x in rows):
                rows.append(Row(r["name"], {"graph": True} if r["graph"] else {}, (), group=r["group"],
                                adapted=r["adapted"], self_judged=r["self_judged"]))
    meta = {"todo": sorted({t for run in runs for t in run["todo"]}), "defaults": runs[0]["defaults"],
            "models": sorted({m for run in runs for m in run["models"]}),
            "rerankers": sorted({m for run in runs for m in run["rerankers"]}),
            "total_s": sum(run["total_s"] for run in runs), "runs": [x for run in runs for x in run["runs"]]}
    write_report(reports=[rep for run in runs for rep in run["repos"]], rows=rows, meta=meta, name=name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", default=[],
                    help="a local git directory (repeatable); default: " + ", ".join(DEFAULT_REPOS))
    ap.add_argument("--commits", type=int, default=40, help="newest qualifying commits per repository")
    ap.add_argument("--name", default="code_commits", help="results file name under bench/results/")
    ap.add_argument("--no-self-judged", action="store_true", help="skip the self-judged fusion row")
    ap.add_argument("--no-graph", action="store_true", help="skip the graph expansion and graph boost rows")
    ap.add_argument("--adapt", choices=("auto", "off", "label-free"), default="auto",
                    help="the adapted-model rows: auto (when adaptation mines history pairs), off, or label-free "
                         "(run the adaptation this checkout has, labelled as such)")
    ap.add_argument("--adapt-steps", type=int, default=120,
                    help="training steps per repository (capped for a shared 2-core CPU; the product's default "
                         "is AdaptConfig.steps)")
    ap.add_argument("--adapt-budget-s", type=float, default=600.0,
                    help="mining and training time budget per repository")
    ap.add_argument("--skip-newest", type=int, default=0,
                    help="leave out the newest N qualifying commits: measure the N before them (a development "
                         "window for choosing constants, never the reported commits)")
    ap.add_argument("--history-sweep", action="store_true",
                    help="add rows merging the fused candidates with the history vote at each (k, weight) of the "
                         "sweep grid")
    ap.add_argument("--names-sweep", action="store_true",
                    help="add locate rows with the task's names at each weight of NAMES_SWEEP")
    ap.add_argument("--row", action="append", default=[], metavar="NAME",
                    help="run only these rows (repeatable), beside the dense, sparse and fused baselines: a test "
                         "window measured for one comparison in a third of the time")
    ap.add_argument("--windows-sweep", action="store_true",
                    help="add locate rows with the window look at each weight of WINDOWS_SWEEP")
    ap.add_argument("--dump-definitions", default="", metavar="FILE",
                    help="append each locate row's ranked files and definitions, with the gold, to FILE (JSONL)")
    ap.add_argument("--pool", action="append", default=[],
                    help="measure nothing: write one report pooling these earlier runs' JSON files (repeatable)")
    ap.add_argument("--leave-out", action="append", default=[], metavar="OWNER/NAME",
                    help="with --pool: leave this repository's commits out of the report (repeatable)")
    opts = ap.parse_args()
    if opts.leave_out and not opts.pool:
        sys.exit("--leave-out only applies with --pool")
    if opts.pool:
        pool_runs(files=opts.pool, name=opts.name, leave_out=tuple(opts.leave_out))
        return
    if shutil.which("git") is None:
        sys.exit("git is not on PATH (commit selection and diffs use it)")
    paths = [git_dir(p) for p in opts.repo] or [Path(p) for p in DEFAULT_REPOS if Path(p).is_dir()]
    if len(paths) < 1:
        sys.exit("no repository: pass --repo PATH (see the docstring for how to get the default ones)")
    if opts.dump_definitions:
        DUMP["path"] = Path(opts.dump_definitions).resolve()
    t_start = time.perf_counter()
    # a stopped run (SIGTERM) exits through atexit, so its embedded Postgres, Redis and Qdrant stop with it
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    setup_django()
    from django.conf import settings

    from search.ingest.syntax import GRAMMARS

    parsed_langs = {"python", *GRAMMARS}
    rows, todo, defaults = rows_available(self_judged=not opts.no_self_judged, adapt=opts.adapt,
                                          graph=not opts.no_graph, sweep=opts.history_sweep,
                                          names_sweep=opts.names_sweep, windows_sweep=opts.windows_sweep)
    if opts.row:
        unknown = set(opts.row) - {r.name for r in rows}
        if unknown:
            ap.error(f"--row: no such row in this checkout: {', '.join(sorted(unknown))}")
        rows = [r for r in rows if r.name in {"dense", "sparse", "fused", *opts.row}]
    tmp = Path(tempfile.mkdtemp(prefix="bench-commits-"))
    settings.SOURCES_GIT_DIR = tmp / "mirrors"
    reports: list[dict[str, Any]] = []
    partial = RESULTS / f"{opts.name}.partial.json"

    def checkpoint(rep: dict[str, Any]) -> None:
        """After each commit: the finished repositories and this one so far, readable by `--pool`."""
        minutes = (time.perf_counter() - t_start) / 60
        partial.write_text(json.dumps(
            {"todo": todo, "defaults": defaults, "models": [], "rerankers": [], "total_s": round(minutes * 60, 1),
             "runs": [{"command": run_command(opts, rows) + " (stopped)", "minutes": minutes,
                       "machine": machine() + " " + amx_line()}],
             "rows": rows_json(rows), "repos": [*reports, rep]}, indent=1, default=str) + "\n")

    try:
        for p in paths:
            reports.append(bench_repo(path=p, n=opts.commits, rows=rows, tmp=tmp, parsed_langs=parsed_langs,
                                      skip_newest=opts.skip_newest,
                                      adapt_steps=opts.adapt_steps, adapt_budget_s=opts.adapt_budget_s,
                                      checkpoint=checkpoint))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    total_s = time.perf_counter() - t_start
    pooled = [c for r in reports for c in r["per_commit"]]
    command = run_command(opts, rows)
    meta = {"todo": todo, "defaults": defaults,
            "models": sorted({m for c in pooled for o in c["rows"].values() for m in (o["models"] or [])}),
            "rerankers": sorted({str(o["reranker"]) for c in pooled for o in c["rows"].values()}),
            "total_s": round(total_s, 1),
            "runs": [{"command": command, "minutes": total_s / 60, "machine": machine() + " " + amx_line()}]}
    write_report(reports=reports, rows=rows, meta=meta, name=opts.name)
    partial.unlink(missing_ok=True)


def run_command(opts: argparse.Namespace, rows: list[Row]) -> str:
    """The command line that reproduces this run."""
    return (f".venv/bin/python bench/bench_code_commits.py --commits {opts.commits}"
            + "".join(f" --repo {p}" for p in opts.repo)
            + (f" --adapt {opts.adapt}" if opts.adapt != "auto" else "")
            + (f" --adapt-steps {opts.adapt_steps} --adapt-budget-s {opts.adapt_budget_s:g}"
               if any(r.adapted for r in rows) else "")
            + (" --no-self-judged" if opts.no_self_judged else "") + (" --no-graph" if opts.no_graph else "")
            + (f" --skip-newest {opts.skip_newest}" if opts.skip_newest else "")
            + (" --history-sweep" if opts.history_sweep else "")
            + (" --names-sweep" if opts.names_sweep else "")
            + (" --windows-sweep" if opts.windows_sweep else "")
            + "".join(f" --row {shlex.quote(r)}" for r in opts.row)
            + f" --name {opts.name}")


if __name__ == "__main__":
    main()
