"""Hard negatives for judged training queries: passages the served retriever ranks high for a query but nobody
judged relevant to it.

Why: with in-batch negatives only, a judged query is told apart from 31 random passages, which it already is; the
loss is near zero within a few steps and SciFact's dense leg gained +0.03 (bench/results/adoption). The probe's
supervised run, with one negative per query drawn from the base model's ranks [3, 33), gained +0.13
(bench/results/adapt_probe.md). Ranks 1-2 are skipped because an unjudged passage ranked first is as likely a
missed judgement as a wrong one (a false negative teaches the model to push a right answer away).

The ranking is the datasets' served fusion over a snapshot of the vectors they are served with (built from
Postgres, so this runs beside the server and writes nothing): the negatives are the mistakes the platform makes now.
"""
from __future__ import annotations

import random
import time
from collections.abc import Callable

from search.models import Chunk
from search.quality.progress import bar as progress_bar
from search.quality.runs import served_ranking

WINDOW = (2, 32)  # 0-based ranks [2, 32): the probe's [3, 33) counted from 1


def hard_negatives(*, judged: list[tuple[str, int]], dataset_ids: list[int], seed: int = 13,
                   window: tuple[int, int] = WINDOW, progress: bool = False, deadline: float | None = None,
                   log: Callable[[str], None] = print) -> dict[str, list[int]]:
    """query -> chunk ids the served retriever ranks inside `window` for it, in a seeded random order, none from a
    document judged relevant to the query (every chunk of a judged document counts as judged). `judged`:
    (query, chunk id of a relevant passage) pairs, as search.quality.judged gives them. `deadline`
    (time.monotonic()): checked before each query is ranked; the queries not reached get no negative."""
    gold: dict[str, set[int]] = {}
    for q, cid in judged:
        gold.setdefault(q, set()).add(cid)
    if not gold:
        return {}
    doc_of = dict(Chunk.objects.filter(dataset_id__in=dataset_ids).values_list("pk", "document_id"))
    out: dict[str, list[int]] = {}
    with served_ranking(dataset_ids=dataset_ids) as served:
        bar = progress_bar(total=len(gold), desc="hard negatives", unit="q", enabled=progress)
        for q in sorted(gold):
            if deadline is not None and time.monotonic() > deadline:
                break
            judged_docs = {doc_of.get(c) for c in gold[q]}
            ranked = served.rank(q, window[1])  # legs as deep as served: no tie is cut near the window
            picks = [c for c in ranked[window[0]:window[1]] if doc_of.get(c) not in judged_docs]
            random.Random(f"{seed}-{q}").shuffle(picks)
            out[q] = picks
            bar.update(1)
        bar.close()
    log(f"hard negatives: {sum(1 for v in out.values() if v)} of {len(out)} judged queries have some "
        f"(served {served.label} ranks {window[0] + 1}-{window[1]})")
    return out
