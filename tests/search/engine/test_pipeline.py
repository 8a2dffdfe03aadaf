"""search/engine/pipeline.py helpers: which content kinds a query searches decides how its sparse side is analysed."""
from __future__ import annotations

from search.engine.index import IndexFilter
from search.engine.pipeline import build_filter, searched_kinds


def test_searched_kinds_are_the_kinds_of_the_searched_datasets(make_project):
    from projects.models import Dataset

    p = make_project("kinds")
    code = Dataset.objects.create(project=p, name="src", kind="code")
    web = Dataset.objects.create(project=p, name="site", kind="web")
    rules = Dataset.objects.create(project=p, name="book", kind="rules")
    assert searched_kinds(IndexFilter(dataset_ids=[code.pk])) == {"code"}
    assert searched_kinds(IndexFilter(dataset_ids=[web.pk, rules.pk])) == {"web", "rules"}
    assert searched_kinds(IndexFilter(dataset_ids=[code.pk, web.pk])) == {"code", "web"}
    assert searched_kinds(IndexFilter(dataset_ids=[])) == frozenset()


def test_a_kind_filter_decides_the_searched_kinds_exactly(make_project):
    from projects.models import Dataset

    p = make_project("kinds2")
    code = Dataset.objects.create(project=p, name="src", kind="code")
    web = Dataset.objects.create(project=p, name="site", kind="web")
    flt = build_filter(dataset_ids=[code.pk, web.pk], extra_filter={"kind": ["rules"]})
    assert searched_kinds(flt) == {"rules"}
