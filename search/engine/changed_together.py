"""Which definitions did past commits change together with these? A change to several functions often repeats
a pattern the history already shows: the methods a refactor of one class touched, the parser and the formatter a
new option reaches. `locate` asks it of its best few definitions and lifts what changed with them.

Why from the memory and not the call graph: a call graph says what a change may reach; the history says what
people did change together, including pairs no call joins (two handlers of the same protocol, a function and its
documented twin). The memory already holds each remembered commit's definitions (CommitMemory.functions), so
the question is one query over the searched datasets' rows.

How it scores: each past commit that changed a seed lends every other definition it changed
`1 / (the number of definitions it changed - 1)`, so a sweeping change says less about any one pair than a
change of two. Seeds earlier in the ranking count more (`1 / seed rank`). Only definitions that still exist at
the synced tree, and that the request's filter admits, come back.
"""
from __future__ import annotations

from collections.abc import Sequence

from django.db.models import Q

from inference.encoders import dense_model_id
from search.engine.code_graph import DEF_FIELDS, FUNCTION_KINDS, Def
from search.engine.index_schema import IndexFilter
from search.models import CommitMemory, Symbol

SEEDS = 3           # the best definitions asked about
MAX_TOGETHER = 20   # the co-changed definitions returned, best first


def changed_together(*, flt: IndexFilter, seeds: Sequence[Def], top: int = MAX_TOGETHER) -> list[tuple[Def, float]]:
    """(definition, its co-change score) for the definitions the searched datasets' remembered commits changed
    together with `seeds` (best first), seeds themselves excluded, the highest `top` scores first."""
    seeds = [d for d in seeds if d.dataset_id in set(flt.dataset_ids)]
    if not seeds:
        return []
    asked = Q()
    for d in seeds:
        asked |= Q(dataset_id=d.dataset_id, functions__contains=[[d.path, d.qualname]])
    rows = CommitMemory.objects.filter(asked, model_id=dense_model_id()).values_list("dataset_id", "functions")
    seed_rank = {(d.dataset_id, d.path, d.qualname): i for i, d in enumerate(seeds, start=1)}
    score: dict[tuple[int, str, str], float] = {}
    for dataset_id, functions in rows:
        changed = {(dataset_id, p, q) for p, q in functions or ()}
        if len(changed) < 2:
            continue
        lent = sum(1.0 / rank for key, rank in seed_rank.items() if key in changed) / (len(changed) - 1)
        for key in changed - seed_rank.keys():
            score[key] = score.get(key, 0.0) + lent
    best = sorted(score, key=lambda k: (-score[k], k))[:top]
    if not best:
        return []
    wanted = Q()
    for dataset_id, path, qualname in best:
        wanted |= Q(dataset_id=dataset_id, path=path, qualname=qualname)
    rows = flt.admit(Symbol.objects.filter(wanted, kind__in=FUNCTION_KINDS), repo="document__repo")
    found: dict[tuple[int, str, str], list[Def]] = {}
    for row in rows.order_by("start_line").values_list(*DEF_FIELDS):
        d = Def(*row)
        found.setdefault((d.dataset_id, d.path, d.qualname), []).append(d)
    return [(d, score[key]) for key in best for d in found.get(key, [])]
