"""Docstring -> function pairs: the judged queries a Python code base writes for itself.

Why a docstring: its first sentence says what the function does in the words a person would search with, and the
function is the one right answer. Why the document loses the docstring: otherwise a string match finds it, and a
choice made on such queries would favour the sparse leg for a reason real queries do not share.

Pure (source text in, pairs out): `bench/build_code_collection.py` builds the stdlib collection from it, and
`search.quality.fusion_choice.choose_self_judged` a project's own label-free judged queries.
"""
from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass

MIN_QUERY_WORDS = 4
MAX_QUERY_CHARS = 300
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")


@dataclass(frozen=True)
class Pair:
    doc_id: str
    module: str
    query: str
    text: str


def first_sentences(docstring: str) -> str:
    """The docstring's first sentence, plus the next when the first is too short to be a query on its own."""
    para = re.split(r"\n\s*\n", docstring.strip(), maxsplit=1)[0]
    para = " ".join(para.split())
    sentences = _SENTENCE_END.split(para)
    out = sentences[0]
    for extra in sentences[1:]:
        if len(out.split()) >= MIN_QUERY_WORDS:
            break
        out = f"{out} {extra}"
    return out[:MAX_QUERY_CHARS].strip()


def strip_docstring(source_lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The function's source (decorators included) without the docstring's lines; None if nothing real is left."""
    doc = node.body[0]
    start = (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1
    if doc.lineno == node.lineno or node.end_lineno is None or doc.end_lineno is None:
        return None  # a one-line def with its docstring on the same line: cannot cut it cleanly
    rest = node.body[1:]
    if not rest or all(isinstance(s, ast.Pass) or (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
                       for s in rest):
        return None  # docstring-only or `pass`/`...` stubs: nothing to find once the docstring is gone
    if all(isinstance(s, ast.Raise) for s in rest):
        return None  # abstract `raise NotImplementedError` bodies are all alike
    lines = source_lines[start:doc.lineno - 1] + source_lines[doc.end_lineno:node.end_lineno]
    return textwrap.dedent("".join(lines)).rstrip() + "\n"


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name within the module, node) for module functions and methods of (nested) classes."""
    out: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((f"{prefix}{node.name}", node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return out


def pairs_from_sources(sources: Iterable[tuple[str, str]]) -> list[Pair]:
    """Every (docstring, function) pair of (module name, Python source) items, in their order; a source that does
    not parse is skipped, and duplicates of either side are removed (`unique_pairs`)."""
    pairs: list[Pair] = []
    for mod, source in sources:
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        for qual, node in _functions(tree):
            doc = ast.get_docstring(node, clean=True)
            if not doc:
                continue
            query = first_sentences(doc)
            if len(query.split()) < MIN_QUERY_WORDS:
                continue
            text = strip_docstring(lines, node)
            if text is None:
                continue
            pairs.append(Pair(doc_id=f"{mod}.{qual}" if mod else qual, module=mod, query=query, text=text))
    return unique_pairs(pairs)


def unique_pairs(pairs: list[Pair]) -> list[Pair]:
    """A query text shared by several functions (inherited boilerplate like "Return repr(self).") has no single
    right answer; a qualified name defined twice (if/else branches) is one document."""
    seen_q: dict[str, int] = {}
    for p in pairs:
        seen_q[p.query.lower()] = seen_q.get(p.query.lower(), 0) + 1
    seen_id: set[str] = set()
    unique = []
    for p in pairs:
        if seen_q[p.query.lower()] == 1 and p.doc_id not in seen_id:
            seen_id.add(p.doc_id)
            unique.append(p)
    return unique
