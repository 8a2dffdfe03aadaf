"""A repository's history as training pairs and as the adoption check of an adapted embedding model.

Why history: every non-trivial commit of a followed repository is a message a person wrote about what had to
change, paired with the exact functions that changed (search.sources.git.history picks the commits, with the
commit benchmark's rules). That is the task a coding agent asks ("where do I change this?"), which the label-free
pairs (docstrings, comments, names: search.quality.adaptation) only approach.

What trains: for each qualifying first-parent commit up to the commit the dataset is synced at, its message (the
query) -> each function or method it changed, as the index embeds that function now (the chunk of the synced tree
that holds it: search.ingest.maintenance.chunk_embed_input). A merge on the first-parent line is one change
under its pull request's title (a repository that merges pull requests has most of its first-parent history as
merges); a file the history names at a path the tree has since moved (a package moved under src/) is found by its
path's tail (history.moved_path_resolver). A function the synced tree no longer holds is left out. Each pair trains against one hard negative, in turn: another function of the same file (the near miss a
file-level hit still makes) or a passage the served retriever ranks high for the message that is not in a changed
file (search.quality.hard_negatives: the mistakes the platform makes now).

What decides (a time split, as a user's next commit would be): the newest commits never train; the model is
adopted only where the served ranking's function- and file-level recall@10 on them gain with confidence
(decide_history). The old rule (held-out mined pairs) let a regression through on an unseen code collection; the
held-out pairs are drawn from the same chunks and pair types that trained, so they move with what training taught
(name words, comment words) whether or not real questions do. A commit is a question the repository actually asked.

Gold at the synced tree, not at each commit's parent: the dataset holds one tree, so a check commit's changed
functions are found where they are now. Both models are ranked over the same tree, so the comparison is paired
and fair; the absolute recall is not the benchmark's (bench/bench_code_commits.py indexes each commit's parent).

Too few qualifying commits (settings.ADAPT_HISTORY_MIN_COMMITS; ADAPT_HISTORY_MIN_CHECK of them check, at least): history neither trains nor decides, and the evidence says so; the
datasets keep the label-free pairs and rule (as repositories uploaded as archives, which have no history).
"""
from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from dulwich.repo import Repo

from search.engine.dataset_models import model_arg
from search.models import Chunk, Source, Symbol
from search.quality.fusion_choice import MIN_GAIN
from search.quality.hard_negatives import hard_negatives
from search.quality.metrics import BOOTSTRAP, lower_bound_95
from search.quality.runs import served_ranking
from search.sources.git import history as hp
from search.sources.git.sync import mirror_path

CHECK_SHARE = 0.2  # of the qualifying commits, the newest, for the check
MAX_CHECK = 100  # check commits at most (each is ranked twice, by the base and the adapted model)
MAX_COMMITS = 3000  # qualifying commits read at most (newest first)
MAX_WALK = 30000  # first-parent commits looked at, at most
MINING_SHARE = 0.5  # of the adaptation's time budget, history mining may take at most this part
K = 10  # recall@K, files and functions


@dataclass(frozen=True)
class GoldFunction:
    """A changed function as the synced tree holds it: its span and the chunk the index embeds it in."""

    dataset_id: int
    path: str
    qualname: str
    start_line: int
    end_line: int
    chunk_id: int


@dataclass(frozen=True)
class CommitCase:
    """One qualifying commit: its message, the files it changed and the functions of them the synced tree holds."""

    sha: str
    query: str
    dataset_id: int
    files: tuple[str, ...]
    functions: tuple[GoldFunction, ...]


@dataclass
class HistoryPool:
    """Every qualifying commit of the datasets' git sources, newest first within each source."""

    cases: list[CommitCase] = field(default_factory=list)
    sources: list[dict[str, Any]] = field(default_factory=list)  # per source: commit, commits read, skipped, why
    seconds: float = 0.0
    stopped: str = ""  # "time budget" when the deadline cut the walk


@dataclass
class HistorySplit:
    """The time split: `check` the newest commits (never trained on), `train` the older ones; `why` says why
    history is not used (empty when it is)."""

    train: list[CommitCase]
    check: list[CommitCase]
    pool: HistoryPool
    why: str = ""

    @property
    def used(self) -> bool:
        return not self.why

    def describe(self) -> dict[str, Any]:
        """What the manifest and the evidence keep: counts, the split's commits, the sources, why not."""
        out: dict[str, Any] = {
            "used": self.used, "commits": len(self.pool.cases), "sources": self.pool.sources,
            "mine_seconds": round(self.pool.seconds, 1), "stopped": self.pool.stopped or None,
            "train_commits": len(self.train), "check_commits": len(self.check),
            "train_functions": sum(len(c.functions) for c in self.train),
            "check": [c.sha for c in self.check], "train_shas": [c.sha for c in self.train]}
        if self.why:
            out["why"] = self.why
        return out


