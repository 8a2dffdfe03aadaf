"""Adopting an adapted embedding model: the rule, the switch that keeps serving, and tenant isolation."""
from __future__ import annotations

import shutil

import pytest
from django.urls import reverse

from config.errors import BadInput
from inference.encoders import adapted_models_dir, resolve_model
from search.engine.applier import apply_outbox, rebuild
from search.engine.index import get_index, model_index
from search.engine.pipeline import QuerySpec, run_query
from search.models import Chunk, Dataset, Feedback, IndexOutbox, QuerySession
from search.quality import adoption
from search.quality.judged import JudgedSplit
from search.quality.runs import throwaway_index
from tests.search.ctx_fixtures import code_repo, edge_index, ingest, write_repo  # noqa: F401 - fixtures

MODEL = "shop-adapted"


@pytest.fixture(scope="module")
def adapted_dir(tmp_path_factory):
    """A copy of the shipped model with its weights nudged (seeded): another model, made in seconds, whose vectors
    differ from the configured one's, which is all the switch needs to be seen."""
    import torch
    from sentence_transformers import SentenceTransformer

    var = tmp_path_factory.mktemp("var")
    model = SentenceTransformer(resolve_model()[1], device="cpu")
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.02)
    model.save(str(var / "models" / "embeddings" / MODEL))
    yield var
    shutil.rmtree(var, ignore_errors=True)


@pytest.fixture
def two_tenants(adapted_dir, settings, edge_index, code_repo, make_user, make_project):
    settings.VAR_DIR = adapted_dir
    a = make_project("tenant-a", make_user())
    b = make_project("tenant-b", make_user())
    ds_a, _ = ingest(a, "shop", code_repo)
    ds_b, _ = ingest(b, "shop", code_repo)
    return a, b, ds_a, ds_b


def _search(project, q="take credits from a wallet"):
    return run_query(user=None, project=project, spec=QuerySpec(q=q, include_global=False, log=False, rerank=False))


def _ranking(res):
    return [(r["chunk_id"], round(r["score"], 6)) for r in res.results]


def test_a_switched_dataset_is_searched_with_its_model_and_other_tenants_results_do_not_move(two_tenants, edge_index):
    a, b, ds_a, _ = two_tenants
    before_a, before_b = _search(a), _search(b)
    assert before_a.embedding_models == before_b.embedding_models == ["all-MiniLM-L6-v2"]

    stats = adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, evidence={"why": "test"}, log=lambda m: None)

    ds_a.refresh_from_db()
    assert (ds_a.embedding_model, ds_a.embedding_model_next, ds_a.embedding_evidence) == (MODEL, "", {"why": "test"})
    assert stats["datasets"] == 1 and stats["chunks"] == Dataset.objects.get(pk=ds_a.pk).chunks.count() > 0
    # the adapted model's own collections hold tenant A's chunks
    assert model_index(get_index(), name=MODEL).count() == stats["chunks"]
    after_a, after_b = _search(a), _search(b)
    assert after_a.embedding_models == [MODEL]
    dense_before = {c.chunk_id: c.dense_score for c in before_a.candidates}
    dense_after = {c.chunk_id: c.dense_score for c in after_a.candidates}
    assert dense_after != dense_before  # A's dense leg runs the adapted vectors
    assert after_b.embedding_models == ["all-MiniLM-L6-v2"]
    assert _ranking(after_b) == _ranking(before_b)  # B's results are exactly what they were


def test_until_the_new_vectors_are_in_queries_keep_the_old_model_and_new_chunks_get_both(two_tenants, tmp_path):
    a, _, ds_a, _ = two_tenants
    Dataset.objects.filter(pk=ds_a.pk).update(embedding_model_next=MODEL)  # a switch under way
    assert _search(a).embedding_models == ["all-MiniLM-L6-v2"]
    extra = write_repo(tmp_path / "more")
    (extra / "new_module.py").write_text("def refund_order(order):\n    return order.total\n")
    _, job = ingest(a, "shop", extra, apply_index=False)
    new_ids = set(Dataset.objects.get(pk=ds_a.pk).chunks.filter(path__endswith="new_module.py")
                  .values_list("pk", flat=True))
    assert new_ids
    models = set(IndexOutbox.objects.filter(chunk_id__in=new_ids, op="upsert").values_list("model_id", flat=True))
    assert models == {"all-MiniLM-L6-v2", MODEL}


