"""search.engine.locate: the second look inside the top files, on the small repository of the code tools."""
from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from inference.encoders import dense_model_id, embed_cached
from search.engine.code_graph import Def
from search.engine.locate import DEFAULT_RANKING, Ranking, innermost_overlapping, locate
from search.engine.path_roles import is_aside
from search.engine.pipeline import QuerySpec
from search.models import CommitMemory, QuerySession
from tests.search.code_fixtures import ASIDE, code_world, code_world_with_tests, edge_index  # noqa: F401 - fixtures

TASK = "take credits from a wallet, refuse to go below zero"


def _def(qualname: str, kind: str, start: int, end: int) -> Def:
    return Def(id=start * 1000 + end, dataset_id=1, document_id=1, path="m.py", lang="python",
               name=qualname.rsplit(".", 1)[-1], qualname=qualname, kind=kind, signature="", start_line=start,
               end_line=end)


SHAPES = [_def("Client", "class", 1, 40), _def("Client.send", "method", 5, 20), _def("Client.close", "method", 22, 40),
          _def("Client.send.retry", "function", 10, 14), _def("log", "function", 50, 70),
          _def("log.emit", "function", 55, 58)]


def _names(start: int, end: int) -> list[str]:
    return [d.qualname for d in innermost_overlapping(definitions=SHAPES, start_line=start, end_line=end)]


def test_a_chunk_of_a_function_names_the_function_and_the_helper_defined_inside_it():
    assert _names(50, 70) == ["log", "log.emit"]
    assert _names(5, 20) == ["Client.send", "Client.send.retry"]


def test_without_enclosing_functions_a_chunk_names_only_the_innermost_definitions():
    found = innermost_overlapping(definitions=SHAPES, start_line=50, end_line=70, enclosing=False)
    assert [d.qualname for d in found] == ["log.emit"]


def test_a_chunk_inside_a_nested_helper_names_the_helper_alone():
    assert _names(55, 58) == ["log.emit"]
    assert _names(11, 13) == ["Client.send.retry"]


def test_a_chunk_of_methods_names_the_methods_and_a_class_header_names_the_class():
    assert _names(5, 40) == ["Client.send", "Client.close", "Client.send.retry"]
    assert _names(1, 4) == ["Client"]


def _locate(world: dict, ranking: Ranking, *, candidates: int = 1, **filters: str):
    spec = QuerySpec(q=TASK, top_k=candidates, candidates=candidates, graph=False, kind="locate", filters=filters or None)
    return locate(user=world["alice"], project=world["project"], spec=spec, top_functions=20, ranking=ranking)


def test_the_second_look_lists_the_definitions_of_the_top_files_the_first_pass_never_reached(code_world):
    # four candidates across the tree; looked at alone, the best file fills four with its own chunks
    first_only = _locate(code_world, replace(DEFAULT_RANKING, history=False, focus_files=0), candidates=4)
    logged = QuerySession.objects.count()
    looked = _locate(code_world, replace(DEFAULT_RANKING, history=False, focus_files=1), candidates=4)
    assert QuerySession.objects.count() == logged + 1  # the second look is part of the one logged query
    top = looked.files[0]["path"]
    assert [f["path"] for f in looked.files] == [f["path"] for f in first_only.files]  # files are the first pass's
    assert len(first_only.files) >= 2
    assert {f["span"] for f in first_only.functions} < {f["span"] for f in looked.functions}
    extra = [f for f in looked.functions if f["span"] not in {g["span"] for g in first_only.functions}]
    assert {f["path"] for f in extra} == {top}
    # their evidence is the look's own chunks, numbered on after the first pass's candidates
    assert extra and all(c["rank"] > looked.candidates for f in extra for c in f["chunks"])
    assert [f["rank"] for f in looked.functions] == list(range(1, len(looked.functions) + 1))


def test_the_second_look_keeps_the_requests_filters(code_world):
    looked = _locate(code_world, replace(DEFAULT_RANKING, history=False), candidates=5, lang="javascript")
    assert looked.functions and {f["path"] for f in looked.functions} == {"web/routes.js"}


def test_the_weight_of_the_second_look_orders_the_same_definitions(code_world):
    light = _locate(code_world, replace(DEFAULT_RANKING, history=False, focus_files=1, focus_weight=0.01),
                    candidates=4)
    heavy = _locate(code_world, replace(DEFAULT_RANKING, history=False, focus_files=1, focus_weight=100.0),
                    candidates=4)
    assert {f["span"] for f in light.functions} == {f["span"] for f in heavy.functions}
    assert [f["span"] for f in light.functions] != [f["span"] for f in heavy.functions]
    best = light.files[0]["path"]  # heavy: the best file's definitions (the look's) before the other file's
    assert [f["path"] for f in heavy.functions[:2]] == [best, best]