# ------------------------------------------------------------------------------------------------ mining
def _spans(dataset_id: int, paths: set[str]) -> tuple[dict[tuple[str, str], tuple[int, int]],
                                                       dict[str, list[tuple[int, int, int]]]]:
    """The synced tree's definitions {(path, qualname): span} and chunks {path: [(start, end, id)]} of `paths`."""
    defs = {(p, q): (s, e) for p, q, s, e in Symbol.objects.filter(dataset_id=dataset_id, path__in=paths).values_list(
        "path", "qualname", "start_line", "end_line")}
    chunks: dict[str, list[tuple[int, int, int]]] = {}
    for p, s, e, pk in Chunk.objects.filter(dataset_id=dataset_id, path__in=paths).order_by("start_line", "pk") \
            .values_list("path", "start_line", "end_line", "pk"):
        chunks.setdefault(p, []).append((s, e, pk))
    return defs, chunks


def _holding_chunk(chunks: list[tuple[int, int, int]], start: int, end: int) -> int | None:
    """The chunk that overlaps the span most (the first of equals): the one a function's search hit would be."""
    best, best_overlap = None, 0
    for s, e, pk in chunks:
        overlap = min(e, end) - max(s, start) + 1
        if overlap > best_overlap:
            best, best_overlap = pk, overlap
    return best


def _cases(*, store: Any, source: Source, pairs: list[hp.HistoryPair], deadline: float | None,
           skipped: dict[str, int], resolve: Callable[[str], str | None]) -> list[CommitCase]:
    """Each pair's changed functions, mapped to the synced tree's definitions and chunks. `resolve`: a path as the
    commit wrote it -> where the synced tree holds that file (hp.moved_path_resolver), or None."""
    prefix = source.config.get("subdir", "").strip("/")
    prefix = f"{prefix}/" if prefix else ""
    defs, chunks = _spans(source.dataset_id, {r for p in pairs for g in p.gold if (r := resolve(g))})
    out = []
    for pair in pairs:
        if deadline is not None and time.monotonic() > deadline:
            skipped["time budget"] = skipped.get("time budget", 0) + 1
            break
        commit = store[pair.sha.encode()]
        parent = store[commit.parents[0]]
        functions: dict[tuple[str, str], GoldFunction] = {}
        files = []
        for then in pair.gold:
            path = resolve(then)
            old = hp.blob_text(store, parent.tree, prefix + then)
            new = hp.blob_text(store, commit.tree, prefix + then)
            if old is None or path is None:
                continue
            files.append(path)
            for qualname in hp.changed_definitions(path=path, old=old, new=new or ""):
                span = defs.get((path, qualname))
                chunk = _holding_chunk(chunks.get(path, []), *span) if span else None
                if span and chunk is not None:
                    functions[(path, qualname)] = GoldFunction(source.dataset_id, path, qualname, span[0], span[1],
                                                               chunk)
        if not functions:
            skipped["no changed function in the synced tree"] = skipped.get(
                "no changed function in the synced tree", 0) + 1
        out.append(CommitCase(sha=pair.sha, query=pair.query, dataset_id=source.dataset_id, files=tuple(files),
                              functions=tuple(functions.values())))
    return out


def mine_history(*, dataset_ids: list[int], deadline: float | None = None, max_commits: int = MAX_COMMITS,
                 max_walk: int = MAX_WALK) -> HistoryPool:
    """The qualifying commits of the code datasets among `dataset_ids` that follow a git source, walked back from
    the commit each is synced at in its source's mirror. `deadline` (time.monotonic()) is checked before each
    commit is read and before each commit's diff is parsed; a cut walk keeps what it read and says so."""
    t0 = time.monotonic()
    pool = HistoryPool()
    for source in Source.objects.filter(dataset_id__in=dataset_ids, dataset__kind="code", type="git") \
            .order_by("dataset_id"):
        row: dict[str, Any] = {"dataset": source.dataset_id, "commit": (source.state or {}).get("commit") or None}
        pool.sources.append(row)
        path = mirror_path(source)
        if not row["commit"]:
            row["why"] = "not synced yet"
            continue
        if not (path / "HEAD").is_file():
            row["why"] = "no mirror of the source on this machine; the next sync makes one"
            continue
        resolve = hp.moved_path_resolver(
            Chunk.objects.filter(dataset_id=source.dataset_id).values_list("path", flat=True).distinct())
        skipped: dict[str, int] = {}
        with Repo(str(path), bare=True) as repo:
            pairs = hp.history_pairs(repo.object_store, row["commit"], subdir=source.config.get("subdir", ""),
                                     keep=lambda p, r=resolve: r(p) is not None,
                                     max_pairs=max(0, max_commits - len(pool.cases)), skipped=skipped,
                                     walk=hp.Walk(max_walk=max_walk, deadline=deadline, merges=True))
            cases = _cases(store=repo.object_store, source=source, pairs=pairs, deadline=deadline, skipped=skipped,
                           resolve=resolve)
        row.update({"commits": len(cases), "functions": sum(len(c.functions) for c in cases), "skipped": skipped})
        pool.cases += cases
        if "time budget" in skipped:
            pool.stopped = "time budget"
    pool.seconds = time.monotonic() - t0
    return pool


