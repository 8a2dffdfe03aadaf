"""search.engine.history_vote: the past commits most like a task, their vote for the files they changed, and the
reciprocal-rank merge with the chunks' ranking."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inference.encoders import dense_model_id, embed_cached
from search.engine.history_vote import (
    PastCommit,
    evidence,
    file_votes,
    merge,
    similar_commits,
    voted_documents,
)
from search.engine.index_schema import IndexFilter
from search.models import CommitMemory, Dataset, Document


def _commit(dataset_id: int, sha: str, similarity: float, *files: str) -> PastCommit:
    return PastCommit(dataset_id=dataset_id, sha=sha, subject=f"subject {sha}", similarity=similarity,
                      files=tuple(files))


def test_a_file_gets_the_summed_similarity_of_the_commits_that_changed_it_and_no_negative_share():
    votes = file_votes([_commit(1, "a", 0.8, "x.py", "y.py"), _commit(1, "b", 0.5, "x.py"),
                        _commit(2, "c", 0.7, "x.py"), _commit(1, "d", -0.2, "z.py")])
    assert votes == {(1, "x.py"): pytest.approx(1.3), (1, "y.py"): pytest.approx(0.8), (2, "x.py"): 0.7,
                     (1, "z.py"): 0.0}


def test_without_votes_the_order_is_unchanged():
    assert [item for item, _ in merge(ranked=["a", "b", "c"], file_of=str, votes={})] == ["a", "b", "c"]
    assert [item for item, _ in merge(ranked=["a", "b", "c"], file_of=str, votes={"c": 1.0}, weight=0.0)] == \
        ["a", "b", "c"]


def test_the_files_the_vote_ranks_first_rise_and_ties_keep_the_chunk_order():
    ranked = ["a.py", "b.py", "c.py", "d.py"]
    merged = merge(ranked=ranked, file_of=str, votes={"d.py": 2.0, "c.py": 1.0}, rank_k=10, weight=1.0)
    assert [item for item, _ in merged] == ["d.py", "c.py", "a.py", "b.py"]
    assert merged[0][1] == pytest.approx(1 / 14 + 1 / 11)
    assert merged[2][1] == pytest.approx(1 / 11)


def test_a_small_weight_lifts_a_voted_file_past_its_neighbours_only():
    ranked = [f"{i}.py" for i in range(10)]
    merged = [item for item, _ in merge(ranked=ranked, file_of=str, votes={"5.py": 1.0}, rank_k=60, weight=0.05)]
    assert merged.index("5.py") < 5 and merged[0] == "0.py"


def test_evidence_lists_the_most_similar_commits_that_changed_the_file_at_most_three():
    past = [_commit(1, s, 1 - i / 10, "x.py") for i, s in enumerate("abcde")] + [_commit(2, "f", 0.99, "x.py")]
    assert [e["sha"] for e in evidence(past, dataset_id=1, path="x.py")] == ["a", "b", "c"]
    assert evidence(past, dataset_id=1, path="y.py") == []


def test_a_definitions_evidence_is_the_most_similar_commits_that_changed_it():
    past = [PastCommit(dataset_id=1, sha="a", subject="a", similarity=0.8, files=("x.py",),
                       functions=(("x.py", "Wallet.deduct"), ("x.py", "grant"))),
            PastCommit(dataset_id=1, sha="b", subject="b", similarity=0.5, files=("x.py",),
                       functions=(("x.py", "Wallet.deduct"),)),
            PastCommit(dataset_id=2, sha="c", subject="c", similarity=-0.1, files=("x.py",),
                       functions=(("x.py", "Wallet.deduct"),))]
    assert [e["sha"] for e in evidence(past, dataset_id=1, path="x.py", qualname="Wallet.deduct")] == ["a", "b"]
    assert [e["sha"] for e in evidence(past, dataset_id=1, path="x.py", qualname="grant")] == ["a"]
    assert evidence(past, dataset_id=1, path="x.py", qualname="Wallet") == []


@pytest.fixture
def remembered(db, make_project):
    """Two datasets' memories: one message each about refunds, slugs and logging, embedded by the real model."""
    project = make_project("vote")
    mine = Dataset.objects.create(project=project, name="mine", kind="code")
    other = Dataset.objects.create(project=project, name="other", kind="code")
    messages = {"refund": "Refund the payment when an order is cancelled",
                "slug": "Strip punctuation from slugs before joining the words",
                "log": "Log the request id with every error"}
    vectors = dict(zip(messages, embed_cached(list(messages.values())), strict=True))
    for dataset in (mine, other):
        for i, (key, text) in enumerate(messages.items()):
            CommitMemory.objects.create(dataset=dataset, sha=f"{dataset.name}-{key}".ljust(40, "0"), subject=text,
                                        query=text, files=[f"{key}.py"], model_id=dense_model_id(),
                                        embedding=vectors[key].tolist(),
                                        committed_at=datetime(2026, 1, 1 + i, tzinfo=UTC))
    return {"mine": mine, "other": other}


