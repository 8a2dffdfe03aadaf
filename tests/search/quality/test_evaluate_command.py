"""`manage.py evaluate` end to end: a BEIR run checked by hand, and the errors a new user meets.

The tiny BEIR collection (tests/search/fixtures/tiny_beir) is ingested for real into the test's private
embedded store; the numbers it must produce are worked out below from its qrels alone. The "not ready" cases
run the command in a subprocess against a real database that was never migrated, and against a Postgres
address where nothing listens, because that is how a user meets them.
"""
from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import uuid
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from search.quality.evaluation import PIPELINES
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture

ROOT = Path(__file__).resolve().parents[3]
TINY = Path(__file__).parents[1] / "fixtures" / "tiny_beir"
DEMO_QUERIES = ROOT / "search" / "rules" / "demo_rules" / "eval_queries.json"


def _hand_values() -> dict[str, float]:
    """What every pipeline must score on tiny_beir when each query's relevant abstract ranks first.

    Judged queries: q1 (d2), q2 (d4), q3 (d3 and d9; d9 is not in the corpus). q4 has no judgement: dropped.
    q1, q2: rank 1 -> hit 1, RR 1, nDCG 1, recall 1.
    q3: d3 at rank 1, d9 never retrievable -> hit 1, RR 1, DCG = 1, IDCG = 1 + 1/log2(3) = 1.630930,
        nDCG = 0.613147, recall@100 = 1/2.
    Means over 3: nDCG@10 = (2 + 0.613147) / 3 = 0.871049; recall@100 = 2.5 / 3 = 0.833333.
    Evaluability: every judged query has at least one relevant document in the corpus -> 1.0.
    """
    ndcg_q3 = 1 / (1 + 1 / math.log2(3))
    return {"hit@1": 1.0, "hit@3": 1.0, "hit@10": 1.0, "mrr@10": 1.0, "ndcg@10": (2 + ndcg_q3) / 3,
            "recall@100": 2.5 / 3, "evaluability": 1.0}


def test_evaluate_beir_on_the_tiny_collection_matches_hand_computed_values(edge_index, tmp_path):
    out = StringIO()
    call_command("evaluate", "--beir", str(TINY), "--json", "--no-progress", "--report-dir", str(tmp_path),
                 stdout=out)
    report = json.loads(out.getvalue())
    assert report["collection"] == "beir:tiny_beir"
    assert report["queries"] == 3
    # trained-rerank needs --reranker; the code-graph rows are a code collection's
    assert set(report["pipelines"]) == set(PIPELINES) - {"trained-rerank", "default+code-graph", "default+graph-pack"}
    expected = _hand_values()
    assert expected["ndcg@10"] == pytest.approx(0.871049, abs=1e-6)
    for name, metrics in report["pipelines"].items():
        for key, value in expected.items():
            assert metrics[key] == pytest.approx(value, abs=5e-4), (name, key)
    assert report["extra"] == {"corpus_docs": 5, "kind": "beir"}
    for suffix in (".md", ".json", ".png"):
        assert (tmp_path / f"beir_tiny_beir{suffix}").stat().st_size > 0
    from search.models import EvaluationRun

    run = EvaluationRun.objects.get(collection="beir:tiny_beir")
    assert run.results["sparse"]["ndcg@10"] == pytest.approx(0.8710, abs=5e-4)


def test_evaluate_beir_searches_a_store_of_its_own_and_leaves_the_live_index_alone(edge_index, tmp_path):
    """The corpus is an evaluation dataset, searched in a throwaway store that is gone afterwards;
    the live index (with a tenant's points in it) is neither written nor counted, and the reconciler does not
    call the evaluation's chunks missing from it."""
    import tempfile

    from search.engine.applier import apply_outbox
    from search.engine.reconcile import reconcile, repair, scan
    from search.models import Dataset

    before_tmp = set(Path(tempfile.gettempdir()).glob("eval-index-*"))
    out = StringIO()
    call_command("evaluate", "--beir", str(TINY), "--json", "--no-progress", "--no-save", "--pipelines",
                 "sparse,default", "--report-dir", str(tmp_path), stdout=out)
    report = json.loads(out.getvalue())
    assert report["pipelines"]["default"]["ndcg@10"] == pytest.approx(_hand_values()["ndcg@10"], abs=5e-4)
    assert report["timings"]["index"]["points"] == 5 and report["timings"]["index"]["store"] == "throwaway, dropped"
    assert Dataset.objects.get(name="beir:tiny_beir").is_evaluation
    apply_outbox(index=edge_index)  # the applier sees the ingest's outbox rows and leaves the chunks out
    assert edge_index.count() == 0
    assert set(Path(tempfile.gettempdir()).glob("eval-index-*")) == before_tmp  # the throwaway store is gone
    found = reconcile(index=edge_index).found
    assert found.missing == [] and found.orphans == []

    # a store from before this release held evaluation points: the reconciler calls them orphans and drops them
    from search.engine.applier import build_points
    from search.models import Chunk

    legacy = list(Chunk.objects.filter(dataset__name="beir:tiny_beir").values_list("pk", flat=True))
    points, _ = build_points(legacy, model_id=edge_index.model_id, evaluation=True)
    edge_index.upsert(points)
    found = scan(index=edge_index)  # the scan alone: reconcile() would first replay the outbox, which drops them too
    assert sorted(found.orphans) == sorted(legacy) and found.missing == []
    repair(index=edge_index, found=found)
    assert edge_index.count() == 0


