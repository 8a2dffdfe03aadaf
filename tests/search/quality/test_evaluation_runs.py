"""search/quality/runs.py. Rules runs: evaluability, cross-book contamination and answer
similarity as `evaluate_rules` reports them, on the demo rulebook ingested for real. BEIR runs: a folder marked as
code is ingested as code chunks in a dataset of its own and searched with the code analyzer; the same folder as
prose goes to another dataset, so the kinds never mix.
"""
from __future__ import annotations

import json
import math
from io import StringIO
from pathlib import Path

import pytest

from search.engine.fusion_settings import kind_default
from search.models import Chunk, Dataset
from search.quality.evaluation import answer_cosine
from search.quality.runs import served_ranking
from search.rules.search import RulesSpec, rules_search
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures


def test_answer_cosine_is_one_for_the_same_answer_and_ranks_a_paraphrase_above_an_unrelated_one(db):
    gold = "A pinned character's speed is 0."
    same, para, other, empty = answer_cosine([
        (gold, gold),
        ("The speed of a pinned creature drops to zero.", gold),
        ("Fireball deals 8d6 fire damage in a 20-foot radius.", gold),
        ("", gold),
    ])
    assert same == pytest.approx(1.0, abs=1e-5)
    assert para > other + 0.2
    assert 0.0 < other < para < same
    assert empty == 0.0


def _queries(tmp_path, items) -> str:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps({"queries": items}))
    return str(path)


def test_evaluate_rules_reports_evaluability_contamination_and_both_answer_similarities(demo_project, tmp_path):
    from search.models import Chunk
    from search.quality.runs import EvalOptions, evaluate_rules
    from search.rules.answer import extractive_answer
    from search.rules.search import RulesSpec, rules_search

    q = "what happens when I'm pinned?"
    found = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=50))
    top10 = list(Chunk.objects.filter(id__in=found["candidate_ids"][:10]).values("id", "book_id", "text"))
    top10.sort(key=lambda r: found["candidate_ids"].index(r["id"]))
    produced, _ = extractive_answer(q=q, results=top10[:5])
    other_books = sum(1 for r in top10 if r["book_id"] != "core") / len(top10)
    path = _queries(tmp_path, [
        # gold answer = exactly what the extractive answer produces: both similarities are 1 for this query
        {"id": "a", "query": q, "book_id": "core", "expected_sections": [["Conditions", "Pinned"]],
         "answer": produced},
        # its gold section does not exist: not evaluable; no book, no answer -> no contamination, no similarity
        {"id": "b", "query": "how do starships jump", "expected_sections": [["Starships", "Jump Drives"]]},
    ])
    report = evaluate_rules(path=path, project_slug="demo",
                            options=EvalOptions(pipelines=["default", "sparse"], progress=False))
    assert report.queries == 2
    m = report.pipelines["default"]
    assert m["evaluability"] == 0.5
    assert m["hit@1"] == 1.0  # query a finds Pinned first; b has no gold in the book: ranked metrics leave it out
    assert m["cross_book_contamination"] == pytest.approx(round(other_books, 4))
    assert m["answer_similarity"] == 1.0
    assert m["answer_cosine"] == pytest.approx(1.0, abs=1e-4)
    assert report.pipelines["sparse"]["evaluability"] == 0.5


def _chunk(**kw) -> int:
    from search.models import Chunk

    return Chunk.objects.get(ruleset_id="emberfall", **kw).pk


def test_expand_gold_adds_children_and_continuations_but_not_siblings(demo_project, emberfall):
    from search.models import Chunk
    from search.quality.evaluation import expand_gold

    ds = [emberfall["dataset_id"]]
    intro = Chunk.objects.get(ruleset_id="emberfall", book_id="core", section_path=["Conditions"]).pk
    conditions = set(Chunk.objects.filter(ruleset_id="emberfall", book_id="core", section_path__0="Conditions")
                     .values_list("id", flat=True))
    assert len(conditions) > 3
    assert expand_gold({intro}, dataset_ids=ds) == conditions          # the chapter's sections are its children
    pinned, dazed = _chunk(symbol="Pinned", book_id="core"), _chunk(symbol="Dazed", book_id="core")
    assert expand_gold({pinned}, dataset_ids=ds) == {pinned}            # the next section (Dazed) is a sibling
    # a section split over two chunks: the second continues the first (same path, reached by `next`)
    Chunk.objects.filter(pk=dazed).update(section_path=["Conditions", "Pinned"])
    assert expand_gold({pinned}, dataset_ids=ds) == {pinned, dazed}
    assert expand_gold(set(), dataset_ids=ds) == set()


