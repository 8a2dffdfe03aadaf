"""search/evaluation_runs.py: a BEIR folder marked as code is ingested as code chunks in a dataset of its own and
searched with the code analyzer; the same folder as prose goes to another dataset, so the kinds never mix."""
from __future__ import annotations

import json
from pathlib import Path

from tests.search.ctx_fixtures import edge_index  # noqa: F401

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
    from projects.models import Dataset
    from search.evaluation_runs import evaluate_beir
    from search.models import Chunk

    root = _collection(tmp_path / "funcs", kind="code")
    report = evaluate_beir(path=root, pipelines=["sparse", "fused"], progress=False)
    assert report.collection == "beir:funcs:code" and report.extra["kind"] == "code"
    ds = Dataset.objects.get(name="beir:funcs:code")
    assert ds.kind == "code"
    assert set(Chunk.objects.filter(dataset=ds).values_list("kind", flat=True)) == {"code"}
    assert report.pipelines["sparse"]["hit@1"] == 1.0  # each query's words are in its function's names

    prose = evaluate_beir(path=root, pipelines=["sparse"], progress=False, kind="beir")
    assert prose.collection == "beir:funcs"
    assert set(Chunk.objects.filter(dataset__name="beir:funcs").values_list("kind", flat=True)) == {"beir"}
    assert Chunk.objects.filter(dataset=ds).count() == len(CORPUS)  # the code dataset is untouched
