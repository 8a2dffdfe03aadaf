"""Context packs that bring what they use: the definitions the top code results call or inherit from, and the
header of the class a method result belongs to, added to the pack within its token budget.

Why: an agent handed `ledger.settle()` without `Wallet.deduct`, which it calls, has to come back for it (a second
round trip, or a guess). The symbol graph (search.engine.code_graph) knows where each use resolves, so the pack
can carry the definition in the same answer. Only uses that resolve to exactly one definition are followed
(an ambiguous name is not guessed), each definition is added once, and a definition a result at or above the
one it came from already shows is not added again. Each addition is spent from the budget right after the result
it came from (search.engine.packing), so a definition that ranked lower comes forward (the packer then skips the
later result's span, which it covers), and its `why` names that result, the relation and the use's line.

Bounded whatever the files hold (docs/security.md, "Work that ends"): the uses followed per result are capped at
CODE_GRAPH_MAX_USES, resolving them is linear (search.engine.code_graph.Resolver), and the work stops at the
request's deadline (the query answers 504 `request_timeout`).

On by request (`graph: true` on a query) or by default where CODE_GRAPH_PACK says so: docs/architecture.md
("Context packs from the code graph") has the measurement that chose the default.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db.models import Q

from search.engine.code_graph import Def, LineSpan, enclosing_definitions, member_starts, resolved_uses
from search.models import Chunk

if TYPE_CHECKING:
    from search.engine.fusion import Candidate

EXPAND_TOP = 5          # results whose uses are followed
MAX_PER_RESULT = 4      # definitions added per result
MAX_DEF_LINES = 30      # a long definition: its first lines (signature, docstring, the start of the body)
MAX_HEADER_LINES = 15   # a class header: its line, bases, docstring, class attributes
_RELATION = {"inherit": "inherits", "call": "calls", "reference": "uses"}


@dataclass
class Addition:
    """One span the graph adds to a pack (search.engine.packing.build_pack places and charges it)."""

    dataset_id: int
    document_id: int
    repo: str
    path: str
    lang: str
    start_line: int
    end_line: int
    text: str
    from_rank: int
    why: dict[str, Any]
    chunk_ids: list[int]  # the chunks whose lines it shows (evaluation ranks a pack by them)


def graph_wanted(*, graph: bool | None) -> bool:
    """A request's `graph`, else the deployment's default (CODE_GRAPH_PACK)."""
    return bool(settings.CODE_GRAPH_PACK) if graph is None else graph


def graph_additions(top: list[Candidate], *, expand_top: int = EXPAND_TOP,
                    max_per_result: int = MAX_PER_RESULT) -> list[Addition]:
    """The additions for the first `expand_top` code results of `top` (candidates with their chunk loaded, in final
    order): per result its enclosing class's header, then the definitions its uses resolve to (base classes, calls,
    other names), at most `max_per_result`, never lines that result or a better one already shows."""
    heads = [(rank, c.chunk) for rank, c in enumerate(top, start=1) if c.chunk.kind == "code"][:expand_top]
    if not heads:
        return []
    spans = [LineSpan(ch.dataset_id, ch.document_id, ch.start_line, ch.end_line) for _, ch in heads]
    shown = [(c.chunk.document_id, c.chunk.start_line, c.chunk.end_line) for c in top]
    enclosing = enclosing_definitions(spans=spans)
    uses = resolved_uses(spans=spans)
    classes = [d for ds in enclosing for d in ds[:1]]
    classes += [u.definition for us in uses for u in us if u.ref.kind == "inherit"]
    header_end = member_starts(definitions=classes)
    planned: list[tuple[int, Def, int, int, dict[str, Any]]] = []
    taken: set[int] = set()
    for (rank, ch), outer, found in zip(heads, enclosing, uses, strict=True):
        source = {"from_rank": rank, "from_span": f"{ch.path}:{ch.start_line}-{ch.end_line}"}
        per: list[tuple[int, Def, int, int, dict[str, Any]]] = []
        if outer:
            cls = outer[0]
            end = min(header_end.get(cls.id, cls.end_line + 1) - 1, cls.start_line + MAX_HEADER_LINES - 1,
                      ch.start_line - 1)
            per.append((rank, cls, cls.start_line, end, {**source, "relation": "encloses",
                                                          "use": f"{ch.path}:{ch.start_line}"}))
        for use in found:
            d = use.definition
            if d.document_id == ch.document_id and ch.start_line <= d.start_line <= ch.end_line:
                continue  # defined inside the result itself
            last = d.end_line
            if d.kind == "class" and use.ref.kind != "call":
                last = header_end.get(d.id, d.end_line + 1) - 1
            end = min(last, d.start_line + (MAX_HEADER_LINES if d.kind == "class" else MAX_DEF_LINES) - 1)
            per.append((rank, d, d.start_line, end, {**source, "relation": _RELATION[use.ref.kind],
                                                     "use": f"{use.ref.path}:{use.ref.line}"}))
        for item in per:
            _, d, start, end, _ = item
            if len([p for p in planned if p[0] == rank]) >= max_per_result:
                break
            if d.id in taken or end < start or _covered(shown[:rank], d.document_id, start, end):
                continue
            taken.add(d.id)
            planned.append(item)
    files = _texts(planned)
    out = []
    for rank, d, start, end, why in planned:
        f = files.get(d.document_id)
        text = "\n".join(f.lines.get(n, "") for n in range(start, end + 1)) if f else ""
        if text.strip():
            out.append(Addition(dataset_id=d.dataset_id, document_id=d.document_id, repo=f.repo, path=d.path,
                                lang=d.lang, start_line=start, end_line=end, text=text, from_rank=rank,
                                why={"added_by": "graph", **why, "symbol": d.qualname, "kind": d.kind,
                                     "definition": f"{d.path}:{d.start_line}-{d.end_line}"},
                                chunk_ids=[pk for pk, s, e in f.chunks if s <= end and start <= e]))
    return out


def _covered(shown: list[tuple[int, int, int]], document_id: int, start: int, end: int) -> bool:
    """Whether the results already show these lines (a span that overlaps one is not added: the agent has it)."""
    return any(doc == document_id and s <= end and start <= e for doc, s, e in shown)


@dataclass
class _FileText:
    repo: str = ""
    lines: dict[int, str] = field(default_factory=dict)
    chunks: list[tuple[int, int, int]] = field(default_factory=list)  # (chunk id, start line, end line)


def _texts(planned: list[tuple[int, Def, int, int, dict[str, Any]]]) -> dict[int, _FileText]:
    """document id -> the lines (and chunks) the planned spans need, from the chunks that cover them, in one query
    (a file's text lives in its chunks)."""
    if not planned:
        return {}
    where = Q()
    for _, d, start, end, _ in planned:
        where |= Q(document_id=d.document_id, start_line__lte=end, end_line__gte=start)
    out: dict[int, _FileText] = {}
    for pk, doc_id, repo, start, end, text in Chunk.objects.filter(where).order_by("document_id", "start_line") \
            .values_list("pk", "document_id", "repo", "start_line", "end_line", "text"):
        f = out.setdefault(doc_id, _FileText(repo=repo))
        f.chunks.append((pk, start, end))
        for i, line in enumerate(text.split("\n")):
            f.lines.setdefault(start + i, line)
    return out
