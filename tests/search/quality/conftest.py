"""Fixtures shared by the quality tests: a small code corpus ingested for real (Postgres, the embedded Qdrant)."""
from __future__ import annotations

import pytest

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
