"""Hard negatives for judged queries: drawn from what the served retriever ranks high, never from a judged document,
over a snapshot (the live index is not touched). Real Postgres, the embedded Qdrant, the bundled MiniLM."""
from __future__ import annotations

from search.models import Chunk
from search.quality.hard_negatives import hard_negatives


def _symbols(dataset) -> dict[int, str]:
    return dict(Chunk.objects.filter(dataset=dataset).values_list("pk", "symbol"))


def test_negatives_are_passages_ranked_near_the_query_and_never_the_judged_one(code_dataset):
    _, dataset = code_dataset
    symbols = _symbols(dataset)
    gold = next(pk for pk, s in symbols.items() if s == "parse_header_entries")
    negs = hard_negatives(judged=[("parse each header entry", gold)], dataset_ids=[dataset.pk], window=(0, 8),
                          log=lambda m: None)
    picked = negs["parse each header entry"]
    assert gold not in picked and 0 < len(picked) <= 8
    # near misses: the other parsers and the other header functions, not random ones
    near = [symbols[pk] for pk in picked if "parse" in symbols[pk] or "header" in symbols[pk]]
    assert len(near) >= len(picked) - 2
    # seeded: the same draw again; another seed shuffles the same passages
    again = hard_negatives(judged=[("parse each header entry", gold)], dataset_ids=[dataset.pk], window=(0, 8),
                           log=lambda m: None)
    assert again == negs
    other = hard_negatives(judged=[("parse each header entry", gold)], dataset_ids=[dataset.pk], window=(0, 8),
                           seed=99, log=lambda m: None)
    assert sorted(other["parse each header entry"]) == sorted(picked)


def test_the_window_skips_the_top_ranks_and_every_judged_passage_of_a_query_is_excluded(code_dataset):
    _, dataset = code_dataset
    symbols = _symbols(dataset)
    by_name = {s: pk for pk, s in symbols.items()}
    q = "merge each ledger entry"
    judged = [(q, by_name["merge_ledger_entries"]), (q, by_name["merge_invoice_entries"])]
    # The window reaches past the whole collection (60 functions), so the skipped ranks are all that differ
    # between the two draws: the sixty functions are near copies, and ties at a window's edge may order
    # differently from one snapshot to the next.
    wide = hard_negatives(judged=judged, dataset_ids=[dataset.pk], window=(0, 100), log=lambda m: None)[q]
    skipped = hard_negatives(judged=judged, dataset_ids=[dataset.pk], window=(5, 100), log=lambda m: None)[q]
    assert not {by_name["merge_ledger_entries"], by_name["merge_invoice_entries"]} & set(wide)
    assert len(wide) == len(symbols) - 2
    assert set(skipped) < set(wide) and 3 <= len(wide) - len(skipped) <= 5
    # what the skip took away were the near misses at the top: other merges and other ledger functions
    assert all("merge" in symbols[pk] or "ledger" in symbols[pk] for pk in set(wide) - set(skipped))
    assert hard_negatives(judged=[], dataset_ids=[dataset.pk]) == {}
