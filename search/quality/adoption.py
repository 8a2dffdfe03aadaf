"""Adopt an adapted embedding model for some datasets, on evidence, without ever serving half-embedded vectors.

Why a rule and not "newest wins": the held-out mined pairs (search.quality.adaptation) agreed with judged queries on
code and disagreed on prose (bench/results/adapt_probe.md). So:
- where judged queries exist (a project's feedback, or a BEIR collection's train split), they decide, with fusion
  choice's confidence rule: the paired gain of the served pipeline on them must reach MIN_GAIN and its 95 % lower
  bound must be above zero;
- where the datasets follow a git source with enough history, its newest commits, never trained on, decide too (a
  time split: search.quality.history_training.decide_history); with judged queries as well, both must pass;
- else code datasets adopt when the held-out code pairs confirm (search.quality.adaptation.heldout_confirms: a lower
  bound above zero on the code pairs, and on them without the easy name pairs); the evidence says why history did
  not decide (no git source, too few commits);
- else (prose with no judged queries) nothing is adopted: no label-free signal was shown to predict a gain there.

How the switch keeps serving (docs/architecture.md, "Per-dataset embedding models"): the dataset's
`embedding_model_next` is set under its write lock (new chunks are embedded for both models from then on), every
chunk is re-embedded for the new model and queued for its collections, the switch waits until the applier has
carried them in, and only then does one row update make queries use them. Until then queries read the old vectors.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from config.errors import BadInput, DependencyDown
from inference.encoders import adapted_model_path, dense_model_id
from search.engine.applier import apply_until_indexed, running_applier, wait_until_indexed
from search.engine.dataset_models import CONFIGURED, model_arg
from search.engine.index import get_index, live_store_ref, model_index, searchable_here
from search.engine.term_stats import lock_dataset_writes
from search.ingest.maintenance import reembed
from search.models import Dataset, IndexOutbox
from search.quality import history_training
from search.quality.adaptation import heldout_confirms
from search.quality.fusion_choice import MIN_GAIN, MIN_QUERIES
from search.quality.judged import JudgedSplit
from search.quality.metrics import lower_bound_95, ndcg
from search.quality.progress import bar as progress_bar
from search.quality.runs import served_ranking

MIN_JUDGED = MIN_QUERIES  # fusion choice's rule, and its numbers (MIN_GAIN too)
CODE_KINDS = {"code"}


def check_model(name: str) -> None:
    """BadInput (field "model") unless `name` is the configured model ("") or an adapted model on disk whose id is
    not the configured model's (vectors are keyed by the id: two models with one id would share them)."""
    if name == CONFIGURED:
        return
    try:
        adapted_model_path(name)
    except DependencyDown as exc:
        raise BadInput(exc.detail, field="model") from exc
    if name == dense_model_id():
        raise BadInput("An adapted model cannot be named like the configured model.", field="model")


def decide(*, kinds: set[str], heldout: dict[str, Any], judged: dict[str, Any] | None,
           history: dict[str, Any] | None = None) -> tuple[bool, str]:
    """(adopt, why): the rule in the module docstring. `history`: the time split's evidence (time_split_gain's,
    or {"used": False, "why": ...} where history could not decide)."""
    if history and history.get("used"):
        adopt, why = history_training.decide_history(history)
        if not adopt or judged is None or judged.get("queries", 0) < MIN_JUDGED:
            return adopt, f"git history: {why}"
        also, judged_why = decide(kinds=kinds, heldout=heldout, judged=judged)
        return also, f"git history: {why}; {judged_why}"
    adopt, why = _decide_without_history(kinds=kinds, heldout=heldout, judged=judged)
    if history and history.get("why") and kinds <= CODE_KINDS:
        why = f"{why} (git history does not decide: {history['why']})"
    return adopt, why


