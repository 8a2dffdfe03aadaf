"""BM25 statistics that belong to the searched datasets: kept by triggers, read by the query.

A tenant's sparse and fused scores must not move when another tenant, or an evaluation, ingests content of the
same kind into the same store. The counterfactual is checked too: the other tenant's corpus does change the
statistics of the union, which is what a collection-wide IDF would have used.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from search.engine.index_schema import IndexFilter
from search.engine.sparse import term_index, tokenize
from search.engine.term_stats import CHUNK_COUNT_TERM, idf_weights, project_chunk_count
from search.models import Chunk
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401

pytestmark = pytest.mark.django_db
TINY = Path(__file__).parents[1] / "fixtures" / "tiny_beir"


def dataset_term_counts(*, dataset_ids: list[int]) -> dict[int, dict[str, int]]:
    """dataset id -> {"chunks": N, "terms": distinct terms}, read from search_termstat."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT dataset_id, max(df) FILTER (WHERE term = %s), count(*) FILTER (WHERE term <> %s) "
                    "FROM search_termstat WHERE dataset_id = ANY(%s) GROUP BY dataset_id",
                    [CHUNK_COUNT_TERM, CHUNK_COUNT_TERM, dataset_ids])
        return {int(d): {"chunks": int(n or 0), "terms": int(t)} for d, n, t in cur.fetchall()}


def _term(word: str) -> int:
    return term_index(tokenize(word, code=True)[0])


def _chunks_with(dataset, term: int) -> int:
    return sum(term in terms for terms in Chunk.objects.filter(dataset=dataset).values_list("terms", flat=True))


def test_triggers_count_each_datasets_chunks_and_terms_through_writes_and_deletes(make_project, code_repo):
    from search.ingest.writer import delete_documents

    ds, _ = ingest(make_project("shop"), "src", code_repo, repo="shop", apply_index=False)
    credit = _term("credits")
    n = Chunk.objects.filter(dataset=ds).count()
    assert dataset_term_counts(dataset_ids=[ds.pk])[ds.pk]["chunks"] == n > 0
    df = _chunks_with(ds, credit)
    assert df > 0
    assert idf_weights(terms=[credit], dataset_ids=[ds.pk]) == {
        credit: pytest.approx(math.log(1 + (n - df + 0.5) / (df + 0.5)))}

    delete_documents(dataset=ds, paths=["billing/ledger.py"])  # every chunk that says "credits"
    left = Chunk.objects.filter(dataset=ds).count()
    assert dataset_term_counts(dataset_ids=[ds.pk])[ds.pk]["chunks"] == left < n
    assert _chunks_with(ds, credit) == 0 and idf_weights(terms=[credit], dataset_ids=[ds.pk]) == {}

    Chunk.objects.filter(dataset=ds).update(terms=[credit])  # an in-place change moves the counts too
    assert idf_weights(terms=[credit], dataset_ids=[ds.pk]) == {
        credit: pytest.approx(math.log(1 + 0.5 / (left + 0.5)))}

    dataset_id = ds.pk
    ds.delete()  # the FK cascade removes the chunks; their statistics go with them
    assert dataset_term_counts(dataset_ids=[dataset_id]) == {}


def test_a_projects_chunk_count_is_its_datasets_chunk_rows_through_writes_and_deletes(make_project, code_repo):
    """What the quota checks read twice per batch of an ingest: summed from the statistics, equal to counting rows."""
    from search.ingest.writer import delete_documents

    shop, other = make_project("shop"), make_project("other")
    src, _ = ingest(shop, "src", code_repo, repo="shop", apply_index=False)
    more, _ = ingest(shop, "more", code_repo, repo="shop", apply_index=False)
    ingest(other, "src", code_repo, repo="other", apply_index=False)

    def rows() -> int:
        return Chunk.objects.filter(dataset__project=shop).count()

    assert project_chunk_count(project_id=shop.pk) == rows() == 2 * Chunk.objects.filter(dataset=src).count() > 0
    delete_documents(dataset=more, paths=["billing/ledger.py"])
    assert project_chunk_count(project_id=shop.pk) == rows() < 2 * Chunk.objects.filter(dataset=src).count()
    src.delete()
    assert project_chunk_count(project_id=shop.pk) == rows() == Chunk.objects.filter(dataset=more).count()
    assert project_chunk_count(project_id=make_project("empty").pk) == 0