def test_source_files_and_their_definitions_come_before_tests_and_docs(code_world_with_tests):
    in_place = _locate(code_world_with_tests, replace(DEFAULT_RANKING, history=False, sources_first=False), candidates=20)
    paths = [f["path"] for f in in_place.files]
    # the test and the changelog outrank some code when they keep their place (else this checks nothing)
    assert set(ASIDE) <= set(paths) and paths.index("tests/test_wallet.py") < paths.index("shop/jobs.py")
    ordered = _locate(code_world_with_tests, DEFAULT_RANKING, candidates=20)
    files = [f["path"] for f in ordered.files]
    assert sorted(files) == sorted(paths)  # the same files, none dropped: tests and docs follow the code
    assert [is_aside(p) for p in files] == sorted(is_aside(p) for p in files)
    assert [p for p in files if not is_aside(p)] == [p for p in paths if not is_aside(p)]  # each part keeps its order
    assert [f["rank"] for f in ordered.files] == list(range(1, len(files) + 1))
    kinds = [is_aside(f["path"]) for f in ordered.functions]
    assert any(is_aside(f["path"]) for f in in_place.functions) and any(kinds) and kinds == sorted(kinds)


def test_a_definition_the_task_names_is_listed_though_no_chunk_reached_it(code_world):
    named_task = replace(DEFAULT_RANKING, history=False, names=True)
    spec = QuerySpec(q=f"{TASK}, then let `nightly` skip empty wallets", top_k=1, candidates=1, graph=False,
                     kind="locate")
    found = locate(user=code_world["alice"], project=code_world["project"], spec=spec, top_functions=20,
                   ranking=named_task)
    unnamed = locate(user=code_world["alice"], project=code_world["project"], spec=spec, top_functions=20,
                     ranking=replace(named_task, names=False))
    assert "nightly" not in [f["symbol"] for f in unnamed.functions]  # the words alone do not reach it
    nightly = next(f for f in found.functions if f["symbol"] == "nightly")
    assert nightly["named_as"] == "nightly" and nightly["chunks"] == [] and nightly["path"] == "shop/jobs.py"
    assert {f["named_as"] for f in found.functions if f["symbol"] != "nightly"} == {None}


def test_the_weight_of_a_named_definition_decides_how_far_it_rises(code_world):
    task = f"{TASK}, then let `nightly` skip empty wallets"
    spec = QuerySpec(q=task, top_k=5, candidates=5, graph=False, kind="locate")

    def ranked(weight: float) -> list[str]:
        res = locate(user=code_world["alice"], project=code_world["project"], spec=spec, top_functions=20,
                     ranking=replace(DEFAULT_RANKING, history=False, name_weight=weight))
        return [f["symbol"] for f in res.functions]

    light, heavy = ranked(0.001), ranked(100.0)
    assert heavy[0] == "nightly" and light[0] != "nightly" and "nightly" in light


def _remember_service_change(world: dict) -> None:
    """A past commit whose message is the task itself, which changed shop/service.py (the vote's first file)."""
    CommitMemory.objects.create(dataset=world["dataset"], sha="f" * 40, subject=TASK, query=TASK,
                                files=["shop/service.py"], functions=[], model_id=dense_model_id(),
                                embedding=embed_cached([TASK])[0].tolist(), committed_at=datetime.now(tz=UTC))


def test_a_definition_takes_its_files_vote_only_where_the_ranking_says_so(code_world):
    _remember_service_change(code_world)
    base = replace(DEFAULT_RANKING, focus_files=0, names=False, vote_weight=100.0)
    files_only = _locate(code_world, replace(base, vote_definitions=False), candidates=10)
    with_defs = _locate(code_world, replace(base, vote_definitions=True), candidates=10)
    assert files_only.files[0]["path"] == with_defs.files[0]["path"] == "shop/service.py"  # the vote ranks files
    voted = [f["symbol"] for f in with_defs.functions if f["path"] == "shop/service.py"]
    assert voted and [f["symbol"] for f in with_defs.functions[:len(voted)]] == voted
    assert files_only.functions[0]["path"] != "shop/service.py"  # the chunks alone put another file's first


def test_the_file_of_a_named_definition_is_listed_only_where_the_ranking_says_so(code_world):
    spec = QuerySpec(q=f"{TASK}, then let `nightly` skip empty wallets", top_k=1, candidates=1, graph=False,
                     kind="locate")

    def files(**variant: object) -> list[dict]:
        return locate(user=code_world["alice"], project=code_world["project"], spec=spec,
                      ranking=replace(DEFAULT_RANKING, history=False, **variant)).files

    assert "shop/jobs.py" not in [f["path"] for f in files(name_files=False)]
    lifted = files(name_files=True, name_weight=100.0)
    assert lifted[0]["path"] == "shop/jobs.py" and lifted[0]["chunks"] == [] and lifted[0]["repo"] == "app"


def test_the_second_look_goes_into_the_best_files_by_their_chunks_not_by_the_vote(code_world):
    _remember_service_change(code_world)
    base = replace(DEFAULT_RANKING, names=False, focus_files=1, vote_weight=100.0)
    first = _locate(code_world, replace(base, focus_files=0), candidates=4)
    by_chunks = _locate(code_world, base, candidates=4)
    by_vote = _locate(code_world, replace(base, focus_by_vote=True), candidates=4)
    assert by_chunks.files[0]["path"] == by_vote.files[0]["path"] == "shop/service.py"  # the vote lists it first

    def looked_into(res) -> set[str]:  # the files of the definitions only the second look found
        return {f["path"] for f in res.functions if f["span"] not in {g["span"] for g in first.functions}}

    assert looked_into(by_chunks) and "shop/service.py" not in looked_into(by_chunks)
    assert looked_into(by_vote) <= {"shop/service.py"}
