"""Context packs from the code graph (search.engine.graph_context): the definitions a result calls or inherits from,
a method's class header, each once, never a guess, never what the pack already shows. Real Postgres and index;
ingest through the real writer."""
from __future__ import annotations

import pytest

from tests.search.code_fixtures import FILES, code_world, edge_index, line_of, write_code_repo  # noqa: F401
from tests.search.ctx_fixtures import ingest


def _top(dataset, *where: tuple[str, str]):
    """Candidates for the chunks holding each (path, text) in order, with their rows loaded, as the pack sees them."""
    from search.engine.fusion import Candidate
    from search.models import Chunk

    out = []
    for path, needle in where:
        line = line_of(path, needle)
        chunk = Chunk.objects.get(dataset=dataset, path=path, start_line__lte=line, end_line__gte=line)
        out.append(Candidate(chunk_id=chunk.pk, chunk=chunk))
    return out


def _spans(additions):
    return {f"{a.path}:{a.start_line}-{a.end_line}": a for a in additions}


def test_a_result_brings_the_definition_it_calls_through_an_alias_marked_with_the_result(code_world):
    from search.engine.graph_context import graph_additions

    adds = graph_additions(_top(code_world["dataset"], ("shop/service.py", "take(wallet")))
    start = line_of("billing/ledger.py", "def deduct_credits")
    span = f"billing/ledger.py:{start}-{start + 5}"
    assert span in _spans(adds)
    why = _spans(adds)[span].why
    assert why["added_by"] == "graph" and why["from_rank"] == 1 and why["relation"] == "calls"
    assert why["symbol"] == "deduct_credits" and why["use"].startswith("shop/service.py:")
    assert _spans(adds)[span].text.startswith("def deduct_credits(wallet, amount):")
    assert [a.path for a in adds].count("billing/ledger.py") == len({a.why["symbol"] for a in adds
                                                                     if a.path == "billing/ledger.py"})


def test_a_base_class_comes_as_its_header_not_its_whole_body(code_world):
    from search.engine.graph_context import graph_additions

    adds = graph_additions(_top(code_world["dataset"], ("shop/service.py", "class Checkout")))
    wallet = [a for a in adds if a.why["symbol"] == "Wallet"]
    assert len(wallet) == 1 and wallet[0].why["relation"] == "inherits"
    assert wallet[0].start_line == line_of("billing/ledger.py", "class Wallet")
    assert wallet[0].end_line == line_of("billing/ledger.py", "def __init__") - 1  # up to its first member
    assert "self.balance = 0" not in wallet[0].text


def test_what_a_better_result_shows_is_not_added_but_a_lower_one_comes_forward(code_world):
    from search.engine.graph_context import graph_additions

    ds = code_world["dataset"]
    above = graph_additions(_top(ds, ("billing/ledger.py", "def deduct_credits"), ("shop/service.py", "take(wallet")))
    assert all(a.why["symbol"] != "deduct_credits" for a in above)
    below = graph_additions(_top(ds, ("shop/service.py", "take(wallet"), ("billing/ledger.py", "def deduct_credits")))
    [deduct] = [a for a in below if a.why["symbol"] == "deduct_credits"]
    assert deduct.from_rank == 1 and deduct.chunk_ids == [_top(ds, ("billing/ledger.py", "def deduct_credits"))[0]
                                                          .chunk_id]


def test_an_ambiguous_or_external_name_is_not_guessed(db, edge_index, tmp_path, make_user, make_project):
    from search.engine.graph_context import graph_additions

    files = {**FILES, "shop/extra.py": "import os\n\n\ndef run(box):\n    box.notify(1)\n    return os.getcwd()\n"}
    project = make_project("shop2", make_user("carol@example.com"))
    dataset, _ = ingest(project, "app", write_code_repo(tmp_path / "app", files), repo="app")
    from search.engine.fusion import Candidate
    from search.models import Chunk

    chunk = Chunk.objects.get(dataset=dataset, path="shop/extra.py", start_line__lte=5, end_line__gte=5)
    adds = graph_additions([Candidate(chunk_id=chunk.pk, chunk=chunk)])
    assert adds == []  # `notify` has two definitions; `os.getcwd` is outside the dataset