def _run_evaluate(database_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run([sys.executable, "manage.py", "evaluate", "--no-progress", "--no-save", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=180)


@pytest.fixture
def empty_database(db):
    """A new, empty database on the test session's own Postgres (dropped afterwards): a never-migrated install."""
    import psycopg
    from django.db import connection

    s = connection.settings_dict
    name = f"eval_fresh_{uuid.uuid4().hex[:10]}"
    admin = psycopg.connect(dbname="postgres", user=s["USER"], host=s["HOST"], autocommit=True)
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        yield f"postgresql://{s['USER']}:@/{name}?host={s['HOST']}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def test_evaluate_on_a_database_that_was_never_migrated_says_to_run_migrate(empty_database):
    done = _run_evaluate(empty_database)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "is not migrated" in done.stderr and "manage.py migrate" in done.stderr
    assert done.stdout == ""


def test_evaluate_with_postgres_down_says_to_start_the_services():
    with socket.socket() as s:  # a port nothing listens on: bind, read it, close
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = _run_evaluate(f"postgresql://nobody:x@127.0.0.1:{port}/nothing", "--beir", str(TINY))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert "Postgres is not reachable" in done.stderr and "manage.py platform up" in done.stderr


def test_evaluate_beir_runs_while_another_process_holds_the_embedded_store(transactional_db, tmp_path):
    """The server (`make run`) owns the embedded store; a BEIR evaluation searches a throwaway store of its own,
    so it runs beside it instead of refusing with "could not open the embedded Qdrant store"."""
    from django.db import connection

    from search.engine.index import open_index

    held = tmp_path / "live-store"
    index = open_index(path=held)  # this process holds it, as the web process would
    try:
        db = connection.settings_dict
        env = {**os.environ, "DATABASE_URL": f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}",
               "QDRANT_PATH": str(held)}
        done = subprocess.run([sys.executable, "manage.py", "evaluate", "--no-progress", "--no-save", "--json",
                               "--beir", str(TINY), "--pipelines", "sparse"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["pipelines"]["sparse"]["ndcg@10"] == pytest.approx(_hand_values()["ndcg@10"], abs=5e-4)
    finally:
        index.close()


def test_evaluate_rules_beside_the_process_that_holds_the_store_searches_a_snapshot_with_the_same_results(
        transactional_db, edge_index, tmp_path):
    """The rules evaluation searches the project's live datasets. Beside the server, which holds the embedded store,
    it searches a snapshot built from Postgres (the truth the index projects) instead of refusing, and the
    snapshot ranks exactly as the live index does: every row equals the same evaluation run in the process that
    holds the store."""
    from django.db import connection

    from search.quality.runs import EvalOptions, evaluate_rules
    from search.rules.demo import load_demo_rules

    load_demo_rules()  # into the store this process holds (edge_index), as `make demo` does for the server
    rows = "default,sparse,dense,fused,no-aliases"
    live = evaluate_rules(path=DEMO_QUERIES, project_slug="demo",
                          options=EvalOptions(pipelines=rows.split(","), progress=False))
    assert live.timings["index"]["store"] == "live"
    db = connection.settings_dict
    env = {**os.environ, "DATABASE_URL": f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}",
           "QDRANT_PATH": str(edge_index.root)}
    done = subprocess.run([sys.executable, "manage.py", "evaluate", "--no-progress", "--no-save", "--json",
                           "--pipelines", rows, "--report-dir", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    beside = json.loads(done.stdout)
    assert beside["timings"]["index"]["store"] == "snapshot"
    for name in rows.split(","):
        for metric in ("ndcg@10", "mrr@10", "recall@100"):
            assert beside["pipelines"][name][metric] == pytest.approx(live.pipelines[name][metric], abs=1e-4), \
                (name, metric)
    assert live.pipelines["default"]["ndcg@10"] > 0.5  # the demo questions are answerable: the rows mean something
