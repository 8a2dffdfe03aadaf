"""The plain types every chunker (code, web, rules) hands to the runner.

Why a separate type instead of unsaved Chunk instances: chunkers stay pure
(no DB, easy to test against a file), and the runner alone decides ids,
ordinals, hashes, embeddings and the outbox in one transaction.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from config.pgarrays import float_array, int_array
from search.engine.sparse import SparseVec, encode_document, sparse_document_text


@dataclass
class ChunkDraft:
    """One retrievable span; start_line/end_line are 1-based and inclusive. Mirrors search.models.Chunk."""

    text: str
    start_line: int
    end_line: int
    kind: str = "code"  # code | web | rules | beir
    symbol: str = ""
    heading_path: list[str] = field(default_factory=list)
    micro_summary: str = ""
    # rulebook enrichment; empty for code/web
    ruleset_id: str = ""
    book_id: str = ""
    section_path: list[str] = field(default_factory=list)
    page: str = ""
    content_kind: str = ""
    tags: list[str] = field(default_factory=list)
    traits: dict[str, Any] = field(default_factory=dict)
    is_rule_bearing: bool = False
    meta: dict[str, Any] = field(default_factory=dict)
    # the chunk row's sparse vector as the row's array literals (row_sparse_arrays: its term ids and their weights),
    # when a reader process computed it off the job's process (search.ingest.reader_pool); None: the writer computes
    # it. Not compared: the same chunk either way.
    terms: str | None = field(default=None, compare=False, repr=False)
    weights: str | None = field(default=None, compare=False, repr=False)


@dataclass
class DocumentDraft:
    """One source file/page with its chunks. `path` is repo-relative (or the URL / external id)."""

    path: str
    content_hash: str
    chunks: list[ChunkDraft]
    repo: str = ""
    url: str = ""
    lang: str = ""
    title: str = ""
    macro_summary: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    external_id: str = ""  # a pushed document's own id (search.ingest.staged)
    size_bytes: int = 0  # source bytes; 0: the chunk text's size
    # the file's bytes where a page link should open them (search.ingest.formats.originals); None: no link
    original: bytes | None = field(default=None, repr=False)
    # a code file's symbol facts, taken while its tree was at hand (search.ingest.symbols.facts_of_chunks):
    # (the file rebuilt from the chunks it was taken from, the FileSymbols); the writer uses them while the chunks
    # still rebuild that text, and extracts afresh otherwise. None: none taken.
    facts: tuple[str, Any] | None = field(default=None, repr=False)


def embed_input(chunk: ChunkDraft) -> str:
    """What the dense model sees: the chunk's summary line, then its text.

    Path-free on purpose, so a moved file hits the embedding cache. A rulebook section has no summary line; the
    headings above it (`heading_path`: below the chapter) stand in, as they already do in its sparse text
    (search.engine.sparse) and, through `summaries.heading_micro`, in a web chunk's summary. A section's own words
    seldom name what it belongs to ("## Dodge" says nothing of "Actions in Combat"); given its headings, the dense
    leg alone went from nDCG@10 0.426 to 0.511 on the SRD development questions (README, "Rules questions: SRD")."""
    head = chunk.micro_summary or (" > ".join(chunk.heading_path) if chunk.kind == "rules" else "")
    return f"{head}\n{chunk.text}" if head else chunk.text


# search.models.Chunk's column widths: the writer stores a chunk's symbol and headings cut to these
SYMBOL_CHARS = 500
HEADING_CHARS = 500


def row_symbol(chunk: ChunkDraft) -> str:
    return chunk.symbol[:SYMBOL_CHARS]


def row_headings(chunk: ChunkDraft) -> list[str]:
    return [h[:HEADING_CHARS] for h in chunk.heading_path]


def row_sparse(*, chunk: ChunkDraft, path: str) -> SparseVec:
    """The chunk row's sparse vector: the sparse text of the row as written (path, cut symbol, cut headings),
    analysed as its kind. Its indices are the row's `terms` (kept as per-dataset document frequencies), its values
    the row's `term_weights`: the BM25 document weights the index applier sends (search.engine.applier).

    Why on the row: a first ingest analysed every chunk twice, for the writer's term ids and again for the
    applier's weights, and the applier's analysis was about half its time. Analysed once where the chunk is read
    (in a reader process, off the job's and the applier's cores), both come from one pass."""
    return encode_document(sparse_document_text(text=chunk.text, path=path, symbol=row_symbol(chunk),
                                                heading_path=row_headings(chunk)), kind=chunk.kind)


def row_sparse_arrays(*, chunk: ChunkDraft, path: str) -> tuple[str, str]:
    """The row's `terms` and `term_weights` (row_sparse) as the array literals the writer's COPY sends
    (config.pgarrays).

    Why literals: a reader process computes them, and the lists crossed the wire as JSON numbers, to be parsed back
    in the job's process and turned into these same literals there; as two strings they cost the job neither."""
    sparse = row_sparse(chunk=chunk, path=path)
    return int_array(sparse.indices), float_array(sparse.values)


_INT_ARRAY = re.compile(r"\{(?:\d{1,10}(?:,\d{1,10})*)?\}")
_FLOAT_ARRAY = re.compile(r"\{(?:\d+(?:\.\d+)?(?:e[-+]?\d+)?(?:,\d+(?:\.\d+)?(?:e[-+]?\d+)?)*)?\}")


def sparse_arrays_ok(*, terms: str, weights: str) -> bool:
    """Whether `terms` and `weights` are what row_sparse_arrays gives: a literal of unsigned term ids and one of as
    many non-negative decimal weights (what the parent checks of a reader process's answer)."""
    return (_INT_ARRAY.fullmatch(terms) is not None and _FLOAT_ARRAY.fullmatch(weights) is not None
            and terms.count(",") == weights.count(",") and (terms == "{}") == (weights == "{}"))


MAX_CHUNK_LINES = 80
OVERLAP_LINES = 5


def exact_span(lines: list[str], start: int, end: int) -> tuple[int, int, str]:
    """Trim blank lines at both ends; return exact (start, end, text), 1-based inclusive.

    Every chunker cuts through here, so a chunk's text is always exactly its file lines."""
    while start < end and not lines[start - 1].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return start, end, "\n".join(lines[start - 1:end])


def line_windows(start: int, end: int, cap: int = MAX_CHUNK_LINES, overlap: int = OVERLAP_LINES) -> list[tuple[int, int]]:
    """A span over the cap becomes overlapping windows, so no chunk outgrows what the encoder reads."""
    if end - start + 1 <= cap:
        return [(start, end)]
    out, s = [], start
    while s <= end:
        e = min(end, s + cap - 1)
        out.append((s, e))
        if e == end:
            break
        s = e + 1 - overlap
    return out