def test_a_method_result_brings_its_class_header(code_world):
    from search.engine.graph_context import graph_additions
    from search.models import Symbol

    top = _top(code_world["dataset"], ("billing/ledger.py", "return self.balance == 0"))
    chunk = top[0].chunk
    wallet = Symbol.objects.get(dataset=code_world["dataset"], qualname="Wallet")
    adds = graph_additions(top)
    headers = [a for a in adds if a.why["relation"] == "encloses"]
    assert chunk.start_line > wallet.start_line  # the chunker split the class: the method's chunk lacks its header
    assert [(h.why["symbol"], h.start_line, h.end_line) for h in headers] == \
        [("Wallet", wallet.start_line, line_of("billing/ledger.py", "def __init__") - 1)]
    assert 'currency = "EUR"' in headers[0].text  # class attributes come with the header


@pytest.mark.parametrize("graph", [True, False, None])
def test_a_query_packs_graph_spans_when_asked_and_follows_the_setting_by_default(code_world, graph, settings):
    from search.engine.pipeline import QuerySpec, run_query

    settings.CODE_GRAPH_PACK = True
    res = run_query(user=code_world["alice"], project=code_world["project"],
                    spec=QuerySpec(q="checkout pay take wallet", graph=graph, top_k=3, log=False))
    spans = [s for f in res.pack["files"] for s in f["spans"]]
    graph_spans = [s for s in spans if s["source"] == "graph"]
    if graph is False:
        assert graph_spans == [] and "graph_ms" not in res.timings
    else:
        assert graph_spans and all(s["why"]["added_by"] == "graph" and 1 <= s["why"]["from_rank"] <= 3
                                   for s in graph_spans)
        assert res.pack["graph_spans"] == len(graph_spans) and "graph_ms" in res.timings
    assert sorted(s["order"] for s in spans) == list(range(1, len(spans) + 1))


def test_the_api_takes_graph_and_refuses_a_non_boolean(code_world, client_for):
    client = client_for(code_world["alice"])
    ok = client.post("/api/projects/shop/query", {"q": "checkout pay take wallet", "top_k": 3, "graph": True},
                     format="json")
    assert ok.status_code == 200
    graph_spans = [s for f in ok.json()["pack"]["files"] for s in f["spans"] if s["source"] == "graph"]
    assert graph_spans and {"from_rank", "relation", "symbol", "definition", "use"} <= set(graph_spans[0]["why"])
    bad = client.post("/api/projects/shop/query", {"q": "checkout", "graph": "perhaps"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "graph"


def _cands(dataset, scored: list[tuple[str, str, float]]):
    cands = _top(dataset, *[(path, needle) for path, needle, _ in scored])
    for rank, (c, (_, _, score)) in enumerate(zip(cands, scored, strict=True), start=1):
        c.fused_score, c.rank_before = score, rank
    return cands


def test_a_callee_of_a_strong_candidate_moves_up_but_never_above_the_best(code_world):
    from types import SimpleNamespace

    from search.engine.graph_signal import STRENGTH, graph_boost

    cands = _cands(code_world["dataset"], [("shop/service.py", "take(wallet", 1.0),
                                           ("web/routes.js", "function listProducts", 0.52),
                                           ("billing/ledger.py", "def deduct_credits", 0.5)])
    run = SimpleNamespace(cands=cands)
    graph_boost(run)
    assert [c.chunk.path for c in run.cands] == ["shop/service.py", "billing/ledger.py", "web/routes.js"]
    deduct = run.cands[1]
    assert deduct.graph_boost == pytest.approx(STRENGTH * 1.0) and deduct.rank_before == 2
    assert deduct.extra["graph_path"] == [f"chunk:{run.cands[0].chunk_id}", "uses", f"chunk:{deduct.chunk_id}"]
    assert run.cands[2].graph_boost is None and run.cands[0].fused_score == 1.0


def test_candidates_without_code_links_keep_their_order(code_world):
    from types import SimpleNamespace

    from search.engine.graph_signal import graph_boost

    cands = _cands(code_world["dataset"], [("web/routes.js", "function listProducts", 1.0),
                                           ("shop/jobs.py", "def notify", 0.99)])
    run = SimpleNamespace(cands=cands)
    graph_boost(run)
    assert [(c.chunk.path, c.fused_score, c.graph_boost) for c in run.cands] == \
        [("web/routes.js", 1.0, None), ("shop/jobs.py", 0.99, None)]
