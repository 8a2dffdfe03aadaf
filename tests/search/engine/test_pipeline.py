"""search/engine/pipeline.py helpers: which content kinds a query searches decides how its sparse side is analysed."""
from __future__ import annotations

from search.engine.index_schema import IndexFilter
from search.engine.pipeline import build_filter, searched_kinds


def test_searched_kinds_are_the_kinds_of_the_searched_datasets(make_project):
    from search.models import Dataset

    p = make_project("kinds")
    code = Dataset.objects.create(project=p, name="src", kind="code")
    web = Dataset.objects.create(project=p, name="site", kind="web")
    rules = Dataset.objects.create(project=p, name="book", kind="rules")
    assert searched_kinds(IndexFilter(dataset_ids=[code.pk])) == {"code"}
    assert searched_kinds(IndexFilter(dataset_ids=[web.pk, rules.pk])) == {"web", "rules"}
    assert searched_kinds(IndexFilter(dataset_ids=[code.pk, web.pk])) == {"code", "web"}
    assert searched_kinds(IndexFilter(dataset_ids=[])) == frozenset()


def test_a_kind_filter_decides_the_searched_kinds_exactly(make_project):
    from search.models import Dataset

    p = make_project("kinds2")
    code = Dataset.objects.create(project=p, name="src", kind="code")
    web = Dataset.objects.create(project=p, name="site", kind="web")
    flt = build_filter(dataset_ids=[code.pk, web.pk], extra_filter={"kind": ["rules"]})
    assert searched_kinds(flt) == {"rules"}


def test_a_request_past_its_deadline_stops_before_the_next_stage(make_project):
    import pytest

    from config.deadlines import DeadlineExceeded, deadline_after
    from search.engine.pipeline import QuerySpec, execute

    p = make_project("late")
    ran: list[str] = []

    def first(run) -> None:
        ran.append("first")

    def second(run) -> None:
        ran.append("second")

    execute(spec=QuerySpec(q="x"), project=p, stages=(first, second))
    assert ran == ["first", "second"]  # no request around it: no deadline
    ran.clear()
    with deadline_after(0.0), pytest.raises(DeadlineExceeded) as exc:
        execute(spec=QuerySpec(q="x"), project=p, stages=(first, second))
    assert ran == [] and exc.value.status_code == 504 and exc.value.code == "request_timeout"