def test_switching_back_to_the_configured_model_and_bad_names(two_tenants):
    a, _, ds_a, _ = two_tenants
    adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, log=lambda m: None)
    adoption.switch_model(dataset_ids=[ds_a.pk], name="", log=lambda m: None)
    assert Dataset.objects.get(pk=ds_a.pk).embedding_model == ""
    assert _search(a).embedding_models == ["all-MiniLM-L6-v2"]
    with pytest.raises(BadInput) as err:
        adoption.switch_model(dataset_ids=[ds_a.pk], name="no-such-model", log=lambda m: None)
    assert err.value.field == "model" and "no-such-model" in err.value.detail
    assert Dataset.objects.get(pk=ds_a.pk).embedding_model_next == ""  # nothing was started


def test_a_rebuild_and_an_evaluation_snapshot_hold_each_dataset_in_its_models_collections(two_tenants):
    _, _, ds_a, ds_b = two_tenants
    adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, log=lambda m: None)
    n_a = ds_a.chunks.count()
    rebuild()
    assert model_index(get_index(), name=MODEL).count() == n_a
    with throwaway_index(dataset_ids=[ds_a.pk, ds_b.pk]) as (_, stats):
        assert stats["models"] == ["all-MiniLM-L6-v2", MODEL]
        assert stats["points"] == n_a + ds_b.chunks.count()
    assert apply_outbox() == 0  # nothing left behind for either model


@pytest.mark.parametrize(("kinds", "heldout", "judged", "adopt"), [
    ({"code"}, {"code_gain_lower_95": 0.01, "non_name_gain_lower_95": 0.02}, None, True),
    ({"code"}, {"code_gain_lower_95": -0.01, "non_name_gain_lower_95": 0.02}, None, False),
    # the easy name pairs alone carried the check: not adopted, whatever an older rule wrote in `confirmed`
    ({"code"}, {"confirmed": True, "code_gain_lower_95": 0.016, "non_name_gain_lower_95": -0.03}, None, False),
    ({"code"}, {"confirmed": True, "code_gain_lower_95": 0.01}, None, False),  # an older manifest: no such bound
    ({"web"}, {"code_gain_lower_95": 0.02, "non_name_gain_lower_95": 0.02}, None, False),  # prose: pairs don't decide
    ({"web"}, {}, {"queries": 40, "gain": 0.03, "gain_lower_95": 0.01}, True),
    ({"code"}, {"confirmed": True}, {"queries": 40, "gain": -0.01, "gain_lower_95": -0.03}, False),  # judged win
    ({"code"}, {"code_gain_lower_95": 0.01, "non_name_gain_lower_95": 0.01}, {"queries": 5, "gain": -0.2,
                                                                           "gain_lower_95": -0.3}, True),  # too few judged
])
def test_the_adoption_rule(kinds, heldout, judged, adopt):
    decided, why = adoption.decide(kinds=kinds, heldout=heldout, judged=judged)
    assert decided is adopt and why


def test_a_rejected_model_leaves_the_evidence_of_the_one_that_serves_and_the_admin_shows_both(
        two_tenants, client, make_user):
    _, _, ds_a, ds_b = two_tenants
    adopted = {"model": MODEL, "adopted": True, "reason": "held-out code pairs: 95 % lower bound of the gain 0.01"}
    adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, evidence=adopted, log=lambda m: None)

    out = adoption.adopt_if_confirmed(name="later-try", dataset_ids=[ds_a.pk, ds_b.pk],
                                      manifest={"heldout": {"confirmed": False, "code_gain_lower_95": -0.02}},
                                      split=JudgedSplit(), log=lambda m: None)

    assert out["adopted"] is False
    ds_a.refresh_from_db()
    ds_b.refresh_from_db()
    # A still serves the adopted model, so its evidence still says why; the "no" is kept beside it
    assert ds_a.embedding_model == MODEL
    assert {k: ds_a.embedding_evidence[k] for k in adopted} == adopted
    assert ds_a.embedding_evidence["last_rejected"]["model"] == "later-try"
    # B serves the configured model: the rejection is its evidence
    assert ds_b.embedding_model == "" and ds_b.embedding_evidence["model"] == "later-try"
    assert ds_b.embedding_evidence["adopted"] is False and "last_rejected" not in ds_b.embedding_evidence

    client.force_login(make_user("staff@example.com", staff=True))
    html = client.get(reverse("admin:search_dataset_change", args=[ds_a.pk])).content.decode()
    assert f"<b>{MODEL}</b> adopted" in html and "since then: <b>later-try</b> not adopted" in html
    assert "held-out code pairs do not confirm a gain" in html


