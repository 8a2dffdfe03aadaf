"""The evaluation harness's own tests: metrics by hand and against ranx, BEIR loading and its errors.

Every quality table in the README comes out of `search.quality.evaluation.compute_metrics` and `load_beir`; these pin
what they compute. No database: both are pure functions over dicts and files.
"""
from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from search.quality.evaluation import (
    RANX_METRICS,
    BeirCollection,
    compute_metrics,
    cross_book_contamination,
    evaluability,
    load_beir,
    mean_or_none,
    ranked_to_run,
    token_f1,
)
from tests.search.code_fixtures import code_world  # noqa: F401 - fixture
from tests.search.ctx_fixtures import edge_index, ingest, write_repo  # noqa: F401 - edge_index: fixture

LOG2_3 = math.log2(3)  # discount at rank 2
LOG2_5 = math.log2(5)  # discount at rank 4


def _run(*docs: str) -> dict[str, float]:
    """A ranked list (best first) as ranx scores, the way run_pipelines builds it."""
    return ranked_to_run([(d, 1.0) for d in docs])


# ------------------------------------------------------------------------------------------------ by hand

def test_metrics_match_hand_computed_values_with_graded_relevance_and_unjudged_queries():
    qrels = {
        "q1": {"d1": 2, "d3": 1, "d5": 1},  # graded; d5 is never retrieved
        "q2": {"d7": 1},                    # its relevant document is not retrieved at all
        "q3": {"d1": 0},                    # only a zero judgement: not a judged query, must not count
        "q4": {"d4": 1},                    # judged but the run has no answer for it: scores 0, still counts
        "q6": {"d1": 1},                    # perfect
    }
    run = {
        "q1": _run("d2", "d1", "d4", "d3"),
        "q2": _run("d8", "d9"),
        "q3": _run("d1"),
        "q5": _run("d1"),                   # in the run, not in the qrels: ignored
        "q6": _run("d1"),
    }
    m = compute_metrics(qrels=qrels, run=run)
    # Judged queries: q1, q2, q4, q6 -> every mean is over 4.
    # q1: first relevant at rank 2 -> hit@1 0, hit@3/5/10 1, RR 1/2.
    #     DCG@10 (linear gain / log2(rank+1), Järvelin, as ranx and trec_eval) = 2/log2(3) + 1/log2(5)
    #            = 1.261860 + 0.430677 = 1.692536
    #     IDCG@10 = 2/log2(2) + 1/log2(3) + 1/log2(4) = 2 + 0.630930 + 0.5 = 3.130930 -> nDCG 1.692536 / 3.130930 = 0.540586
    #     recall@100 = 2/3 (d1, d3 of d1, d3, d5)
    # q2, q4: 0 everywhere.  q6: 1 everywhere.
    ndcg_q1 = (2 / LOG2_3 + 1 / LOG2_5) / (2 + 1 / LOG2_3 + 1 / 2)
    assert ndcg_q1 == pytest.approx(0.540586, abs=1e-6)
    expected = {"hit@1": 1 / 4, "hit@3": 2 / 4, "hit@5": 2 / 4, "hit@10": 2 / 4,
                "mrr@10": (1 / 2 + 1) / 4,             # 0.375
                "ndcg@10": (ndcg_q1 + 1) / 4,          # (0.540586 + 1) / 4 = 0.385146
                "recall@100": (2 / 3 + 1) / 4}         # 0.416667
    assert m == {k: round(v, 4) for k, v in expected.items()}
    assert m == {"hit@1": 0.25, "hit@3": 0.5, "hit@5": 0.5, "hit@10": 0.5, "mrr@10": 0.375,
                 "ndcg@10": 0.3851, "recall@100": 0.4167}


