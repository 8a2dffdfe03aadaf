"""A git-followed code dataset's past commits, kept for `locate`: each qualifying commit's message, embedded, the
source files it changed and the definitions it changed in them (search.models.CommitMemory; the vote that reads
them: search.engine.history_vote).

Why at sync time: the sync is what moves a dataset to a commit, so the memory grows with it and never holds a
commit later than the synced tree (a benchmark that syncs each commit's parent in turn asks about no future). A
re-sync reads only the new commits: the first-parent walk ends at the first commit already remembered. When the
new head does not descend from what is remembered (a force push, another ref) the memory is rebuilt.

Which commits: history.judge's rules (the commit benchmark's and the adaptation's), merges on the first-parent
line read as their pull request's title (a repository that merges pull requests keeps most of its history there).

Bounded inside the work: the walk checks its deadline (settings.SOURCES_GIT_COMMIT_MEMORY_S) before each commit,
embedding checks it between batches, and at most settings.SOURCES_GIT_COMMIT_MEMORY commits are kept (the newest).
The definitions each commit changed are named last, newest first, each commit checking the same deadline: they
cost about ten times the walk (two parses per changed file), so they never cut the history short; what a sync
leaves unnamed (and rows remembered before the memory named definitions) the next sync names.
A walk the deadline cut keeps what it read and the sync's result says so; the next sync goes on from the new head.
"""
from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import transaction
from dulwich.objects import Commit

from inference.encoders import dense_model_id, embed_cached
from search.models import CommitMemory, Source
from search.sources.git import history

EMBED_BATCH = 64  # messages embedded between deadline checks


def _rows(*, store: Any, source: Source, pairs: list[history.HistoryPair], model_id: str,
          deadline: float) -> tuple[list[CommitMemory], bool]:
    """The pairs as unsaved rows, embedded in batches; (rows, whether the deadline cut the embedding). Their
    definitions are left to _fill: naming them parses each changed file twice, ten times the walk's cost, so they
    must not cut the history short."""
    rows: list[CommitMemory] = []
    for start in range(0, len(pairs), EMBED_BATCH):
        if time.monotonic() > deadline:
            return rows, True
        batch = pairs[start:start + EMBED_BATCH]
        vectors = embed_cached([p.query for p in batch])
        for pair, vector in zip(batch, vectors, strict=True):
            commit = store[pair.sha.encode()]
            rows.append(CommitMemory(  # the subject: the query's first line (a merge's: its pull request's title)
                dataset_id=source.dataset_id, sha=pair.sha, query=pair.query, files=list(pair.gold),
                subject=pair.query.splitlines()[0][:300], model_id=model_id, embedding=vector.tolist(),
                committed_at=datetime.fromtimestamp(getattr(commit, "commit_time", 0), tz=UTC)))
    return rows, False


def _fill(*, store: Any, source: Source, deadline: float) -> tuple[int, int]:
    """The definitions each remembered commit changed, for the rows that lack them (functions NULL: just added, or
    remembered before the memory kept them), newest first, until the deadline; a commit the mirror no longer holds
    names none. -> (rows filled, rows still without)."""
    filled = 0
    subdir = source.config.get("subdir", "")
    todo = list(CommitMemory.objects.filter(dataset_id=source.dataset_id, functions__isnull=True)
                .order_by("-pk").values_list("pk", "sha", "files"))
    for pk, sha, files in todo:
        if time.monotonic() > deadline:
            break
        changed = history.commit_definitions(store, sha, files, subdir=subdir) if sha.encode() in store else []
        CommitMemory.objects.filter(pk=pk).update(functions=[list(f) for f in changed])
        filled += 1
    return filled, len(todo) - filled


def _first_known(*, store: Any, head: str, known: frozenset[str]) -> str | None:
    """The first remembered commit on `head`'s first-parent line (the one the walk ended at), or None."""
    sha = head.encode()
    for _ in range(settings.SOURCES_GIT_MAX_HISTORY):
        if sha.decode() in known:
            return sha.decode()
        commit = store[sha] if sha in store else None
        if not isinstance(commit, Commit) or not commit.parents:
            return None
        sha = commit.parents[0]
    return None


def refresh(*, source: Source, store: Any, head: str) -> dict[str, Any]:
    """Add the qualifying commits from `head` back to the newest one remembered (or all of them, up to the bound,
    when none is, or when `head` does not descend from what is remembered); -> what the sync reports."""
    keep = settings.SOURCES_GIT_COMMIT_MEMORY
    if keep <= 0:
        return {"off": True}
    t0 = time.monotonic()
    deadline = t0 + settings.SOURCES_GIT_COMMIT_MEMORY_S
    model_id = dense_model_id()
    mine = CommitMemory.objects.filter(dataset_id=source.dataset_id)
    known = frozenset(mine.filter(model_id=model_id).values_list("sha", flat=True))
    skipped: dict[str, int] = {}
    pairs = history.history_pairs(store, head, subdir=source.config.get("subdir", ""), max_pairs=keep,
                                  skipped=skipped, walk=history.Walk(max_walk=settings.SOURCES_GIT_MAX_HISTORY,
                                                                     deadline=deadline, merges=True, known=known))
    rows, cut = _rows(store=store, source=source, pairs=pairs, model_id=model_id, deadline=deadline)
    met = _first_known(store=store, head=head, known=known) if "known" in skipped else None
    with transaction.atomic():
        if met is not None:  # remembered commits after it are off this head's first-parent line (a force push)
            off_line = mine.filter(pk__gt=mine.get(sha=met, model_id=model_id).pk)
        elif known and not cut and "time budget" not in skipped:  # none of what is remembered is this history
            off_line = mine.filter(model_id=model_id)
        else:
            off_line = mine.none()
        rebuilt = off_line.exists()
        off_line.delete()
        if not cut:  # another model's vectors, re-read whole by this walk (its shas were not `known`)
            mine.exclude(model_id=model_id).delete()
        CommitMemory.objects.bulk_create(rows[::-1], ignore_conflicts=True)  # oldest first: ids follow history
        stale = list(mine.order_by("-pk").values_list("pk", flat=True)[keep:])
        if stale:
            CommitMemory.objects.filter(pk__in=stale).delete()
    filled, unfilled = _fill(store=store, source=source, deadline=deadline)
    out: dict[str, Any] = {"added": len(rows), "remembered": mine.count(), "rebuilt": rebuilt,
                           "functions_named": filled, "seconds": round(time.monotonic() - t0, 2)}
    if unfilled:
        out["functions_pending"] = unfilled
    if cut or "time budget" in skipped:
        out["stopped"] = "time budget"
    return out