def _decide_without_history(*, kinds: set[str], heldout: dict[str, Any],
                            judged: dict[str, Any] | None) -> tuple[bool, str]:
    if judged is not None and judged.get("queries", 0) >= MIN_JUDGED:
        gain, low = judged["gain"], judged["gain_lower_95"]
        if gain >= MIN_GAIN and low > 0:
            return True, f"judged queries: {gain:+.4f} nDCG@10 on {judged['queries']} (95 % lower bound {low:+.4f})"
        return False, (f"judged queries: {gain:+.4f} nDCG@10 on {judged['queries']} (95 % lower bound {low:+.4f}); "
                       f"a gain of {MIN_GAIN} with a lower bound above 0 is needed")
    if kinds <= CODE_KINDS:  # read from the bounds, not the manifest's `confirmed`: an older rule may have set it
        return heldout_confirms(heldout)
    few = judged.get("queries", 0) if judged is not None else 0
    # a check of fewer than MIN_JUDGED queries is kept as evidence but decides nothing: say so, not "none"
    lead = (f"only {few} judged queries ({MIN_JUDGED} decide), so prose" if few else "prose without judged queries")
    return False, (f"{lead}: the held-out pairs were not shown to predict a gain there, so it is not adopted on "
                   "them (add feedback, or judged queries, and decide again)")


def judged_gain(*, dataset_ids: list[int], name: str, judged: dict[str, dict[Any, int]],
                to_key: Callable[[list[int]], list[Any]] | None = None, seed: int = 15,
                progress: bool = False) -> dict[str, Any]:
    """Per-query nDCG@10 of the datasets' served fusion with the current vectors against `name`'s, on judged queries
    (query text -> {id: relevance}; `to_key` maps ranked chunk ids to the ids judged, e.g. BEIR documents).
    Searched in snapshots built from Postgres, so it runs beside the server and writes nothing."""
    queries = sorted(judged)
    scores: dict[str, list[float]] = {}
    label = ""
    for which, model in (("base", None), ("adapted", model_arg(name))):
        with served_ranking(dataset_ids=dataset_ids, model=model) as served:
            label = served.label
            out = []
            bar = progress_bar(total=len(queries), desc=f"judged queries ({which})", unit="q", enabled=progress)
            for q in queries:
                ids = served.rank(q)
                out.append(ndcg(_dedupe(to_key(ids)) if to_key else ids, judged[q]))
                bar.update(1)
            bar.close()
            scores[which] = out
    deltas = [a - b for b, a in zip(scores["base"], scores["adapted"], strict=True)]
    return {"queries": len(queries), "fusion": label,
            "base_ndcg@10": round(statistics.fmean(scores["base"]), 4) if queries else None,
            "adapted_ndcg@10": round(statistics.fmean(scores["adapted"]), 4) if queries else None,
            "gain": round(statistics.fmean(deltas), 4) if deltas else 0.0,
            "gain_lower_95": round(lower_bound_95(deltas, seed=seed), 4) if len(deltas) >= 2 else 0.0}


def _dedupe(keys: list[Any]) -> list[Any]:
    seen: set[Any] = set()
    return [k for k in keys if not (k in seen or seen.add(k))]