def split_history(pool: HistoryPool, *, check: bool = True, exclude_from_check: set[str] | None = None
                  ) -> HistorySplit:
    """The newest commits (by their order in each source's first-parent history, interleaved across sources)
    check: CHECK_SHARE of them, at least settings.ADAPT_HISTORY_MIN_CHECK and at most MAX_CHECK; the older ones
    train. Only commits with a changed function the synced tree holds take part. A commit in
    `exclude_from_check` (one a model already trained on) never checks. `check` False: every commit trains."""
    min_check = settings.ADAPT_HISTORY_MIN_CHECK if check else 0
    min_commits = max(settings.ADAPT_HISTORY_MIN_COMMITS, min_check + 2) if check else 2
    usable = [c for c in pool.cases if c.functions]
    if len(usable) < min_commits:
        found = f"{len(usable)} qualifying commits with a changed function in the git history"
        why = (f"{found} (at least {min_commits} are needed: {min_check} to check, the rest to train)"
               if pool.sources else "no git source: the datasets have no history")
        if pool.sources and all("why" in s for s in pool.sources):
            why = "; ".join(sorted({s["why"] for s in pool.sources}))
        return HistorySplit(train=[], check=[], pool=pool, why=why)
    by_source: dict[int, list[CommitCase]] = {}
    for c in usable:
        by_source.setdefault(c.dataset_id, []).append(c)
    n_check = min(MAX_CHECK, max(min_check, round(CHECK_SHARE * len(usable)))) if check else 0
    check: list[CommitCase] = []
    depth = 0
    while len(check) < n_check:  # round-robin over sources, newest first
        added = False
        for cases in by_source.values():
            if depth < len(cases) and len(check) < n_check:
                if cases[depth].sha not in (exclude_from_check or set()):
                    check.append(cases[depth])
                added = True
        if not added:
            break
        depth += 1
    oldest_checked = {c.dataset_id: i for c in check for i, x in enumerate(by_source[c.dataset_id]) if x == c}
    train = [c for ds, cases in by_source.items() for i, c in enumerate(cases)
             if i > oldest_checked.get(ds, -1)]  # strictly older than every check commit of its source
    return HistorySplit(train=train, check=check, pool=pool)


def training_examples(split: HistorySplit, *, dataset_ids: list[int], seed: int, deadline: float | None = None,
                      served: bool = True, log: Callable[[str], None] = print
                      ) -> tuple[list[tuple[str, int]], dict[str, list[int]]]:
    """(message, chunk id of a changed function) for every train commit, and per message its hard negatives
    in turn: another function of a changed file, then a passage the served retriever ranks high that is in no
    changed file, alternating (module docstring). `deadline` cuts the served ranking (the same-file negatives
    remain)."""
    pairs = [(c.query, f.chunk_id) for c in split.train for f in c.functions]
    gold_chunks = {c.query: {f.chunk_id for f in c.functions} for c in split.train}
    same_file: dict[str, list[int]] = {}
    for c in split.train:
        _, chunks = _spans(c.dataset_id, set(c.files))
        others = [pk for path in c.files for _, _, pk in chunks.get(path, []) if pk not in gold_chunks[c.query]]
        random.Random(f"{seed}-{c.sha}").shuffle(others)
        same_file[c.query] = others
    wrong = hard_negatives(judged=pairs, dataset_ids=dataset_ids, seed=seed, deadline=deadline, log=log) \
        if served and pairs else {}
    negatives = {}
    for q, near in same_file.items():
        far = wrong.get(q, [])
        negatives[q] = [x for pair in zip(near, far, strict=False) for x in pair] + near[len(far):] + far[len(near):]
    return pairs, negatives


# ------------------------------------------------------------------------------------------------ the check
def _recalls(ranked: list[int], case: CommitCase, where: dict[int, tuple[int, str, int, int]]
             ) -> tuple[float, float | None]:
    """(file recall@K, function recall@K or None) of one ranking of chunk ids: distinct files in rank order; a
    gold function is found when one of the first K chunks overlaps it in its file (the commit benchmark's rule)."""
    files: list[tuple[int, str]] = []
    for cid in ranked:
        ds, path, _, _ = where.get(cid, (0, "", 0, 0))
        if path and (ds, path) not in files:
            files.append((ds, path))
    gold_files = {(case.dataset_id, p) for p in case.files}
    file_r = len(gold_files & set(files[:K])) / len(gold_files)
    if not case.functions:
        return file_r, None
    spans = [where[c] for c in ranked[:K] if c in where]
    found = sum(1 for f in case.functions if any(ds == f.dataset_id and p == f.path and s <= f.end_line and
                                                 e >= f.start_line for ds, p, s, e in spans))
    return file_r, found / len(case.functions)