def _scores(project, ds, q: str) -> dict[str, list[tuple[int, float]]]:
    from search.engine.fusion_settings import DEFAULT
    from search.engine.pipeline import QuerySpec, execute, retrieval_over

    stages = retrieval_over(IndexFilter(dataset_ids=[ds.pk]), setting=DEFAULT)
    out = {}
    for legs in ("sparse", "hybrid"):
        cands = execute(spec=QuerySpec(q=q, log=False, candidates=20, legs=legs), project=project,
                        stages=stages).cands
        out[legs] = [(c.chunk_id, round(c.sparse_score or 0.0, 6), round(c.fused_score, 9)) for c in cands]
    return out


def test_a_tenants_scores_do_not_move_when_another_tenant_or_an_evaluation_ingests(
        make_project, code_repo, edge_index, tmp_path):
    from search.quality.runs import ingest_beir

    shop = make_project("shop")
    ds, _ = ingest(shop, "src", code_repo, repo="shop")
    queries = ["take credits from a wallet", "deduct_credits", "list products route"]
    before = {q: _scores(shop, ds, q) for q in queries}
    assert all(before[q]["sparse"] for q in queries)

    other = tmp_path / "other"
    other.mkdir()
    (other / "bank.py").write_text("".join(
        f"def credits_{i}(wallet):\n    \"\"\"Credits and wallet and credits again.\"\"\"\n    return wallet.credits\n\n"
        for i in range(40)))
    theirs, _ = ingest(make_project("bank"), "bank-src", other, repo="bank")
    ingest_beir(path=TINY, project_slug="eval", progress=False)

    credit = _term("credits")
    assert idf_weights(terms=[credit], dataset_ids=[ds.pk, theirs.pk]) != idf_weights(terms=[credit],
                                                                                       dataset_ids=[ds.pk])
    after = {q: _scores(shop, ds, q) for q in queries}
    assert after == before


def _recount() -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], int]]:
    """(the statistics recomputed from the chunk rows, the statistics the triggers kept): equal when exact."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT dataset_id, term, count(*) FROM (SELECT dataset_id, unnest(terms) AS term "
                    "FROM search_chunk UNION ALL SELECT dataset_id, -1 FROM search_chunk) x GROUP BY 1, 2")
        want = {(d, t): n for d, t, n in cur.fetchall()}
        cur.execute("SELECT dataset_id, term, df FROM search_termstat")
        got = {(d, t): n for d, t, n in cur.fetchall()}
    return want, got


@pytest.mark.django_db(transaction=True)
def test_a_truncate_of_the_chunks_empties_the_statistics_too(make_project, code_repo):
    """TRUNCATE fires no row trigger (a test database's flush between transactional tests uses it); the
    statistics of the truncated chunks must not stay behind."""
    from django.db import connection

    ingest(make_project("shop"), "src", code_repo, repo="shop", apply_index=False)
    want, got = _recount()
    assert got == want and got
    with connection.cursor() as cur:
        cur.execute("TRUNCATE search_chunk CASCADE")
    assert _recount() == ({}, {})


@pytest.mark.django_db(transaction=True)
def test_concurrent_writers_of_one_dataset_neither_deadlock_nor_miscount(make_project):
    """Three threads rewrite files of one dataset over and over (two of them the same files), each write deleting
    and inserting chunks with the same words. Without the per-dataset lock the term rows' locks are taken in
    different orders and Postgres aborts one writer as a deadlock, and two writers of one path both insert its
    ordinal 0."""
    import threading

    from django.db import connection

    from search.ingest.base import ChunkDraft, DocumentDraft
    from search.ingest.writer import write_documents
    from search.models import Dataset

    texts = ["def deduct_credits(wallet, amount):\n    return wallet.balance - amount",
             "def grant_bonus(wallet, amount):\n    wallet.balance += amount",
             "class Ledger:\n    rows = []  # credits and wallet moves",
             "def list_products(req, res):\n    return res.json(products)"]
    ds = Dataset.objects.create(project=make_project("shop"), name="src", kind="code")

    def drafts(owner: int, seed: int) -> list[DocumentDraft]:
        return [DocumentDraft(path=f"t{owner}/{name}", content_hash=f"{owner}{name}{seed}",
                              chunks=[ChunkDraft(text=texts[(i + seed) % 4], start_line=1, end_line=2)])
                for i, name in enumerate(("a.py", "b.py", "c.py"))]

    write_documents(dataset=ds, drafts=drafts(8, 0) + drafts(9, 1))  # every text embedded once, up front
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def writer(owner: int) -> None:
        try:
            barrier.wait()
            for seed in range(10):
                write_documents(dataset=ds, drafts=drafts(owner, seed))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(k % 2,)) for k in range(3)]  # two of them share files
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    want, got = _recount()
    assert got == want and got[(ds.pk, -1)] == 6 + 6
