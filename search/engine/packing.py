"""The context pack: what an agent pastes into its prompt.

Tokens are counted as regex word pieces plus punctuation marks
(`\\w+|[^\\w\\s]`): a tokenizer-free estimate (on this repository's Python it
is 0.79x the MiniLM WordPiece count; docs/context.md has the figures); the
budget (default 8,000) covers macro summaries and span texts.
"""
from __future__ import annotations

import re
from typing import Any

from search.engine.pages import merged_label

DEFAULT_BUDGET = 8000
_TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _merge_file(chunks: list[Any]) -> list[dict[str, Any]]:
    """Merge overlapping or adjacent spans of one file; lines come from the chunks' own exact text."""
    spans: list[dict[str, Any]] = []
    for c in sorted(chunks, key=lambda c: (c.start_line, c.end_line)):
        lines = c.text.split("\n")
        if spans and c.start_line <= spans[-1]["end_line"] + 1:
            cur = spans[-1]
            for i, line in enumerate(lines):
                cur["lines"].setdefault(c.start_line + i, line)
            cur["end_line"] = max(cur["end_line"], c.end_line)
            cur["chunk_ids"].append(c.pk)
            cur["best_rank"] = min(cur["best_rank"], c._pack_rank)
            cur["pages"].append(getattr(c, "page", ""))
        else:
            spans.append({"start_line": c.start_line, "end_line": c.end_line, "chunk_ids": [c.pk],
                          "best_rank": c._pack_rank, "pages": [getattr(c, "page", "")],
                          "lines": {c.start_line + i: line for i, line in enumerate(lines)}})
    for s in spans:
        s["text"] = "\n".join(s["lines"].get(n, "") for n in range(s["start_line"], s["end_line"] + 1))
        del s["lines"]
        # a paged document's span (a PDF rulebook) also says where it is printed; other files' spans are unchanged
        page = merged_label(labels=s.pop("pages"))
        if page:
            s["page"] = page
    return spans


def build_pack(chunks: list[Any], *, budget_tokens: int = DEFAULT_BUDGET,
               macro_by_document: dict[int, str] | None = None, additions: list[Any] | None = None) -> dict[str, Any]:
    """chunks in final-rank order -> {files:[{path, macro_summary, spans}], tokens, budget, truncated}.

    `additions` (search.engine.graph_context.Addition): spans the code graph adds, each spent right after the
    result it came from (`from_rank`) and kept apart from the results' merged spans (`source: graph`, its `why`).
    A result span whose every line an addition spent before it already shows is left out (the definition came
    forward). Every kept span says when the budget was spent on it (`order`, from 1) and what it cost (`tokens`,
    its file's macro summary included the first time), so a reader can cut the pack at any budget."""
    macro_by_document = macro_by_document or {}
    groups: dict[tuple[int, str], list[Any]] = {}
    for rank, c in enumerate(chunks, start=1):
        c._pack_rank = rank
        groups.setdefault((c.dataset_id, c.path), []).append(c)
    files = []
    index: dict[tuple[int, str], int] = {}
    for (dataset_id, path), members in groups.items():
        first = members[0]
        index[(dataset_id, path)] = len(files)
        files.append({"dataset_id": dataset_id, "repo": first.repo, "path": path, "lang": first.lang,
                      "document_id": first.document_id,
                      "macro_summary": macro_by_document.get(first.document_id, ""),
                      "spans": [{**s, "source": "result"} for s in _merge_file(members)]})
    for seq, a in enumerate(additions or [], start=1):
        if (a.dataset_id, a.path) not in index:
            index[(a.dataset_id, a.path)] = len(files)
            files.append({"dataset_id": a.dataset_id, "repo": a.repo, "path": a.path, "lang": a.lang,
                          "document_id": a.document_id, "macro_summary": macro_by_document.get(a.document_id, ""),
                          "spans": []})
        files[index[(a.dataset_id, a.path)]]["spans"].append(
            {"start_line": a.start_line, "end_line": a.end_line, "chunk_ids": list(a.chunk_ids),
             "best_rank": a.from_rank + 0.5, "seq": seq,
             "text": a.text, "source": "graph", "why": a.why})
    # spend the budget in rank order: the best span first (a graph addition right after its result), each file's
    # macro once before its first span
    # (additions of one result in the order the graph gave them)
    units = sorted(((s["best_rank"], s.get("seq", 0), fi, si) for fi, f in enumerate(files)
                    for si, s in enumerate(f["spans"])))
    used, order, truncated = 0, 0, False
    keep: dict[int, list[dict[str, Any]]] = {}
    macro_done: set[int] = set()
    shown: dict[int, set[int]] = {}  # file -> lines the kept graph additions show
    for _, _, fi, si in units:
        f, span = files[fi], files[fi]["spans"][si]
        lines = range(span["start_line"], span["end_line"] + 1)
        if span["source"] == "result" and all(n in shown.get(fi, ()) for n in lines):
            continue
        cost = count_tokens(span["text"]) + (0 if fi in macro_done else count_tokens(f["macro_summary"]))
        if used + cost > budget_tokens:
            truncated = True
            continue
        used += cost
        macro_done.add(fi)
        order += 1
        span["order"], span["tokens"] = order, cost
        if span["source"] == "graph":
            shown.setdefault(fi, set()).update(lines)
        keep.setdefault(fi, []).append(span)
    out_files = []
    for fi in sorted(keep, key=lambda i: min(s["best_rank"] for s in keep[i])):
        f = dict(files[fi])
        spans = sorted(keep[fi], key=lambda s: s["start_line"])
        for s in spans:
            s["span"] = f"{f['path']}:{s['start_line']}-{s['end_line']}"
            s.pop("best_rank", None)
            s.pop("seq", None)
        f["spans"] = spans
        out_files.append(f)
    return {"files": out_files, "tokens": used, "budget": budget_tokens, "truncated": truncated,
            "graph_spans": sum(s["source"] == "graph" for f in out_files for s in f["spans"]),
            "token_counting": "regex \\w+|[^\\w\\s] pieces"}


def render_pack(pack: dict[str, Any]) -> str:
    """Plain-text form of a pack for pasting into a prompt."""
    parts = []
    for f in pack["files"]:
        parts.append(f"### {f['path']}")
        if f["macro_summary"]:
            parts.append(f["macro_summary"])
        for s in f["spans"]:
            why = s.get("why")
            note = f" (added: {why['relation']} {why['symbol']}, from result {why['from_rank']})" if why else ""
            page = f" ({s['page']}{', ' + s['page_url'] if s.get('page_url') else ''})" if s.get("page") else ""
            parts.append(f"--- {s['span']}{page}{note}\n{s['text']}")
    return "\n".join(parts)