def interval_95(deltas: list[float], *, seed: int) -> tuple[float, float]:
    """Two-sided 95 % bootstrap interval of the mean paired gain (what the admin shows beside the gain)."""
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choices(deltas, k=len(deltas))) for _ in range(BOOTSTRAP))
    return means[int(0.025 * BOOTSTRAP)], means[min(BOOTSTRAP - 1, int(0.975 * BOOTSTRAP))]


def _level(base: list[float], adapted: list[float], *, seed: int) -> dict[str, Any]:
    deltas = [a - b for b, a in zip(base, adapted, strict=True)]
    out: dict[str, Any] = {"commits": len(deltas)}
    if not deltas:
        return out
    low, high = interval_95(deltas, seed=seed) if len(deltas) >= 2 else (deltas[0], deltas[0])
    out.update({"base": round(statistics.fmean(base), 4), "adapted": round(statistics.fmean(adapted), 4),
                "gain": round(statistics.fmean(deltas), 4), "interval_95": [round(low, 4), round(high, 4)],
                "gain_lower_95": round(lower_bound_95(deltas, seed=seed), 4) if len(deltas) >= 2 else 0.0,
                "unchanged": all(d == 0 for d in deltas)})
    return out


def time_split_gain(*, dataset_ids: list[int], name: str, check: list[CommitCase], seed: int = 15,
                    rank: Callable[[str | None], Callable[[str], list[int]]] | None = None) -> dict[str, Any]:
    """File and function recall@K of the datasets' served ranking on the check commits, with the vectors they are
    served with and with `name`'s: per level the means, the paired gain, its 95 % interval and one-sided lower
    bound. Searched in snapshots built from Postgres (served_ranking), so it runs beside the server."""
    queries = [c.query for c in check]
    scores: dict[str, list[tuple[float, float | None]]] = {}
    ranked_ids: set[int] = set()
    runs: dict[str, list[list[int]]] = {}
    for which, model in (("base", None), ("adapted", model_arg(name))):
        with served_ranking(dataset_ids=dataset_ids, model=model) as served:
            runs[which] = [served.rank(q) for q in queries]
        ranked_ids |= {cid for r in runs[which] for cid in r}
    where = {pk: (ds, p, s, e) for pk, ds, p, s, e in Chunk.objects.filter(pk__in=ranked_ids).values_list(
        "pk", "dataset_id", "path", "start_line", "end_line")}
    for which, rankings in runs.items():
        scores[which] = [_recalls(r, c, where) for r, c in zip(rankings, check, strict=True)]
    with_fn = [i for i, (_, fn) in enumerate(scores["base"]) if fn is not None]
    return {"commits": len(check), "k": K,
            f"file_recall@{K}": _level([f for f, _ in scores["base"]], [f for f, _ in scores["adapted"]], seed=seed),
            f"function_recall@{K}": _level([scores["base"][i][1] for i in with_fn],  # type: ignore[misc]
                                           [scores["adapted"][i][1] for i in with_fn], seed=seed)}


def decide_history(ev: dict[str, Any], *, min_gain: float = MIN_GAIN) -> tuple[bool, str]:
    """(adopt, why) on the time split: function recall must gain at least `min_gain` with its 95 % lower bound
    above zero, and file recall too, unless no check commit's file recall moved at all (nothing lost there).
    Fusion choice's confidence rule, on the commits the model never saw."""
    fn, files = ev.get(f"function_recall@{K}") or {}, ev.get(f"file_recall@{K}") or {}
    n = ev.get("commits", 0)

    def said(level: dict[str, Any], label: str) -> str:
        return (f"{label} recall@{K} {level.get('base')} -> {level.get('adapted')} ({level.get('gain', 0):+.4f}, "
                f"95 % lower bound {level.get('gain_lower_95', 0):+.4f})")

    def passes(level: dict[str, Any]) -> bool:
        return level.get("commits", 0) >= 2 and level["gain"] >= min_gain and level["gain_lower_95"] > 0

    text = f"newest {n} commits, never trained on: {said(fn, 'function')}; {said(files, 'file')}"
    if not passes(fn):
        return False, f"{text}; function recall must gain {min_gain} with a lower bound above 0"
    if not (passes(files) or files.get("unchanged")):
        return False, f"{text}; file recall must gain {min_gain} with a lower bound above 0, or not move"
    return True, text