def test_evaluate_rules_reports_expanded_gold_and_the_chapter_routing_rows(demo_project, tmp_path):
    from search.models import Chunk
    from search.quality.runs import EvalOptions, evaluate_rules

    intro = Chunk.objects.get(ruleset_id="emberfall", book_id="core", section_path=["Conditions"]).pk
    path = _queries(tmp_path, [
        # gold is the chapter's introduction; the Dazed section that answers it is its child
        {"id": "a", "query": "can a dazed character take reactions", "book_id": "core",
         "expected_chunk_ids": [intro]},
        {"id": "b", "query": "what happens when I'm pinned?", "book_id": "core",
         "expected_sections": [["Conditions", "Pinned"]]},
    ])
    report = evaluate_rules(path=path, project_slug="demo", options=EvalOptions(pipelines=["sparse"], progress=False),
                            expand=True, chapter_routing_report=True)
    assert list(report.pipelines) == ["sparse", "default", "routing-top1", "routing-top3"]
    for name, m in report.pipelines.items():
        assert m["hit@1"] == 0.5, name                      # a: the intro is not the best answer; b: Pinned is
        assert m["hit@1_expanded"] == 1.0, name             # a: Dazed, a child of the gold intro, counts
        assert m["mrr@10_expanded"] >= m["mrr@10"]
    assert "mrr@10_evaluable" not in report.pipelines["sparse"]   # routing figures only on the routing rows
    top1 = report.pipelines["routing-top1"]
    assert top1["evaluability"] == 1.0                      # both golds sit in Conditions, the routed chapter
    assert top1["mrr@10_evaluable"] == top1["mrr@10"]
    assert report.pipelines["default"]["evaluability"] == 1.0



def _ndcg_at_10(ranking: list[int], gold: set[int]) -> float:
    """Binary nDCG@10 by its definition: DCG over the first ten, divided by the DCG of the gold ranked first."""
    dcg = sum(1 / math.log2(i + 1) for i, cid in enumerate(ranking[:10], start=1) if cid in gold)
    return dcg / sum(1 / math.log2(i + 1) for i in range(1, min(len(gold), 10) + 1))


def test_evaluate_rules_command_runs_the_ablation_rows_and_reports_ndcg_by_category(demo_project, tmp_path):
    """`manage.py evaluate --rules FILE`: the rules search's ablation rows are pipelines it runs, and when the
    questions carry categories the printed report and its markdown file hold nDCG@10 per category, each cell the
    mean over that category's questions of their own nDCG@10 (computed here from the default ranking itself)."""
    from django.core.management import call_command

    from search.models import Chunk
    from search.quality.evaluation import report_slug
    from search.quality.runs import RULES_PIPELINES
    from search.rules.search import ABLATIONS, RulesSpec, rules_search

    assert all(RULES_PIPELINES[name] == overrides for name, overrides in ABLATIONS.items())
    questions = [  # (id, question, gold section, category)
        ("a", "what happens when I'm pinned?", ["Conditions", "Pinned"], "conditions"),
        ("b", "can a dazed character take reactions", ["Conditions", "Dazed"], "conditions"),
        ("c", "how do I escape a pin", ["Actions in Combat", "Escaping a Pin"], "combat"),
        ("d", "who acts first in a round", ["Combat", "Turn Order"], "combat"),
        ("e", "Cinderstorm damage and saving throw", ["Spells", "Cinderstorm"], ""),   # no category: left out
        ("f", "how do starships jump", ["Starships", "Jump Drives"], "vehicles"),      # no gold: category absent
    ]
    path = _queries(tmp_path, [{"id": qid, "query": q, "book_id": "core", "expected_sections": [section],
                                "category": cat} for qid, q, section, cat in questions])
    ndcg = {}
    for qid, q, section, _ in questions[:4]:
        gold = set(Chunk.objects.filter(ruleset_id="emberfall", book_id="core", section_path=section)
                   .values_list("id", flat=True))
        assert gold, section
        found = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=50))
        ndcg[qid] = _ndcg_at_10(found["candidate_ids"], gold)
    want = {"combat": (ndcg["c"] + ndcg["d"]) / 2, "conditions": (ndcg["a"] + ndcg["b"]) / 2}

    out = StringIO()
    call_command("evaluate", "--rules", path, "--project", "demo", "--pipelines", "default,no-headings,rrf",
                 "--no-progress", "--no-save", "--report-dir", str(tmp_path / "reports"), stdout=out)
    report = json.loads(next((tmp_path / "reports").glob("*.json")).read_text())
    assert list(report["pipelines"]) == ["default", "no-headings", "rrf"]
    by_category = report["extra"]["by_category"]
    assert list(by_category) == ["default", "no-headings", "rrf"]
    default = by_category["default"]
    assert list(default) == ["combat", "conditions"]
    assert default["combat"]["queries"] == default["conditions"]["queries"] == 2
    for cat, value in want.items():
        assert default[cat]["ndcg@10"] == pytest.approx(value, abs=1e-4), cat
    row = f"| default | {default['combat']['ndcg@10']:.4f} | {default['conditions']['ndcg@10']:.4f} |"
    header = "| pipeline | combat (2) | conditions (2) |"
    md = (tmp_path / "reports" / f"{report_slug(report['collection'])}.md").read_text()
    for text in (out.getvalue(), md):
        assert "ndcg@10 by category" in text and header in text and row in text


