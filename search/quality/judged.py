"""A corpus's judged queries, split once: a check part that decides whether an adapted model is adopted, and a
training part that joins the adaptation's pairs as positives.

Why one split, here: the adoption check (search.quality.adoption) must never score a query the model was trained
on, or it would confirm its own training. So both sides read the same deterministic split: the first judged queries
(BEIR query id order; a project's feedback in query order) are the check, and only the queries beyond them train.
How many check (`check_size`): all of them up to the 30 that decide (a project with few judged queries trains on
none: the check has priority, because it is what keeps a worse model out); beyond that half of them, at least 30,
at most `check_max`.

Where judged queries come from: a BEIR folder's train split (never its test split, which is only reported on), or
a project's feedback on its context and its rules queries. Fusion choice reads only the context ones (the fusion it
picks serves only those); the embedding model serves both products, so both judge it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from projects.models import Project
from search.models import Chunk
from search.quality.evaluation import load_beir
from search.quality.fusion_choice import MIN_QUERIES, judged_queries

FEEDBACK_KINDS = ("context", "rules")  # the logged queries whose feedback judges an adapted model
CHECK_MAX = 300  # judged queries the adoption check reads at most (the command's --judged-max)


@dataclass
class JudgedSplit:
    """`check`: query -> {judged id: relevance} (ids as `to_key` maps ranked chunk ids, e.g. BEIR documents);
    `train`: (query, chunk id of a passage judged relevant to it), from queries the check does not hold."""

    check: dict[str, dict[Any, int]] = field(default_factory=dict)
    train: list[tuple[str, int]] = field(default_factory=list)
    to_key: Callable[[list[int]], list[Any]] | None = None
    source: str = ""

    @property
    def train_queries(self) -> int:
        return len({q for q, _ in self.train})


def check_size(*, judged: int, check_max: int = CHECK_MAX) -> int:
    """How many of `judged` queries check an adapted model; the rest train it.

    Up to MIN_QUERIES (the fewest that decide adoption) all of them check. Beyond it half do, at least MIN_QUERIES and
    at most `check_max`. Why half: a fixed check took every judged query of a small tenant and left none to train (the
    SRD's 95 judged rules questions: 95 checked, 0 trained); half keeps the check large enough to decide and gives
    training as many. A large judged set is unchanged: SciFact's 807 train queries still check 300 and the rest train."""
    if judged <= MIN_QUERIES:
        return min(judged, check_max)
    return min(check_max, max(MIN_QUERIES, judged // 2))


def judged_split(*, dataset_ids: list[int], beir: str | None = None, project: Project | None = None,
                 check_max: int = CHECK_MAX) -> JudgedSplit:
    """The judged queries of a BEIR folder's train split (when `beir`) or of the project's feedback, split into the
    check (the first `check_size` of them, at most `check_max`) and the training pairs (the rest); empty when there
    are none."""
    if beir:
        try:
            coll = load_beir(beir, split="train")
        except FileNotFoundError:
            return JudgedSplit()
        items = [(coll.queries[qid], rels) for qid, rels in sorted(coll.qrels.items()) if qid in coll.queries]
        doc_of = dict(Chunk.objects.filter(dataset_id__in=dataset_ids).values_list("id", "path"))
        first_chunk: dict[str, int] = {}
        for chunk_id, path in sorted(doc_of.items()):
            first_chunk.setdefault(path, chunk_id)
        n = check_size(judged=len(items), check_max=check_max)
        check = dict(items[:n])
        train = [(q, first_chunk[doc]) for q, rels in items[n:] for doc, rel in sorted(rels.items())
                 if rel > 0 and doc in first_chunk and q not in check]
        return JudgedSplit(check=check, train=train, to_key=lambda ids: [doc_of.get(i) for i in ids],
                           source=f"{coll.name} train split")
    if project is not None:
        # both products' questions: the embedding model serves the rules search as well as context retrieval
        items = sorted(judged_queries(project=project, kinds=FEEDBACK_KINDS).items())
        n = check_size(judged=len(items), check_max=check_max)
        check = dict(items[:n])
        readable = set(Chunk.objects.filter(dataset_id__in=dataset_ids).values_list("id", flat=True))
        train = [(q, cid) for q, rels in items[n:] for cid, rel in sorted(rels.items())
                 if rel > 0 and cid in readable and q not in check]
        return JudgedSplit(check=check, train=train, source=f"{project.slug} feedback")
    return JudgedSplit()