def test_metrics_stop_at_their_cutoff():
    # The only relevant document sits at rank 11 (hit@10, MRR@10 and nDCG@10 miss it; recall@100 sees it)
    # and, for q2, at rank 4 (hit@3 misses it, hit@5 sees it; RR 1/4; nDCG 1/log2(5) = 0.430677).
    filler = [f"x{i}" for i in range(10)]
    qrels = {"q1": {"rel": 1}, "q2": {"rel": 1}}
    run = {"q1": _run(*filler, "rel"), "q2": _run(*filler[:3], "rel")}
    m = compute_metrics(qrels=qrels, run=run)
    assert m == {"hit@1": 0.0, "hit@3": 0.0, "hit@5": round(1 / 2, 4), "hit@10": 0.5,
                 "mrr@10": round((0 + 1 / 4) / 2, 4),             # 0.125
                 "ndcg@10": round((0 + 1 / LOG2_5) / 2, 4),       # 0.2153
                 "recall@100": 1.0}


def test_metrics_are_zero_when_nothing_relevant_is_retrieved_or_nothing_is_judged():
    zero = {k: 0.0 for k in RANX_METRICS}
    assert compute_metrics(qrels={"q1": {"d1": 1}}, run={"q1": _run("d2", "d3")}) == zero
    assert compute_metrics(qrels={"q1": {"d1": 1}}, run={}) == zero
    assert compute_metrics(qrels={"q1": {"d1": 1}}, run={"q1": {}}) == zero
    # no judged query at all (no qrels, or only zero judgements): zeros, not a ranx error
    assert compute_metrics(qrels={}, run={"q1": _run("d1")}) == zero
    assert compute_metrics(qrels={"q1": {"d1": 0}}, run={"q1": _run("d1")}) == zero


def test_ranked_to_run_keeps_the_order_drops_duplicates_and_cuts_at_depth():
    # Equal or rising scores must not reorder: the run's scores come from positions, not from the input.
    ranked = [("a", 0.1), ("b", 0.1), ("a", 0.9), ("c", 5.0)]
    run = ranked_to_run(ranked, depth=100)
    assert list(run) == ["a", "b", "c"]                      # the second "a" (a later chunk) is dropped
    assert run == {"a": 101.0, "b": 100.0, "c": 99.0}
    assert list(ranked_to_run([(str(i), 0.0) for i in range(10)], depth=3)) == ["0", "1", "2"]
    # so a tie in the retriever's scores resolves by rank: the relevant doc second -> RR 1/2, not 1
    m = compute_metrics(qrels={"q": {"b": 1}}, run={"q": ranked_to_run(ranked)})
    assert m["mrr@10"] == 0.5
    assert m["hit@1"] == 0.0


def test_a_relevant_document_after_the_run_depth_is_not_counted():
    ranked = [(f"x{i}", 1.0) for i in range(100)] + [("rel", 1.0)]  # rel at rank 101, RUN_DEPTH is 100
    m = compute_metrics(qrels={"q": {"rel": 1}}, run={"q": ranked_to_run(ranked)})
    assert m["recall@100"] == 0.0


# ------------------------------------------------------------------------------------------------ against ranx