CORPUS = [
    {"_id": "mod.ledger.deduct_credits", "title": "mod.ledger.deduct_credits",
     "text": "def deduct_credits(wallet, amount):\n    wallet.balance -= amount\n    return wallet.balance\n"},
    {"_id": "mod.http.HTTPRouter.add_route", "title": "mod.http.HTTPRouter.add_route",
     "text": "def add_route(self, pattern, view):\n    self.routes.append((pattern, view))\n"},
    {"_id": "mod.files.read_config_file", "title": "mod.files.read_config_file",
     "text": "def read_config_file(path):\n    with open(path) as fh:\n        return fh.read()\n"},
]
QUERIES = [{"_id": "q1", "text": "Take credits from a wallet."},
           {"_id": "q2", "text": "Register a route pattern for a view."},
           {"_id": "q3", "text": "Read the config file at path."}]


def _collection(root: Path, *, kind: str | None) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    (root / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in QUERIES))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q['_id']}\t{c['_id']}\t1\n" for q, c in zip(QUERIES, CORPUS, strict=True)))
    if kind:
        (root / "collection.json").write_text(json.dumps({"kind": kind}))
    return root


def test_a_code_collection_is_ingested_as_code_chunks_in_its_own_dataset(tmp_path, edge_index, db):
    from search.models import Chunk, Dataset
    from search.quality.runs import EvalOptions, evaluate_beir

    root = _collection(tmp_path / "funcs", kind="code")
    report = evaluate_beir(path=root, options=EvalOptions(pipelines=["sparse", "fused"], progress=False))
    assert report.collection == "beir:funcs:code" and report.extra["kind"] == "code"
    ds = Dataset.objects.get(name="beir:funcs:code")
    assert ds.kind == "code"
    assert set(Chunk.objects.filter(dataset=ds).values_list("kind", flat=True)) == {"code"}
    assert report.pipelines["sparse"]["hit@1"] == 1.0  # each query's words are in its function's names

    prose = evaluate_beir(path=root, options=EvalOptions(pipelines=["sparse"], progress=False), kind="beir")
    assert prose.collection == "beir:funcs"
    assert set(Chunk.objects.filter(dataset__name="beir:funcs").values_list("kind", flat=True)) == {"beir"}
    assert Chunk.objects.filter(dataset=ds).count() == len(CORPUS)  # the code dataset is untouched


def test_served_ranking_of_a_rulebook_is_the_rules_search_not_the_context_fusion(demo_project, emberfall):
    """Hard negatives and the adoption check for rules questions must read what a rules tenant is served: the rules
    search (weighted fusion, heading match, policies, graph), over a snapshot, with the served vectors."""
    rules = sorted(Dataset.objects.filter(kind="rules", project=demo_project).values_list("pk", flat=True))
    q = "escaping a pin"
    live = rules_search(user=None, project=demo_project, spec=RulesSpec(q=q, log=False, top_k=1))["candidate_ids"]
    with served_ranking(dataset_ids=rules) as served:
        ranked = served.rank(q)
    assert served.label.startswith("rules search") and served.label != kind_default(frozenset({"rules"})).label
    assert ranked[:5] == live[:5]  # the same stages over a snapshot of the same vectors
    escaping = Chunk.objects.get(book_id="core", symbol="Escaping a Pin").pk
    assert ranked[0] == escaping  # the heading match (a rules stage) puts the section the question names first
