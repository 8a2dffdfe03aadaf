"""Fixtures shared by the quality tests, ingested for real (Postgres, the embedded Qdrant): a small code corpus and a
toy BEIR collection with train and test splits."""
from __future__ import annotations

import json

import pytest

from search.quality.runs import ingest_beir
from tests.search.ctx_fixtures import edge_index, ingest  # noqa: F401 - fixture


@pytest.fixture
def code_dataset(tmp_path, make_user, make_project, edge_index):
    src = tmp_path / "pkg"
    src.mkdir()
    verbs = ["read", "write", "parse", "format", "check", "merge", "split", "count", "load", "store"]
    nouns = ["config", "header", "ledger", "invoice", "session", "token"]
    for n, (verb, noun) in enumerate((v, o) for v in verbs for o in nouns):
        (src / f"m{n}.py").write_text(
            f"def {verb}_{noun}_entries(items, limit=10):\n"
            f"    # {verb} each {noun} entry and keep at most the limit\n"
            f"    out = [x for x in items if x][:limit]\n"
            f"    if not out:\n"
            f"        raise ValueError('no {noun} entries to {verb} here')\n"
            f"    return out\n")
    project = make_project("tuned", make_user())
    dataset, _ = ingest(project, "pkg", src)
    return project, dataset


@pytest.fixture
def toy_beir(tmp_path, edge_index):
    root = tmp_path / "toy"
    root.mkdir()
    with (root / "corpus.jsonl").open("w") as fh:
        for n in range(12):
            # long enough for the prose pairs adaptation mines (a 3-word title, 20 words, 3 sentences)
            text = (f"Findings about subject {n} come from a long study of many patients. The study measured "
                    f"the outcomes over several years of careful follow up. Results about subject {n} were mixed "
                    "but clear enough for the authors.")
            fh.write(json.dumps({"_id": f"d{n}", "title": f"Topic number {n} here", "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as fh:
        for n in range(12):
            fh.write(json.dumps({"_id": f"q{n:02d}", "text": f"what about subject {n}"}) + "\n")
    # train: q00..q08 (q03 judges two documents, q04 one not relevant); test: q09..q11
    train = [f"q{n:02d}\td{n}\t1\n" for n in range(9)] + ["q03\td7\t1\n", "q04\td8\t0\n"]
    (root / "qrels_train.tsv").write_text("".join(train))
    (root / "qrels_test.tsv").write_text("".join(f"q{n:02d}\td{n}\t1\n" for n in range(9, 12)))
    _, dataset, _ = ingest_beir(path=root, progress=False)
    return root, dataset