def switch_model(*, dataset_ids: list[int], name: str, evidence: dict[str, Any] | None = None,
                 timeout_s: float = 900.0, progress: bool = False,
                 log: Callable[[str], None] = print) -> dict[str, Any]:
    """Switch datasets to the model `name` ("" = the configured one), keeping queries on the old vectors until the
    new ones are in the index; -> {"datasets", "chunks", "embedded", "seconds", "model"}.

    Re-embedding goes at the ingest rate (cached vectors are reused, so switching back costs nothing). A switch
    whose vectors are not applied within `timeout_s` leaves the datasets on their old model, still marked `next`
    (new chunks keep getting both models' vectors), and raises DependencyDown: running it again finishes it."""
    check_model(name)
    t0 = time.perf_counter()
    datasets = list(Dataset.objects.filter(pk__in=dataset_ids).order_by("pk"))
    moving = [d for d in datasets if d.embedding_model != name]
    chunks = embedded = 0
    for d in moving:
        with transaction.atomic():
            lock_dataset_writes(dataset_id=d.pk)  # writers in flight finish first; later ones see `next`
            Dataset.objects.filter(pk=d.pk).update(embedding_model_next=name)
        bar = progress_bar(total=1, desc=f"re-embed {d.name}", unit="chunk", enabled=progress)

        def tick(done: int, total: int, bar: Any = bar) -> None:
            bar.total = total
            bar.update(done - bar.n)

        stats = reembed(dataset_id=d.pk, model=name, progress=tick)
        bar.close()
        chunks, embedded = chunks + stats["chunks"], embedded + stats["embedded"]
        log(f"{d}: {stats['chunks']} chunks, {stats['embedded']} embedded for {stats['model']}")
    live = [d for d in moving if not d.is_evaluation]
    if live and not _applied(name=name, timeout_s=timeout_s):
        raise DependencyDown("qdrant", f"the index has not taken the re-embedded vectors within {timeout_s:.0f} s; "
                                       "the datasets stay on their old model; run the switch again to finish it")
    with transaction.atomic():
        for d in moving:
            lock_dataset_writes(dataset_id=d.pk)
            Dataset.objects.filter(pk=d.pk).update(embedding_model=name, embedding_model_next="",
                                                   embedding_evidence=evidence or {})
        if not moving:  # already there: keep the newest evidence
            Dataset.objects.filter(pk__in=[d.pk for d in datasets]).update(embedding_evidence=evidence or {})
    return {"datasets": len(moving), "chunks": chunks, "embedded": embedded, "model": name or dense_model_id(),
            "seconds": round(time.perf_counter() - t0, 1)}


def _applied(*, name: str, timeout_s: float) -> bool:
    """Wait until the store of `name` holds every outbox row written so far (only reads Postgres, NOTIFYs the
    applier). A process that may open the embedded store (nobody else holds it) applies itself."""
    through = IndexOutbox.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
    if not searchable_here():
        try:
            get_index()  # nobody holds it: this process does now, and applies below
        except DependencyDown:  # the web process holds it: its applier thread applies; wait for it
            return wait_until_indexed(through=through, index=live_store_ref(name=name), timeout=timeout_s)
    index = get_index()
    store = model_index(index, name=name)
    if not settings.QDRANT_URL and running_applier() is None:
        return apply_until_indexed(index=index, store=store, through=through, timeout=timeout_s)
    return wait_until_indexed(through=through, index=store, timeout=timeout_s)


def adopt_if_confirmed(*, name: str, dataset_ids: list[int], manifest: dict[str, Any], split: JudgedSplit,
                       progress: bool = False, log: Callable[[str], None] = print,
                       history: history_training.HistorySplit | None = None) -> dict[str, Any]:
    """Decide on an adaptation's evidence (the module docstring's rule) and switch the datasets if it holds.
    Judged queries: a BEIR folder's train split (never the test split it is reported on), else the project's
    feedback; only their check part (search.quality.judged), never a query the model trained on. The evidence is
    kept on the datasets either way (the admin shows it). `split`: the one the model was trained with (judged_split;
    an empty one when it trained without labels), since judgments added while it trained would move the split and
    could bring a trained query into the check. `history`: the time split the model trained with (the
    adaptation's); None reads the check commits its manifest names again from the mirror (history_check)."""
    kinds = set(Dataset.objects.filter(pk__in=dataset_ids).values_list("kind", flat=True))
    judged_ev = None
    if split.check:
        judged_ev = judged_gain(dataset_ids=dataset_ids, name=name, judged=split.check, progress=progress,
                                to_key=split.to_key)
        judged_ev["source"] = split.source
    if judged_ev is not None:
        log(f"judged queries ({judged_ev['queries']}): nDCG@10 {judged_ev['base_ndcg@10']} -> "
            f"{judged_ev['adapted_ndcg@10']} (95 % lower bound of the gain {judged_ev['gain_lower_95']})")
    history_ev = history_check(name=name, dataset_ids=dataset_ids, manifest=manifest, history=history, log=log)
    adopt, why = decide(kinds=kinds, heldout=manifest.get("heldout", {}), judged=judged_ev, history=history_ev)
    evidence = {"model": name, "adopted": adopt, "reason": why, "heldout": manifest.get("heldout", {}),
                "judged": judged_ev, "history": history_ev, "train_pairs": (manifest.get("data") or {}).get(
                    "train_pairs", {}), "cost": manifest.get("cost", {}), "decided_at": timezone.now().isoformat()}
    out: dict[str, Any] = {"adopted": adopt, "reason": why, "evidence": evidence}
    if adopt:
        out["switch"] = switch_model(dataset_ids=dataset_ids, name=name, evidence=evidence, progress=progress,
                                     log=log)
        evidence["reembed"] = out["switch"]
        Dataset.objects.filter(pk__in=dataset_ids).update(embedding_evidence=evidence)
    else:
        record_rejection(dataset_ids=dataset_ids, evidence=evidence)
    return out