def test_the_check_reads_the_split_the_model_trained_with_not_the_feedback_as_it_is_now(two_tenants):
    """Judgments added while a model trains move the split (half of them check); the check must read the split the
    training read, or a query the model trained on could join the check and confirm its own training."""
    a, _, ds_a, _ = two_tenants
    chunk = Chunk.objects.filter(dataset=ds_a).order_by("pk").first()
    for n in range(40):
        session = QuerySession.objects.create(project=a, query=f"question {n:02d}", kind="context")
        Feedback.objects.create(session=session, chunk=chunk, relevance=2, user=None)
    trained_with = JudgedSplit(train=[(f"question {n:02d}", chunk.pk) for n in range(40)])  # --judged-max 0
    out = adoption.adopt_if_confirmed(name="all-trained", dataset_ids=[ds_a.pk], split=trained_with,
                                      manifest={"heldout": {"confirmed": False}}, log=lambda m: None)
    assert out["adopted"] is False and out["evidence"]["judged"] is None  # nothing checks a model trained on all
    assert "held-out code pairs" in out["reason"]  # the code rule decided: no judged check ran


def test_an_adapted_model_named_like_the_configured_one_is_refused(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    shutil.copytree(resolve_model()[1], adapted_models_dir() / "all-MiniLM-L6-v2")
    with pytest.raises(BadInput, match="configured model"):
        adoption.check_model("all-MiniLM-L6-v2")


def test_reconcile_checks_and_repairs_each_models_collections(two_tenants):
    from search.engine.reconcile import reconcile_all, scan

    _, _, ds_a, _ = two_tenants
    adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, log=lambda m: None)
    reports = reconcile_all(record=False)
    assert [r.model_id for r in reports] == ["all-MiniLM-L6-v2", MODEL]
    assert all(r.exact for r in reports)
    store = model_index(get_index(), name=MODEL)
    victim = ds_a.chunks.order_by("pk").values_list("pk", flat=True).first()
    store.delete([victim])  # a point lost from the adapted model's collections only
    # scanned directly: reconcile applies the outbox first, and rows behind a young id gap are applied again
    assert scan(index=store, name=MODEL).missing == [victim]
    assert scan(index=get_index()).missing == []
    fixed = reconcile_all(fix=True, record=False)
    assert all(r.exact for r in fixed) and store.count() == ds_a.chunks.count()


def test_chunks_written_after_a_switch_are_expected_only_in_the_adapted_models_collections(two_tenants, tmp_path):
    """A dataset searched with an adapted model writes its new chunks to that model's collections only: the
    configured model's check must not count them as missing there, even where the configured model has vectors of
    their texts (here another tenant holds the same file)."""
    from search.engine.reconcile import reconcile_all, scan

    a, _, ds_a, _ = two_tenants
    adoption.switch_model(dataset_ids=[ds_a.pk], name=MODEL, log=lambda m: None)
    extra = write_repo(tmp_path / "more")
    (extra / "new_module.py").write_text((extra / "billing" / "ledger.py").read_text())
    ingest(a, "shop", extra)
    new_ids = list(Dataset.objects.get(pk=ds_a.pk).chunks.filter(path__endswith="new_module.py")
                   .values_list("pk", flat=True))
    assert new_ids and set(IndexOutbox.objects.filter(chunk_id__in=new_ids, op="upsert")
                           .values_list("model_id", flat=True)) == {MODEL}
    assert scan(index=get_index()).missing == [] and scan(index=model_index(get_index(), name=MODEL),
                                                          name=MODEL).missing == []
    assert all(r.exact for r in reconcile_all(record=False))


def test_prose_with_too_few_judged_queries_is_not_adopted_and_the_reason_says_how_many():
    few = {"queries": 20, "gain": -0.013, "gain_lower_95": -0.06}
    decided, why = adoption.decide(kinds={"rules"}, heldout={}, judged=few)
    assert decided is False and why.startswith(f"only 20 judged queries ({adoption.MIN_JUDGED} decide)")
    assert adoption.decide(kinds={"rules"}, heldout={}, judged=None)[1].startswith("prose without judged queries")
