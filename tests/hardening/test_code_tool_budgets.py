"""Work that ends: the code tools' cost stays within a stated bound whatever a pushed file holds.

A signed-up user can push a 1 MB file with twenty thousand imports and calls, or ask grep for a pattern that
sends RE2 to its slow engine. Each test builds such an input (real Postgres; the file's chunks and code facts are
written as the writer writes them, without embeddings: the code tools read Postgres only) and checks the answer
arrives within a generous bound, says `complete: false` where it stopped, and that the work itself stopped."""
from __future__ import annotations

import random
import time

import pytest
from asgiref.sync import async_to_sync

SLOW_PATTERN = "[a-q][^u-z]{900}x"  # RE2's DFA outgrows its memory: the NFA reads about 0.15 MB/s


@pytest.fixture
def repo(db, make_user, make_project):
    from search.models import Dataset

    alice = make_user("alice@example.com")
    project = make_project("shop", alice)
    dataset = Dataset.objects.create(project=project, name="app", kind="code")
    return {"alice": alice, "project": project, "dataset": dataset}


def push(dataset, files: dict[str, str]) -> None:
    """Write documents, their chunks and their code facts as the writer does (without embeddings). A text the code
    reader skips (a line over 2,000 characters: web pages and pushed text keep theirs) is one chunk as it is."""
    from django.db import transaction

    from search.ingest.base import ChunkDraft, DocumentDraft
    from search.ingest.code import code_document
    from search.ingest.code_facts import write_code_facts
    from search.models import Chunk, Document

    drafts = [code_document(rel=path, data=text.encode(), repo="app")[0] or
              DocumentDraft(path=path, content_hash=str(hash(text)), repo="app", lang="text",
                            chunks=[ChunkDraft(text=text, start_line=1, end_line=text.count("\n") + 1, kind="web")])
              for path, text in files.items()]
    with transaction.atomic():
        docs = Document.objects.bulk_create([Document(dataset=dataset, path=d.path, repo=d.repo, lang=d.lang,
                                                      content_hash=d.content_hash, title=d.title,
                                                      size_bytes=len(files[d.path].encode())) for d in drafts])
        Chunk.objects.bulk_create([Chunk(document=doc, dataset=dataset, ordinal=o, kind="code", repo=d.repo,
                                         path=d.path, lang=d.lang, symbol=c.symbol[:500], start_line=c.start_line,
                                         end_line=c.end_line, text=c.text, micro_summary=c.micro_summary,
                                         text_hash=f"{doc.pk}-{o}")
                                   for doc, d in zip(docs, drafts, strict=True) for o, c in enumerate(d.chunks)],
                                  batch_size=2000)
        write_code_facts(dataset=dataset, drafts=drafts)


LEDGER = "def deduct(wallet, amount):\n    return wallet - amount\n"


def many_imports(n: int) -> str:
    """A file with `n` imports and `n` calls of `deduct`, imported last: every call's import was looked up by
    scanning every import of the file."""
    lines = [f"from pkg.mod{k} import helper{k}" for k in range(n)]
    lines += ["from billing.ledger import deduct", "", "", "def run(x):"]
    return "\n".join(lines + ["    deduct(x)"] * n) + "\n"


def aliased_calls(n: int) -> str:
    """`n` functions imported under aliases, each called: every alias was a query, every module two."""
    lines = [f"from pkg.mod{k} import func{k} as f{k}" for k in range(n)] + ["", "", "def run(x):"]
    return "\n".join(lines + [f"    f{k}(x)" for k in range(n)]) + "\n"