def _reference(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """Plain-Python metrics (trec_eval conventions): only queries with a relevance > 0 count; no run -> 0."""
    judged = [q for q, docs in qrels.items() if any(r > 0 for r in docs.values())]
    totals = dict.fromkeys(RANX_METRICS, 0.0)
    for q in judged:
        rel = {d: r for d, r in qrels[q].items() if r > 0}
        ranking = [d for d, _ in sorted((run.get(q) or {}).items(), key=lambda kv: -kv[1])]
        first = next((i for i, d in enumerate(ranking, start=1) if d in rel), None)
        for k in (1, 3, 5, 10):
            totals[f"hit@{k}"] += 1.0 if first is not None and first <= k else 0.0
        totals["mrr@10"] += 1 / first if first is not None and first <= 10 else 0.0
        dcg = sum(rel.get(d, 0) / math.log2(i + 1) for i, d in enumerate(ranking[:10], start=1))
        idcg = sum(r / math.log2(i + 1) for i, r in enumerate(sorted(rel.values(), reverse=True)[:10], start=1))
        totals["ndcg@10"] += dcg / idcg
        totals["recall@100"] += sum(1 for d in ranking[:100] if d in rel) / len(rel)
    return {k: v / len(judged) for k, v in totals.items()}


def _random_collection(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """30 queries; each run ranks 20 of 40 documents; graded qrels 0-3 over 1-6 documents."""
    rnd = random.Random(seed)
    pool = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for n in range(30):
        q = f"q{n}"
        qrels[q] = {d: rnd.randint(0, 3) for d in rnd.sample(pool, rnd.randint(1, 6))}
        run[q] = {d: rnd.random() for d in rnd.sample(pool, 20)}
    return qrels, run


@pytest.mark.parametrize("seed", [7, 2024])
def test_reference_metrics_equal_ranx_on_a_random_graded_run(seed):
    from ranx import Qrels, Run, evaluate

    qrels, run = _random_collection(seed)
    judged = {q: d for q, d in qrels.items() if any(r > 0 for r in d.values())}
    assert len(judged) < len(qrels)  # some queries have only zero judgements, as in real qrels
    ranx = evaluate(Qrels(judged), Run({q: run[q] for q in judged}), list(RANX_METRICS.values()))
    ref = _reference(qrels, run)
    for name, ranx_name in RANX_METRICS.items():
        assert abs(ranx[ranx_name] - ref[name]) < 1e-9, name
    assert 0 < ref["ndcg@10"] < 1 and 0 < ref["recall@100"] < 1  # a run that exercises partial credit


@pytest.mark.parametrize("seed", [7, 2024])
def test_compute_metrics_equals_the_reference_rounded_to_4_places(seed):
    """compute_metrics rounds to 4 decimals (what the report tables show), so it equals the exact values only
    after the same rounding; 1e-9 agreement holds for the unrounded ranx numbers (test above)."""
    qrels, run = _random_collection(seed)
    qrels["q_zero_only"] = {"d1": 0}          # not judged: must not change the means
    run["q_zero_only"] = {"d1": 1.0}
    for q in ("q0", "q1", "q2"):              # judged queries the run has no answer for: count as 0
        run.pop(q)
    run["q_unjudged"] = {"d1": 1.0}           # a run for a query without qrels: ignored
    got = compute_metrics(qrels=qrels, run=run)
    ref = _reference(qrels, run)
    assert got == {k: round(v, 4) for k, v in ref.items()}
    dropped = _reference({q: d for q, d in qrels.items() if q in run}, run)
    assert got["ndcg@10"] != round(dropped["ndcg@10"], 4)  # dropping unanswered queries would inflate scores


# ------------------------------------------------------------------------------------------------ BEIR loading

def _write_jsonl(path: Path, recs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def _beir(root: Path, *, layout: str = "flat", qrels: str | None = None) -> Path:
    _write_jsonl(root / "corpus.jsonl", [{"_id": "c1", "title": "Alpha", "text": "first"},
                                         {"_id": "c2", "text": "second"},
                                         {"_id": 3, "title": None, "text": "third"}])
    _write_jsonl(root / "queries.jsonl", [{"_id": "1", "text": "test one"}, {"_id": "2", "text": "train two"},
                                          {"_id": "3", "text": "test three"}, {"_id": "4", "text": "unjudged"}])
    body = qrels if qrels is not None else "query-id\tcorpus-id\tscore\n1\tc1\t1\n3\tc2\t2\n3\tc9\t0\n"
    target = root / "qrels_test.tsv" if layout == "flat" else root / "qrels" / "test.tsv"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(body)
    # train judgements sit beside the test ones in both layouts and must never leak into an evaluation
    train = root / "qrels_train.tsv" if layout == "flat" else root / "qrels" / "train.tsv"
    train.write_text("query-id\tcorpus-id\tscore\n2\tc1\t1\n")
    return root


@pytest.mark.parametrize("layout", ["flat", "nested"])
def test_load_beir_reads_both_layouts_and_keeps_only_test_judged_queries(tmp_path, layout):
    coll = load_beir(_beir(tmp_path / "mini", layout=layout))
    assert coll.name == "mini"
    assert coll.queries == {"1": "test one", "3": "test three"}   # 2 (train only) and 4 (unjudged) are left out
    assert coll.qrels == {"1": {"c1": 1}, "3": {"c2": 2, "c9": 0}}
    assert coll.corpus == {"c1": {"title": "Alpha", "text": "first"}, "c2": {"title": "", "text": "second"},
                           "3": {"title": "", "text": "third"}}


def test_load_beir_max_queries_keeps_the_first_queries_and_their_qrels(tmp_path):
    coll = load_beir(_beir(tmp_path / "mini"), max_queries=1)
    assert coll.queries == {"1": "test one"}
    assert coll.qrels == {"1": {"c1": 1}}


def test_load_beir_without_a_header_line_keeps_the_first_row(tmp_path):
    coll = load_beir(_beir(tmp_path / "mini", qrels="1\tc1\t1\n3\tc2\t1\n"))
    assert coll.qrels == {"1": {"c1": 1}, "3": {"c2": 1}}


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels_test.tsv"])
def test_load_beir_names_the_missing_file(tmp_path, missing):
    root = _beir(tmp_path / "mini")
    (root / missing).unlink()
    with pytest.raises(FileNotFoundError, match=missing.replace(".", r"\.")):
        load_beir(root)


@pytest.mark.parametrize(("body", "bad_line"), [
    ("query-id\tcorpus-id\tscore\n1\tc1\t1\n3\tc2\n", 3),          # two columns
    ("query-id\tcorpus-id\tscore\n1\tc1\t1\n3\tc2\tyes\n", 3),     # not an integer score
    ("1\tc1\t1\nquery-id\tcorpus-id\tscore\n", 2),                 # a "header" after data is a bad row
    ("1 c1 1\n", 1),                                              # spaces, not tabs
])
def test_load_beir_rejects_a_malformed_qrels_line_naming_file_and_line(tmp_path, body, bad_line):
    root = _beir(tmp_path / "mini", qrels=body)
    with pytest.raises(ValueError, match=rf"qrels_test\.tsv:{bad_line}: expected 'query-id<TAB>corpus-id"):
        load_beir(root)


def test_load_beir_rejects_a_qrels_row_naming_an_unknown_query(tmp_path):
    root = _beir(tmp_path / "mini", qrels="query-id\tcorpus-id\tscore\n1\tc1\t1\n99\tc2\t1\n")
    with pytest.raises(ValueError, match=r"qrels_test\.tsv:3: query '99' is not in .*queries\.jsonl"):
        load_beir(root)


@pytest.mark.parametrize(("name", "line", "message"), [
    ("queries.jsonl", '{"_id": "1", "text": "ok"}\n{"_id": "3", "text": \n', "not valid JSON"),
    ("queries.jsonl", '{"_id": "1", "text": "ok"}\n{"id": "3", "text": "no _id"}\n', "expected a JSON object"),
    ("corpus.jsonl", '{"_id": "c1", "text": "ok"}\n["c2", "a list"]\n', "expected a JSON object"),
])
def test_load_beir_rejects_a_bad_json_line_naming_file_and_line(tmp_path, name, line, message):
    root = _beir(tmp_path / "mini", qrels="1\tc1\t1\n")
    (root / name).write_text(line)
    with pytest.raises(ValueError, match=rf"{re.escape(name)}:2: {message}"):
        load_beir(root)


def test_evaluate_command_turns_a_bad_beir_folder_into_a_command_error(tmp_path):
    """The command's answer to a bad collection is one line naming the file, not a traceback (no DB needed:
    the collection is read before anything is ingested)."""
    from django.core.management import CommandError, call_command

    root = _beir(tmp_path / "mini", qrels="query-id\tcorpus-id\tscore\n1\tc1\n")
    with pytest.raises(CommandError, match=r"qrels_test\.tsv:2: expected"):
        call_command("evaluate", "--beir", str(root), "--no-progress", "--no-save",
                     "--report-dir", str(tmp_path / "reports"))


def test_load_beir_takes_the_content_kind_from_collection_json_unless_told(tmp_path):
    from search.quality.evaluation import beir_documents

    root = _beir(tmp_path / "mini")
    assert load_beir(root).kind == "beir"
    (root / "collection.json").write_text(json.dumps({"kind": "code", "seed": 1}))
    coll = load_beir(root)
    assert coll.kind == "code"
    assert {c.kind for d in beir_documents(coll) for c in d.chunks} == {"code"}  # indexed with the code analyzer
    assert load_beir(root, kind="beir").kind == "beir"


@pytest.mark.parametrize(("body", "message"), [('{"kind": "video"}', "content kind 'video'"),
                                               ('["code"]', "expected a JSON object"),
                                               ("{kind", "expected a JSON object")])
def test_load_beir_rejects_a_bad_collection_json(tmp_path, body, message):
    root = _beir(tmp_path / "mini")
    (root / "collection.json").write_text(body)
    with pytest.raises(ValueError, match=message):
        load_beir(root)


def test_load_beir_reads_the_train_split_with_its_own_queries_file(tmp_path):
    root = _beir(tmp_path / "mini")
    _write_jsonl(root / "queries_train.jsonl", [{"_id": "7", "text": "train seven"}])
    (root / "qrels_train.tsv").write_text("query-id\tcorpus-id\tscore\n2\tc1\t1\n7\tc2\t1\n")
    coll = load_beir(root, split="train")
    assert coll.queries == {"2": "train two", "7": "train seven"}  # never a test query
    assert coll.qrels == {"2": {"c1": 1}, "7": {"c2": 1}}
    with pytest.raises(ValueError, match="not a split name"):
        load_beir(root, split="../test")


# ------------------------------------------------------------------------------------------------ rules-side figures

def test_evaluability_is_the_share_of_judged_queries_with_a_relevant_document_in_the_corpus():
    coll = BeirCollection(name="x", path=Path("."), corpus={"d1": {}, "d2": {}}, queries={},
                          qrels={"q1": {"d1": 1},              # in the corpus
                                 "q2": {"d9": 1},              # its only relevant document is missing
                                 "q3": {"d2": 0, "d9": 2}})    # d2 is in the corpus but judged not relevant
    assert evaluability(coll) == 0.3333
    assert evaluability(BeirCollection(name="x", path=Path("."), corpus={}, queries={}, qrels={})) == 0.0


def test_cross_book_contamination_is_the_share_of_top_results_from_other_books():
    assert cross_book_contamination(book_id="core", top_books=["core", "gm-guide", "core", "gm-guide"]) == 0.5
    assert cross_book_contamination(book_id="core", top_books=["gm-guide"] * 3) == 1.0
    assert cross_book_contamination(book_id="core", top_books=["core"]) == 0.0
    # a query that names no book, or a pipeline that returned nothing, cannot be judged: no value, not 0
    assert cross_book_contamination(book_id="", top_books=["core"]) is None
    assert cross_book_contamination(book_id="core", top_books=[]) is None


def test_mean_or_none_rounds_and_leaves_an_empty_column_blank():
    assert mean_or_none([1.0, 0.0, 0.0]) == 0.3333
    assert mean_or_none([]) is None


def test_token_f1_is_squad_style_overlap():
    # produced: 4 tokens, gold: 6 tokens, 3 shared (the, speed, 0) -> P 3/4, R 3/6 -> F1 = 2*0.75*0.5/1.25 = 0.6
    assert token_f1("The speed is 0", "the pinned character speed drops 0") == pytest.approx(0.6)
    assert token_f1("Same words here", "same WORDS, here!") == 1.0
    assert token_f1("", "anything") == 0.0
    assert token_f1("nothing shared", "completely different") == 0.0


def test_the_default_row_searches_only_the_evaluated_datasets_like_every_other_row(make_project, edge_index,
                                                                                   tmp_path):
    """The project may hold another collection of the same kind: the default row must not search it (nor take
    its term statistics), or it scores another corpus than the rows it is compared with."""
    from search.models import Chunk
    from search.quality.evaluation import make_rankers

    project = make_project("eval-two")
    ours, _ = ingest(project, "ours", write_repo(tmp_path / "ours"), kind="code")
    other_root = tmp_path / "other"
    other_root.mkdir()
    (other_root / "wallet.py").write_text('def deduct_credits(wallet, amount):\n    """Deduct credits."""\n'
                                          "    wallet.credits -= amount\n    return wallet\n")
    ingest(project, "other", other_root, kind="code")
    ours_ids = set(Chunk.objects.filter(dataset=ours).values_list("pk", flat=True))
    rankers = make_rankers(project=project, dataset_ids=[ours.pk], extra_filter={"kind": ["code"]})
    default = rankers["default"]("deduct credits from a wallet", {})
    assert default and {cid for cid, _ in default} <= ours_ids
    assert [cid for cid, _ in default] == [cid for cid, _ in rankers["weighted"]("deduct credits from a wallet", {})]
    # the default's fusion alone is the code default's (weighted), the row an adapted model's default is read from
    assert rankers["default-fusion"]("deduct credits from a wallet", {}) == rankers["weighted"](
        "deduct credits from a wallet", {})


def test_a_code_collection_gets_the_code_graph_row_over_the_same_datasets(make_project, edge_index, tmp_path):
    """`default+code-graph` is the API's stages with the code graph boost: a row for code only, searching only the
    evaluated datasets like `default`, and with nothing linked it ranks exactly as `default`."""
    from search.models import Chunk
    from search.quality.evaluation import make_rankers

    project = make_project("eval-graph")
    ours, _ = ingest(project, "ours", write_repo(tmp_path / "ours"), kind="code")
    rankers = make_rankers(project=project, dataset_ids=[ours.pk], extra_filter={"kind": ["code"]})
    graph = rankers["default+code-graph"]("deduct credits from a wallet", {})
    ids = set(Chunk.objects.filter(dataset=ours).values_list("pk", flat=True))
    assert graph and {cid for cid, _ in graph} <= ids
    assert {cid for cid, _ in graph} == {cid for cid, _ in rankers["default"]("deduct credits from a wallet", {})}
    web = make_project("eval-graph-web")
    site = tmp_path / "site"
    site.mkdir()
    (site / "page.md").write_text("# Wallets\n\nCredits are deducted from a wallet.\n")
    prose, _ = ingest(web, "docs", site, kind="web")
    assert "default+code-graph" not in make_rankers(project=web, dataset_ids=[prose.pk])


def test_the_graph_pack_row_ranks_a_called_definition_right_after_the_result_that_calls_it(code_world):
    from search.engine.graph_context import MAX_PER_RESULT
    from search.models import Chunk
    from search.quality.evaluation import make_rankers
    from tests.search.code_fixtures import line_of

    ds = code_world["dataset"]
    rankers = make_rankers(project=code_world["project"], dataset_ids=[ds.pk], extra_filter={"kind": ["code"]})
    q = "checkout pay take wallet"
    default = [cid for cid, _ in rankers["default"](q, {})]
    packed = [cid for cid, _ in rankers["default+graph-pack"](q, {})]
    line = line_of("shop/service.py", "take(wallet")
    pay = Chunk.objects.get(dataset=ds, path="shop/service.py", start_line__lte=line, end_line__gte=line).pk
    line = line_of("billing/ledger.py", "def deduct_credits")
    deduct = Chunk.objects.get(dataset=ds, path="billing/ledger.py", start_line__lte=line, end_line__gte=line).pk
    assert default.index(pay) < 5  # a top result, so its calls are followed
    # the called definition comes forward, among the additions spent right after the result that calls it
    assert packed.index(pay) < packed.index(deduct) <= packed.index(pay) + MAX_PER_RESULT
    assert packed.index(deduct) < default.index(deduct)
    assert sorted(packed) == sorted(default)  # the same chunks, only reordered