def test_the_nearest_messages_come_first_and_only_from_the_datasets_asked(remembered):
    mine = remembered["mine"]
    found = similar_commits(dataset_ids=[mine.pk], task="cancelled orders must be refunded", voters=2)
    assert [c.files for c in found] == [("refund.py",), found[1].files] and len(found) == 2
    assert {c.dataset_id for c in found} == {mine.pk}
    assert found[0].similarity > found[1].similarity and found[0].subject.startswith("Refund")
    both = similar_commits(dataset_ids=[mine.pk, remembered["other"].pk], task="refund a cancelled order",
                           voters=2)
    assert {c.dataset_id for c in both} == {mine.pk, remembered["other"].pk}
    assert similar_commits(dataset_ids=[], task="refund") == []


def test_rows_another_model_embedded_never_vote(remembered):
    CommitMemory.objects.filter(dataset=remembered["mine"]).update(model_id="another-model")
    assert similar_commits(dataset_ids=[remembered["mine"].pk], task="refund a cancelled order") == []


def test_voted_files_outside_the_candidates_are_those_the_searched_datasets_hold_and_the_filter_admits(
        db, make_project):
    project = make_project("outside")
    mine = Dataset.objects.create(project=project, name="mine", kind="code")
    other = Dataset.objects.create(project=project, name="other", kind="code")
    for ds, path, repo, lang in [(mine, "src/a.py", "app", "python"), (mine, "src/b.js", "app", "javascript"),
                                 (mine, "docs/c.py", "app", "python"), (mine, "src/d.py", "lib", "python"),
                                 (other, "src/a.py", "app", "python")]:
        Document.objects.create(dataset=ds, path=path, repo=repo, lang=lang, content_hash=path)
    votes = {(mine.pk, p): v for p, v in [("src/a.py", 0.5), ("src/b.js", 0.9), ("docs/c.py", 0.7),
                                          ("src/d.py", 0.6), ("src/gone.py", 2.0)]} | {(other.pk, "src/a.py"): 3.0}

    def paths(**narrow) -> list[str]:
        flt = IndexFilter(dataset_ids=[mine.pk], **narrow)
        return [f["path"] for f in voted_documents(votes=votes, flt=flt, exclude={(mine.pk, "src/d.py")})]

    assert paths() == ["src/b.js", "docs/c.py", "src/a.py"]  # most voted first; gone, excluded, other's: out
    assert paths(lang=["python"]) == ["docs/c.py", "src/a.py"]
    assert paths(path_prefix="src/") == ["src/b.js", "src/a.py"]
    assert paths(paths=["src/a.py"]) == ["src/a.py"]
    assert paths(repo=["lib"]) == []
    assert paths(kind=["web", "rules"]) == [] and paths(book_id=["srd"]) == []  # a filter that passes no code
    assert paths(kind=["code"]) == ["src/b.js", "docs/c.py", "src/a.py"]
    found = voted_documents(votes=votes, flt=IndexFilter(dataset_ids=[mine.pk]), exclude=set())[0]
    assert found["document_id"] == Document.objects.get(dataset=mine, path="src/b.js").pk