def history_check(*, name: str, dataset_ids: list[int], manifest: dict[str, Any],
                  history: history_training.HistorySplit | None, log: Callable[[str], None] = print
                  ) -> dict[str, Any] | None:
    """The time split's evidence: recall before and after on the check commits, with the split's counts and
    commits; {"used": False, "why": ...} where history could not decide; None for a model adapted without it.
    A check commit the model trained on (its manifest's train_shas) is refused before anything is ranked."""
    described = (manifest.get("data") or {}).get("history")
    if described is None:
        return None
    if not described.get("used"):
        return {"used": False, "why": described.get("why", "history not used"),
                "sources": described.get("sources", [])}
    trained = set(described.get("train_shas", []))
    if history is None:  # a model adapted earlier: its check commits, read again from the mirrors
        pool = history_training.mine_history(dataset_ids=dataset_ids)
        wanted = set(described.get("check", []))
        history = history_training.HistorySplit(train=[], check=[c for c in pool.cases if c.sha in wanted],
                                                pool=pool)
    check = history.check
    if trained & {c.sha for c in check}:
        raise BadInput("The history check would read commits the model trained on.", field="model")
    if len(check) < 2:
        return {"used": False, "why": f"only {len(check)} of the check commits are in the history now",
                "sources": described.get("sources", [])}
    ev = history_training.time_split_gain(dataset_ids=dataset_ids, name=name, check=check)
    ev.update({"used": True, "check_commits": [c.sha for c in check], "train_commits": described.get("train_commits"),
               "train_functions": described.get("train_functions"), "sources": described.get("sources", []),
               "mine_seconds": described.get("mine_seconds"), "stopped": described.get("stopped")})
    fn, files = ev[f"function_recall@{history_training.K}"], ev[f"file_recall@{history_training.K}"]
    log(f"history check ({len(check)} newest commits): function recall@{history_training.K} {fn.get('base')} -> "
        f"{fn.get('adapted')}, file {files.get('base')} -> {files.get('adapted')}")
    return ev


def record_rejection(*, dataset_ids: list[int], evidence: dict[str, Any]) -> None:
    """Keep a rejected model's evidence without hiding why a dataset serves what it serves: a dataset on an adopted
    model keeps that model's evidence and gains `last_rejected`; any other dataset takes the rejection as its
    evidence. Why: the admin explains the vectors a dataset is searched with, and a later "no" does not change them."""
    with transaction.atomic():
        for ds in Dataset.objects.select_for_update().filter(pk__in=dataset_ids).only("pk", "embedding_model",
                                                                                      "embedding_evidence"):
            current = ds.embedding_evidence or {}
            serving = bool(ds.embedding_model) and current.get("adopted") and current.get("model") == ds.embedding_model
            kept = {**current, "last_rejected": evidence} if serving else evidence
            Dataset.objects.filter(pk=ds.pk).update(embedding_evidence=kept)
