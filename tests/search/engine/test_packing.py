"""Context pack: adjacent/overlapping spans of one file merge, one macro per file, the token budget holds."""
from __future__ import annotations

from types import SimpleNamespace

from search.engine.packing import build_pack, count_tokens, render_pack

FILE = [f"line {n}" for n in range(1, 41)]


def _chunk(pk: int, start: int, end: int, *, path: str = "a.py", document_id: int = 1, dataset_id: int = 1):
    lines = FILE if path == "a.py" else [f"{path} {n}" for n in range(1, 41)]
    return SimpleNamespace(pk=pk, dataset_id=dataset_id, path=path, repo="r", lang="python", document_id=document_id,
                           start_line=start, end_line=end, text="\n".join(lines[start - 1:end]))


def test_count_tokens_counts_words_and_punctuation():
    assert count_tokens("def f(x): return x") == 8  # def f ( x ) : return x
    assert count_tokens("") == 0


def test_adjacent_and_overlapping_spans_merge_with_exact_text():
    pack = build_pack([_chunk(1, 10, 14), _chunk(2, 15, 18), _chunk(3, 17, 22), _chunk(4, 30, 31)],
                      macro_by_document={1: "Macro of a.py"})
    (f,) = pack["files"]
    assert [(s["start_line"], s["end_line"]) for s in f["spans"]] == [(10, 22), (30, 31)]
    merged = f["spans"][0]
    assert merged["chunk_ids"] == [1, 2, 3]
    assert merged["text"] == "\n".join(FILE[9:22])  # no duplicated lines from the overlap
    assert merged["span"] == "a.py:10-22"
    assert f["macro_summary"] == "Macro of a.py"


def test_one_macro_per_file_and_files_in_rank_order():
    chunks = [_chunk(1, 1, 2, path="b.py", document_id=2), _chunk(2, 5, 6), _chunk(3, 20, 21, path="b.py",
                                                                                      document_id=2)]
    pack = build_pack(chunks, macro_by_document={1: "Macro A", 2: "Macro B"})
    assert [f["path"] for f in pack["files"]] == ["b.py", "a.py"]
    text = render_pack(pack)
    assert text.count("Macro B") == 1 and text.count("Macro A") == 1
    b = pack["files"][0]
    assert [s["span"] for s in b["spans"]] == ["b.py:1-2", "b.py:20-21"]
    # the macro is charged once per file
    expected = sum(count_tokens(s["text"]) for f in pack["files"] for s in f["spans"]) + count_tokens(
        "Macro A") + count_tokens("Macro B")
    assert pack["tokens"] == expected


def test_budget_keeps_best_ranked_spans_and_reports_truncation():
    chunks = [_chunk(1, 1, 3), _chunk(2, 20, 40, path="big.py", document_id=2), _chunk(3, 30, 31)]
    small_cost = count_tokens(chunks[0].text) + count_tokens(chunks[2].text)
    pack = build_pack(chunks, budget_tokens=small_cost + 5, macro_by_document={})
    assert pack["truncated"] is True and pack["tokens"] <= pack["budget"]
    assert [f["path"] for f in pack["files"]] == ["a.py"]
    assert [s["start_line"] for s in pack["files"][0]["spans"]] == [1, 30]


def test_same_path_in_two_datasets_stays_two_files():
    pack = build_pack([_chunk(1, 1, 2, dataset_id=1), _chunk(2, 3, 4, dataset_id=2, document_id=9)])
    assert len(pack["files"]) == 2


def test_a_graph_addition_is_spent_right_after_its_result_and_says_why():
    from search.engine.graph_context import Addition

    why = {"added_by": "graph", "from_rank": 1, "relation": "calls", "symbol": "helper"}
    add = Addition(dataset_id=1, document_id=3, repo="r", path="lib.py", lang="python", start_line=5, end_line=6,
                   text="def helper():\n    return 1", from_rank=1, why=why, chunk_ids=[7])
    pack = build_pack([_chunk(1, 1, 2), _chunk(2, 1, 2, path="b.py", document_id=2)], additions=[add])
    spans = {s["span"]: s for f in pack["files"] for s in f["spans"]}
    assert [spans[k]["order"] for k in ("a.py:1-2", "lib.py:5-6", "b.py:1-2")] == [1, 2, 3]
    assert spans["lib.py:5-6"]["source"] == "graph" and spans["lib.py:5-6"]["why"] == why
    assert spans["lib.py:5-6"]["chunk_ids"] == [7]
    assert spans["a.py:1-2"]["source"] == "result" and "why" not in spans["a.py:1-2"]
    assert sum(s["tokens"] for s in spans.values()) == pack["tokens"] and pack["graph_spans"] == 1
    assert "(added: calls helper, from result 1)" in render_pack(pack)
    # a budget that holds the first result and its addition, not the second result
    tight = build_pack([_chunk(1, 1, 2), _chunk(2, 1, 2, path="b.py", document_id=2)], additions=[add],
                       budget_tokens=spans["a.py:1-2"]["tokens"] + spans["lib.py:5-6"]["tokens"])
    assert [s["span"] for f in tight["files"] for s in f["spans"]] == ["a.py:1-2", "lib.py:5-6"] and tight["truncated"]


def test_a_lower_result_an_earlier_graph_addition_already_shows_is_not_packed_twice():
    from search.engine.graph_context import Addition

    add = Addition(dataset_id=1, document_id=1, repo="r", path="a.py", lang="python", start_line=20, end_line=24,
                   text="\n".join(FILE[19:24]), from_rank=1, why={"from_rank": 1}, chunk_ids=[3])
    pack = build_pack([_chunk(1, 1, 2, path="b.py", document_id=2), _chunk(2, 5, 6, path="c.py", document_id=3),
                       _chunk(3, 20, 24)], additions=[add])
    spans = [(s["span"], s["source"], s["order"]) for f in pack["files"] for s in f["spans"]]
    assert ("a.py:20-24", "graph", 2) in spans and ("a.py:20-24", "result", 4) not in spans and len(spans) == 3
    assert pack["tokens"] == sum(s["tokens"] for f in pack["files"] for s in f["spans"])