def slow_text(size: int, *, line: int = 100, seed: int = 3) -> str:
    """`size` characters of lowercase letters that never hold an `x`: SLOW_PATTERN reads all of it and matches none."""
    rnd = random.Random(seed)
    letters = "abcdefghijklmnopqrst"
    return "\n".join("".join(rnd.choice(letters) for _ in range(line)) for _ in range(size // (line + 1))) + "\n"


# ------------------------------------------------------------------------------------------ find_references
def test_references_on_a_1_mb_file_of_imports_and_calls_resolve_every_use_within_the_budget(repo):
    from search.engine.code_graph import find_references

    push(repo["dataset"], {"billing/ledger.py": LEDGER, "shop/huge.py": many_imports(20_000)})
    t0 = time.perf_counter()
    out = find_references(project=repo["project"], symbol="deduct")
    took = time.perf_counter() - t0
    print(f"find_references on 20,000 imports and calls: {took:.2f} s")
    assert out["complete"] is True
    assert out["total"] == 20_001  # the import and every call, each resolved through the import
    assert all(r["resolution"] == "resolved" for r in out["references"])
    assert took < 10.0, took  # quadratic before: about 25 s on this file


def test_resolving_is_linear_in_the_uses_of_a_file(repo):
    """The resolver's work (imports and candidates examined) grows with the uses, not with uses times imports."""
    from search.engine.code_graph import Ref, Resolver
    from search.models import SymbolRef

    push(repo["dataset"], {"billing/ledger.py": LEDGER, "shop/small.py": many_imports(1000),
                           "shop/large.py": many_imports(4000)})
    steps = {}
    for path in ("shop/small.py", "shop/large.py"):
        rows = [Ref(*r) for r in SymbolRef.objects.filter(path=path).exclude(kind="import")
                .values_list("dataset_id", "document_id", "path", "name", "kind", "line", "qualifier", "container",
                             "alias")]
        resolver = Resolver(dataset_id=repo["dataset"].pk)
        assert {resolver.resolve(r)[0] for r in rows} == {"resolved"}
        steps[path] = (len(rows), resolver.steps)
    (n_small, small), (n_large, large) = steps["shop/small.py"], steps["shop/large.py"]
    assert n_large == 4 * n_small
    assert large <= 3 * n_large and large <= 4.5 * small, steps


def test_references_stop_at_their_budget_and_say_complete_false(repo, settings):
    from search.engine.code_graph import find_references

    push(repo["dataset"], {"billing/ledger.py": LEDGER, "shop/huge.py": many_imports(3000)})
    settings.CODE_REFERENCES_BUDGET_S = 0.0
    out = find_references(project=repo["project"], symbol="deduct")
    assert out["complete"] is False and out["total"] < 3001


def test_aliased_imports_cost_a_few_queries_whatever_their_number(repo, django_assert_max_num_queries):
    from search.engine.code_graph import find_references

    push(repo["dataset"], {**{f"pkg/mod{k}.py": f"def func{k}(x):\n    return x\n" for k in range(300)},
                           "shop/aliases.py": aliased_calls(300)})
    with django_assert_max_num_queries(20):  # one query per alias and two per module before
        out = find_references(project=repo["project"], symbol="func7")
    assert out["complete"] and [(r["kind"], r["resolution"]) for r in out["references"]] == \
        [("import", "resolved"), ("call", "resolved")]


# ------------------------------------------------------------------------------------------ the graph pack
def test_the_graph_reads_a_bounded_number_of_uses_in_a_few_queries(repo, settings, django_assert_max_num_queries):
    from search.engine.code_graph import LineSpan, resolved_uses
    from search.models import Document

    push(repo["dataset"], {**{f"pkg/mod{k}.py": f"def func{k}(x):\n    return x\n" for k in range(2000)},
                           "shop/aliases.py": aliased_calls(2000)})
    doc = Document.objects.get(path="shop/aliases.py")
    settings.CODE_GRAPH_MAX_USES = 300
    span = LineSpan(repo["dataset"].pk, doc.pk, 1, 5000)  # a result that spans the whole file
    with django_assert_max_num_queries(12):
        [uses] = resolved_uses(spans=[span])
    assert len(uses) == 300 and {u.definition.path for u in uses} == {f"pkg/mod{k}.py" for k in range(300)}


def test_the_graph_stops_at_the_requests_deadline_with_a_504(repo):
    from config.deadlines import DeadlineExceeded, deadline_after
    from config.errors import api_exception_handler
    from search.engine.code_graph import LineSpan, resolved_uses
    from search.models import Document

    push(repo["dataset"], {"billing/ledger.py": LEDGER, "shop/huge.py": many_imports(500)})
    doc = Document.objects.get(path="shop/huge.py")
    with deadline_after(0), pytest.raises(DeadlineExceeded) as exc:
        resolved_uses(spans=[LineSpan(repo["dataset"].pk, doc.pk, 1, 2000)])
    resp = api_exception_handler(exc.value, {})
    assert resp.status_code == 504 and resp.data["code"] == "request_timeout"


# ------------------------------------------------------------------------------------------ grep
def test_grep_with_a_slow_pattern_stops_near_its_budget_inside_a_large_file(repo, settings):
    from search.engine.grep import grep_project

    push(repo["dataset"], {"docs/big.txt": slow_text(600_000)})
    settings.GREP_BUDGET_S = 0.3
    t0 = time.perf_counter()
    out = grep_project(project=repo["project"], pattern=SLOW_PATTERN, regex=True)
    took = time.perf_counter() - t0
    assert out["complete"] is False and out["files_read"] == 0 and out["hits"] == []
    assert took < 3.0, took  # the whole file: about 8 s


def test_grep_stops_inside_one_long_line(repo, settings):
    from search.engine.grep import grep_project

    minified = slow_text(600_000, line=600).replace("\n", "") + "\n"  # one line of 600 KB
    push(repo["dataset"], {"docs/minified.txt": minified})
    settings.GREP_BUDGET_S = 0.3
    t0 = time.perf_counter()
    out = grep_project(project=repo["project"], pattern=SLOW_PATTERN, regex=True)
    assert out["complete"] is False and time.perf_counter() - t0 < 3.0


def test_slices_and_windows_find_exactly_the_lines_a_line_by_line_match_finds():
    """Scanning in slices (and long lines in windows) changes no answer: every line matched, no anchor matched at a
    slice's or window's edge."""
    import re as pyre

    from search.engine.grep import SLICE_CHARS, compile_grep, matching_lines

    rnd = random.Random(5)
    lines = {n: "".join(rnd.choice("ab c") for _ in range(rnd.randrange(0, 300))) for n in range(1, 3000)}
    lines[1500] = "a" * (SLICE_CHARS * 3) + " needle"  # a long line: the hit lies in its last window
    lines[1501] = "q" * (SLICE_CHARS - 4096) + "b" + "q" * SLICE_CHARS  # `^b` would match at a window's start
    far = float("inf")
    for pattern in (r"^ab", r"c$", r"\bba\b", "needle", r"^b", "a c b"):
        spec = compile_grep(pattern=pattern, regex=True, max_matches=500)
        found, finished = matching_lines(lines=lines, spec=spec, stop_at=far, room=10_000)
        expected = [n for n in sorted(lines) if pyre.search(pattern, lines[n])]
        assert finished and found == expected, pattern


def test_grep_finds_every_hit_when_the_budget_allows(repo):
    from search.engine.grep import grep_project

    text = slow_text(200_000)
    lines = text.split("\n")
    lines[700] = "x" * 40
    push(repo["dataset"], {"docs/some.txt": "\n".join(lines)})
    out = grep_project(project=repo["project"], pattern="xxxx", max_matches=5)
    assert out["complete"] and [h["line"] for h in out["hits"]] == [701]


# ------------------------------------------------------------------------------------------ the request's deadline
def test_an_api_request_deadline_stops_grep_inside_the_scan(repo, client_for, settings):
    push(repo["dataset"], {"docs/big.txt": slow_text(1_000_000)})
    settings.GREP_BUDGET_S = 60.0
    settings.REQUEST_DEADLINE_S = 0.3
    t0 = time.perf_counter()
    resp = client_for(repo["alice"]).post("/api/projects/shop/code/grep",
                                          {"pattern": SLOW_PATTERN, "regex": True}, format="json")
    took = time.perf_counter() - t0
    assert resp.status_code == 200, resp.content
    assert resp.json()["complete"] is False and took < 4.0, took  # the whole file: about 13 s


def _mcp(secret: str, script):
    from search.edge.mcp.server import caller_for_secret, in_process_client

    caller = caller_for_secret(secret, transport="http")

    async def run():
        async with in_process_client(caller) as client:
            return await script(client)

    return async_to_sync(run)()


def test_an_mcp_tool_call_whose_budget_is_tiny_stops_the_work(repo, settings):
    """The call's deadline reaches the work in the tool's thread: the grep stops at it, long before its own
    budget or the file's end, and answers what it has (`complete: false`)."""
    from accounts.apikeys import issue_api_key

    push(repo["dataset"], {"docs/big.txt": slow_text(1_000_000)})
    settings.GREP_BUDGET_S = 60.0
    settings.MCP_REQUEST_TIMEOUT_S = 0.3
    secret = issue_api_key(user=repo["alice"]).secret

    async def script(client):
        return await client.call_tool("grep", {"project": "shop", "pattern": SLOW_PATTERN, "regex": True})

    t0 = time.perf_counter()
    result = _mcp(secret, script)
    took = time.perf_counter() - t0
    assert not result.is_error, result.structured_content
    out = result.structured_content
    assert out["complete"] is False and out["took_ms"] < 3000 and took < 5.0, (took, out["took_ms"])


# ------------------------------------------------------------------------------------------ outline
def test_outline_pages_a_file_of_thousands_of_definitions(repo, client_for):
    from search.engine.code_graph import outline

    defs = "\n".join(f"def f{k}(x):\n    return x\n" for k in range(2500))
    imports = "\n".join(f"import mod{k}" for k in range(1200))
    push(repo["dataset"], {"shop/wide.py": imports + "\n\n" + defs})
    first = outline(project=repo["project"], path="shop/wide.py")
    assert len(first["symbols"]) == 200 and len(first["imports"]) == 200
    assert first["complete"] is False and first["next"] == 200
    names, imported, offset = [], [], 0
    while offset is not None:
        page = outline(project=repo["project"], path="shop/wide.py", limit=1000, offset=offset)
        names += [s["name"] for s in page["symbols"]]
        imported += [i["name"] for i in page["imports"]]
        offset = page["next"]
    assert names == [f"f{k}" for k in range(2500)] and sorted(imported) == sorted(f"mod{k}" for k in range(1200))
    assert page["complete"] is True

    client = client_for(repo["alice"])
    api = client.post("/api/projects/shop/code/outline", {"path": "shop/wide.py", "limit": 1000, "offset": 2000},
                      format="json").json()
    assert [s["name"] for s in api["symbols"]] == [f"f{k}" for k in range(2000, 2500)]
    assert api["complete"] is True and api["next"] is None and api["imports"] == []
    too_many = client.post("/api/projects/shop/code/outline", {"path": "shop/wide.py", "limit": 100_000},
                           format="json")
    assert too_many.status_code == 400 and too_many.json()["field"] == "limit"


def test_the_mcp_outline_pages_like_the_api(repo):
    from accounts.apikeys import issue_api_key

    push(repo["dataset"], {"shop/wide.py": "\n".join(f"def f{k}(x):\n    return x\n" for k in range(450))})
    secret = issue_api_key(user=repo["alice"]).secret

    async def script(client):
        return [await client.call_tool("outline", {"project": "shop", "path": "shop/wide.py", **args})
                for args in ({}, {"offset": 400, "limit": 100})]

    first_result, last_result = _mcp(secret, script)
    first, last = first_result.structured_content, last_result.structured_content
    assert len(first["symbols"]) == 200 and first["next"] == 200 and "offset=200" in first_result.content[0].text
    assert [s["name"] for s in last["symbols"]] == [f"f{k}" for k in range(400, 450)] and last["complete"]


def test_the_schema_documents_outline_paging_and_complete_flags():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    parts = schema["components"]["schemas"]
    assert {"limit", "offset"} <= set(parts["CodeOutlineRequestRequest"]["properties"])
    assert {"complete", "next"} <= set(parts["CodeOutlineResponse"]["properties"])
    assert "complete" in parts["CodeReferencesResponse"]["properties"]
