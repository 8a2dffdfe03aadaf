"""search.engine.changed_together: the definitions past commits changed together with the best ones."""
from __future__ import annotations

from datetime import UTC, datetime

import pytest

from inference.encoders import dense_model_id
from search.engine.changed_together import changed_together
from search.engine.code_graph import DEF_FIELDS, Def
from search.engine.index_schema import IndexFilter
from search.models import CommitMemory, Symbol
from tests.search.code_fixtures import code_world, edge_index  # noqa: F401 - fixtures

PAY = ("shop/service.py", "Checkout.pay")
NOTIFY = ("shop/service.py", "Checkout.notify")
DEDUCT = ("billing/ledger.py", "deduct_credits")
NIGHTLY = ("shop/jobs.py", "nightly")
EMPTY = ("billing/ledger.py", "Wallet.empty")


def _remember(dataset, n: int, *functions: tuple[str, str], model_id: str | None = None) -> None:
    CommitMemory.objects.create(
        dataset=dataset, sha=f"c{n}".ljust(40, "0"), subject=f"commit {n}", query=f"commit {n}",
        files=sorted({p for p, _ in functions}), functions=[list(f) for f in functions],
        model_id=model_id or dense_model_id(), embedding=[0.0] * 383 + [1.0],
        committed_at=datetime(2026, 1, 1 + n, tzinfo=UTC))


def _def(dataset, path: str, qualname: str) -> Def:
    return Def(*Symbol.objects.filter(dataset=dataset, path=path, qualname=qualname).values_list(*DEF_FIELDS)[0])


def _together(world: dict, *seeds: tuple[str, str], **flt: object) -> list[tuple[str, str]]:
    dataset = world["dataset"]
    found = changed_together(flt=IndexFilter(dataset_ids=[dataset.pk], **flt),
                             seeds=[_def(dataset, p, q) for p, q in seeds])
    return [(d.path, d.qualname) for d, _ in found]


@pytest.fixture
def history(code_world):
    ds = code_world["dataset"]
    _remember(ds, 1, PAY, DEDUCT)                   # a pair: a strong link
    _remember(ds, 2, PAY, DEDUCT)
    _remember(ds, 3, PAY, NIGHTLY, EMPTY, NOTIFY)  # a sweep: each pair says less
    _remember(ds, 4, NOTIFY, ("shop/gone.py", "removed_since"))  # no longer in the tree
    _remember(ds, 5, NIGHTLY, EMPTY)               # no seed in it: lends nothing
    return code_world


def test_a_pair_changed_together_twice_outranks_a_sweep_and_the_seed_is_not_returned(history):
    found = _together(history, PAY)
    assert found[0] == DEDUCT
    assert set(found) == {DEDUCT, NIGHTLY, EMPTY, NOTIFY}


def test_scores_add_over_commits_and_earlier_seeds_count_more(history):
    dataset = history["dataset"]
    flt = IndexFilter(dataset_ids=[dataset.pk])
    scores = {(d.path, d.qualname): s for d, s in changed_together(
        flt=flt, seeds=[_def(dataset, *PAY), _def(dataset, *NOTIFY)])}
    assert scores[DEDUCT] == pytest.approx(2.0)           # two pairs, seed rank 1
    assert scores[NIGHTLY] == pytest.approx((1 + 1 / 2) / 3)  # the sweep holds both seeds: 3 others share it
    assert NOTIFY not in scores and PAY not in scores


def test_definitions_no_longer_in_the_tree_are_dropped(history):
    assert ("shop/gone.py", "removed_since") not in _together(history, NOTIFY)


def test_the_request_filter_holds(history):
    assert _together(history, PAY, path_prefix="shop/") == [NIGHTLY, NOTIFY]
    assert _together(history, PAY, lang=["javascript"]) == []


def test_rows_another_model_remembered_and_other_datasets_lend_nothing(code_world):
    ds = code_world["dataset"]
    _remember(ds, 1, PAY, DEDUCT, model_id="another-model")
    assert _together(code_world, PAY) == []
    assert changed_together(flt=IndexFilter(dataset_ids=[ds.pk + 999]), seeds=[_def(ds, *PAY)]) == []
