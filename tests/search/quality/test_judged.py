"""search.quality.judged: the judged queries that check an adapted model never train it, and the rest do."""
from __future__ import annotations

import pytest

from search.models import Chunk, Feedback, QuerySession
from search.quality.fusion_choice import judged_queries
from search.quality.judged import check_size, judged_split
from tests.search.ctx_fixtures import code_repo, ingest  # noqa: F401 - fixtures


@pytest.mark.django_db
def test_the_first_judged_queries_check_and_only_the_queries_beyond_them_train(toy_beir):
    root, dataset = toy_beir
    split = judged_split(dataset_ids=[dataset.pk], beir=str(root), check_max=4)
    assert list(split.check) == [f"what about subject {n}" for n in range(4)]  # query id order, train split only
    assert split.check["what about subject 3"] == {"d3": 1, "d7": 1}
    doc_of = dict(Chunk.objects.filter(dataset=dataset).values_list("id", "path"))
    trained = [(q, doc_of[cid]) for q, cid in split.train]
    assert trained == [(f"what about subject {n}", f"d{n}") for n in range(4, 9)]  # d8 judged 0 for q04: not a pair
    assert not set(split.check) & {q for q, _ in split.train}
    assert split.train_queries == 5 and "train split" in split.source
    assert split.to_key([cid for cid, path in doc_of.items() if path == "d5"]) == ["d5"]
    # the test split never appears, and a check as large as the split leaves nothing to train
    assert not {"what about subject 9", "what about subject 10"} & (set(split.check) | {q for q, _ in split.train})
    assert judged_split(dataset_ids=[dataset.pk], beir=str(root)).train == []


@pytest.mark.django_db
def test_feedback_beyond_the_check_trains_on_the_chunks_it_judged_relevant(make_user, make_project, code_repo,
                                                                           edge_index):
    owner = make_user("owner@example.com")
    project = make_project("shop", owner)
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    chunks = list(Chunk.objects.filter(dataset=ds).order_by("pk"))
    for n, q in enumerate(["a take credits", "b list products", "c grant bonus", "d cart total", "e routes"]):
        session = QuerySession.objects.create(project=project, query=q, kind="context")
        Feedback.objects.create(session=session, chunk=chunks[n], relevance=3 if n != 4 else 0, user=owner)
    split = judged_split(dataset_ids=[ds.pk], project=project, check_max=2)
    assert list(split.check) == ["a take credits", "b list products"]
    assert split.train == [("c grant bonus", chunks[2].pk), ("d cart total", chunks[3].pk)]  # "e" judged 0: none
    other = make_project("other", make_user("x@example.com"))
    assert judged_split(dataset_ids=[ds.pk], project=other).check == {}


@pytest.mark.django_db
def test_feedback_on_rules_questions_judges_the_model_too_but_not_the_context_fusion(make_user, make_project,
                                                                                     code_repo, edge_index):
    owner = make_user("owner@example.com")
    project = make_project("table", owner)
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    chunks = list(Chunk.objects.filter(dataset=ds).order_by("pk"))
    for n, (q, kind) in enumerate([("a asked in context", "context"), ("b asked of the rules", "rules")]):
        session = QuerySession.objects.create(project=project, query=q, kind=kind)
        Feedback.objects.create(session=session, chunk=chunks[n], relevance=2, user=owner)
    split = judged_split(dataset_ids=[ds.pk], project=project, check_max=1)
    assert list(split.check) == ["a asked in context"]
    assert split.train == [("b asked of the rules", chunks[1].pk)]  # the embedding model serves both products
    assert list(judged_queries(project=project)) == ["a asked in context"]  # fusion choice: context queries only


@pytest.mark.parametrize(("judged", "check_max", "check"), [
    (20, 300, 20),    # fewer than decide: all check, none train (the check keeps a worse model out)
    (30, 300, 30),
    (40, 300, 30),    # the 30 that decide check, the other 10 train
    (95, 300, 47),    # half and half (the SRD tenant's 95 judged questions)
    (807, 300, 300),  # a large set: the cap (SciFact's train split, as before)
    (95, 30, 30),     # an explicit cap wins
    (95, 0, 0),       # --judged-max 0: every judged query trains
])
def test_half_of_a_tenants_judged_queries_check_and_at_least_the_thirty_that_decide(judged, check_max, check):
    assert check_size(judged=judged, check_max=check_max) == check


@pytest.mark.django_db
def test_a_tenant_with_forty_judged_questions_trains_on_the_ten_beyond_the_check_by_default(
        make_user, make_project, code_repo, edge_index):
    owner = make_user("owner@example.com")
    project = make_project("forty", owner)
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    chunk = Chunk.objects.filter(dataset=ds).order_by("pk").first()
    for n in range(40):
        session = QuerySession.objects.create(project=project, query=f"question {n:02d}", kind="rules")
        Feedback.objects.create(session=session, chunk=chunk, relevance=2, user=owner)
    split = judged_split(dataset_ids=[ds.pk], project=project)  # no cap given: the admin job's call
    assert list(split.check) == [f"question {n:02d}" for n in range(30)]
    assert split.train == [(f"question {n:02d}", chunk.pk) for n in range(30, 40)]
