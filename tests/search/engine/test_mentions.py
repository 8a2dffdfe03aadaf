"""search.engine.mentions: the code-like names a task says, and the definitions of the searched datasets they name."""
from __future__ import annotations

import pytest

from search.engine import mentions
from search.engine.index_schema import IndexFilter
from search.engine.mentions import Mention, mentioned_names, named_definitions
from tests.search.code_fixtures import code_world, edge_index  # noqa: F401 - fixtures


def _said(task: str) -> list[str]:
    return [m.said for m in mentioned_names(task)]


def test_code_like_words_are_names_and_plain_words_are_not():
    task = ("Fix `Choice` so convert_type() and Plot.layout agree; add NoSuchCommand, e.g. for typos, "
            "as https://example.org/some_page.html says, and call build() once")
    assert _said(task) == ["Choice", "convert_type", "Plot.layout", "NoSuchCommand", "build"]


def test_file_names_urls_and_keywords_name_no_definition():
    assert _said("Move helpers from _utils.py to _models.py (see docs/api_guide.rst)") == []
    assert _said("Reported by dev_team@example.org at https://bugs.example.org/issue_12") == []
    assert _said("Use `default=True` and `None` as sentinels") == ["default"]


def test_a_name_said_twice_counts_once_in_first_said_order():
    assert _said("`deduct_credits` calls refund_credits; deduct_credits must not") == ["deduct_credits",
                                                                                       "refund_credits"]


def test_a_task_says_at_most_max_names(monkeypatch):
    monkeypatch.setattr(mentions, "MAX_NAMES", 2)
    assert _said("one_a two_b three_c") == ["one_a", "two_b"]


def _named(world: dict, said: list[Mention], **flt: object) -> list[tuple[str, str, int]]:
    f = IndexFilter(dataset_ids=[world["dataset"].pk], **flt)
    return [(d.path, d.qualname, order) for d, order in named_definitions(flt=f, mentions=said)]


def test_a_bare_name_finds_every_definition_of_it_and_a_qualifier_narrows_it(code_world):
    both = _named(code_world, [Mention("notify")])
    assert sorted(both) == [("shop/jobs.py", "notify", 1), ("shop/service.py", "Checkout.notify", 1)]
    assert _named(code_world, [Mention("notify", "Checkout")]) == [("shop/service.py", "Checkout.notify", 1)]
    assert _named(code_world, [Mention("notify", "shop.jobs")]) == [("shop/jobs.py", "notify", 1)]
    # a qualifier nothing matches keeps the bare name's definitions
    assert sorted(_named(code_world, [Mention("notify", "Basket")])) == sorted(both)


def test_definitions_carry_the_order_of_their_mention(code_world):
    found = _named(code_world, [Mention("nightly"), Mention("no_such_name"), Mention("deduct_credits")])
    assert found == [("shop/jobs.py", "nightly", 1), ("billing/ledger.py", "deduct_credits", 3)]


def test_a_name_defined_in_too_many_places_names_none_of_them(code_world, monkeypatch):
    monkeypatch.setattr(mentions, "MAX_DEFINITIONS", 1)
    assert _named(code_world, [Mention("notify"), Mention("nightly")]) == [("shop/jobs.py", "nightly", 2)]


@pytest.mark.parametrize(("flt", "expected"), [
    ({"lang": ["javascript"]}, []),
    ({"path_prefix": "shop/"}, [("shop/jobs.py", "nightly", 1)]),
    ({"paths": ["billing/ledger.py"]}, [("billing/ledger.py", "deduct_credits", 2)]),
    ({"repo": ["elsewhere"]}, []),
    ({"kind": ["web", "rules"]}, []),
    ({"kind": ["code"]}, [("shop/jobs.py", "nightly", 1), ("billing/ledger.py", "deduct_credits", 2)]),
    ({"book_id": ["srd"]}, []),
])
def test_the_request_filter_holds_for_named_definitions(code_world, flt, expected):
    assert _named(code_world, [Mention("nightly"), Mention("deduct_credits")], **flt) == expected


def test_other_datasets_definitions_are_not_named(code_world):
    assert named_definitions(flt=IndexFilter(dataset_ids=[code_world["dataset"].pk + 999]),
                             mentions=[Mention("nightly")]) == []
