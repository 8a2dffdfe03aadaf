"""Syntax-aware chunks for non-Python code, from tree-sitter grammars shipped as wheels.

Why tree-sitter: a brace/indent heuristic cuts a JavaScript class or a Rust impl at the wrong line as soon as
the code is formatted unusually; the grammar knows where each function, class and method starts and ends, so
spans are exact and a chunk is one unit a developer would ask about. Each grammar wheel bundles its compiled
parser (nothing is downloaded); a language without a wheel, or a file the grammar cannot parse cleanly, falls
back to code.chunk_generic.
"""
from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from search.ingest import summaries
from search.ingest.base import ChunkDraft, exact_span, line_windows

if TYPE_CHECKING:
    from tree_sitter import Node, Parser

# lang (as code.detect_lang names it) -> (module, function returning the language pointer)
GRAMMARS: dict[str, tuple[str, str]] = {
    "javascript": ("tree_sitter_javascript", "language"),
    "typescript": ("tree_sitter_typescript", "language_typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx"),
    "go": ("tree_sitter_go", "language"),
    "rust": ("tree_sitter_rust", "language"),
    "java": ("tree_sitter_java", "language"),
    "c": ("tree_sitter_c", "language"),
    "cpp": ("tree_sitter_cpp", "language"),
    "ruby": ("tree_sitter_ruby", "language"),
    "csharp": ("tree_sitter_c_sharp", "language"),
    "php": ("tree_sitter_php", "language_php"),
}
# a node whose type matches is a unit of its own; anything else (imports, statements) is grouped
_DEFINITION = re.compile(r"function|method|class|interface|struct|enum|trait|impl|module|namespace|type_decl|"
                         r"type_alias|constructor|macro|record|union|object_declaration|singleton")
_NAME_TYPES = {"identifier", "type_identifier", "field_identifier", "property_identifier", "constant", "name",
               "namespace_identifier"}
_BODY_TYPES = {"class_body", "declaration_list", "field_declaration_list", "interface_body", "enum_body",
               "body_statement", "compound_statement", "statement_block", "object_type", "block"}


@dataclass
class _Unit:
    start: int  # 1-based, inclusive
    end: int
    symbol: str
    definition: bool
    doc: str = ""  # the attached comment, markers removed
    top: bool = False  # declared at file level (the macro summary lists these)


@cache
def parser_for(lang: str) -> Parser | None:
    """A parser for lang, or None when no grammar wheel is installed for it."""
    spec = GRAMMARS.get(lang)
    if not spec:
        return None
    try:
        import tree_sitter  # noqa: PLC0415 - heavy: grammars load only for a file in their language

        module = importlib.import_module(spec[0])
        return tree_sitter.Parser(tree_sitter.Language(getattr(module, spec[1])()))
    except (ImportError, AttributeError, ValueError):
        return None


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _name(node: Node) -> str:
    """The declared name: the grammar's `name` field where it has one, else the first identifier near the top."""
    for field in ("name", "declaration", "declarator", "type"):
        child = node.child_by_field_name(field)
        if child is None:
            continue
        if field == "name" or child.type in _NAME_TYPES:
            return _text(child)
        inner = _name(child)
        if inner:
            return inner
    queue = list(node.named_children)
    for _ in range(40):
        if not queue:
            break
        child = queue.pop(0)
        if child.start_point.row != node.start_point.row and child.type not in ("variable_declarator",):
            continue
        if child.type in _NAME_TYPES:
            return _text(child)
        queue.extend(child.named_children)
    return ""


def _walk(node: Node) -> Iterator[Node]:
    stack = [node]
    while stack:
        cur = stack.pop()
        yield cur
        stack.extend(reversed(cur.named_children))


def _is_definition(node: Node) -> bool:
    if _DEFINITION.search(node.type):
        return True
    if node.type in ("export_statement", "decorated_definition", "attribute_item", "template_declaration"):
        return any(_is_definition(c) for c in node.named_children)
    if node.type in ("lexical_declaration", "variable_declaration"):  # const f = () => {...}
        return any(d.child_by_field_name("value") is not None and
                   re.search(r"function|arrow|class", d.child_by_field_name("value").type)
                   for d in node.named_children if d.type == "variable_declarator")
    return False


_COMMENT_MARK = re.compile(r"^\s*(/\*+!?|\*+/?|//+!?|#+|--)\s?|\s*\*+/\s*$", re.M)


def _comment_text(raw: str) -> str:
    """Comment markers (/** */ // # -- and leading *) removed, lines kept."""
    return "\n".join(line.strip() for line in _COMMENT_MARK.sub("", raw).splitlines() if line.strip())


def _last_line(node: Node) -> int:
    end = node.end_point.row + 1
    return end - 1 if node.end_point.column == 0 and end > node.start_point.row + 1 else end


def _body(node: Node) -> Node | None:
    """The member list of a class-like node (searched through export wrappers), or None."""
    body = node.child_by_field_name("body")
    if body is not None and body.type in _BODY_TYPES:
        return body
    for child in node.named_children:
        if child.type in _BODY_TYPES and child.type != "compound_statement":
            return child
        if child.type in ("class_declaration", "class", "abstract_class_declaration", "interface_declaration"):
            return _body(child)
    return None


def _units(container: Node, *, prefix: str, cap: int) -> list[_Unit]:
    """Top-level units of a container; a class-like unit over `cap` lines is split into header + members."""
    out: list[_Unit] = []
    pending_doc: list = []
    for node in container.named_children:
        if "comment" in node.type:
            if pending_doc and node.start_point.row > pending_doc[-1].end_point.row + 1:
                out.append(_comment_unit(pending_doc))
                pending_doc = []
            pending_doc.append(node)
            continue
        start, end = node.start_point.row + 1, _last_line(node)
        doc = ""
        if pending_doc:
            if pending_doc[-1].end_point.row + 1 >= node.start_point.row:  # touching: the node's doc comment
                start = pending_doc[0].start_point.row + 1
                doc = _comment_text("\n".join(_text(c) for c in pending_doc))
            else:
                out.append(_comment_unit(pending_doc))
            pending_doc = []
        definition = _is_definition(node)
        name = _name(node) if definition else ""
        receiver = node.child_by_field_name("receiver") if node.type == "method_declaration" else None
        if receiver is not None and name:  # Go: func (w *Wallet) Deduct -> Wallet.Deduct
            recv = next((_text(n) for n in _walk(receiver) if n.type == "type_identifier"), "")
            name = f"{recv}.{name}" if recv else name
        symbol = f"{prefix}{name}" if name else (prefix.rstrip(".") or "")
        body = _body(node) if definition and end - start + 1 > cap else None
        members = [c for c in body.named_children if "comment" not in c.type] if body is not None else []
        if members:
            first = min(c.start_point.row for c in body.named_children) + 1
            out.append(_Unit(start, max(start, first - 1), symbol, True, doc, top=not prefix))
            members_out = _units(body, prefix=f"{symbol}.", cap=cap)
            # the closing line(s) after the last member ('}' / 'end') join it: not worth a chunk of their own,
            # but every line of the file must be indexed, so the file's text can be rebuilt from its chunks
            # (the symbol graph and grep read it back: search.ingest.symbols.indexed_text)
            if members_out:
                members_out[-1].end = max(members_out[-1].end, end)
            out.extend(members_out)
        else:
            out.append(_Unit(start, end, symbol, definition, doc, top=not prefix))
    if pending_doc:
        out.append(_comment_unit(pending_doc))
    return out


def _comment_unit(nodes: list) -> _Unit:
    return _Unit(nodes[0].start_point.row + 1, _last_line(nodes[-1]), "", False,
                 _comment_text("\n".join(_text(c) for c in nodes)))


def chunk_syntax(text: str, *, lang: str, cap: int) -> tuple[list[ChunkDraft], str] | None:
    """Definition chunks (with their doc comments) + grouped other statements, or None to fall back."""
    parser = parser_for(lang)
    if parser is None:
        return None
    tree = parser.parse(text.encode("utf-8"))
    root = tree.root_node
    if root.has_error and sum(1 for c in root.named_children if c.type == "ERROR" or c.has_error) > 2:
        return None  # the grammar disagrees with the file (another dialect, templates): heuristics do better
    lines = text.split("\n")
    units = _units(root, prefix="", cap=cap)
    # group runs of non-definitions (imports, statements, loose comments) up to the cap
    grouped: list[_Unit] = []
    for u in units:
        last = grouped[-1] if grouped else None
        # statements join the previous run, or the class header they follow (fields after `class X {`)
        if not u.definition and last is not None and last.symbol == u.symbol and u.end - last.start + 1 <= cap:
            last.end = u.end
        else:
            grouped.append(_Unit(u.start, u.end, u.symbol, u.definition, u.doc, u.top))
    chunks: list[ChunkDraft] = []
    for u in grouped:
        for ws, we in line_windows(u.start, u.end, cap=cap):
            s, e, body = exact_span(lines, ws, we)
            if not body.strip():
                continue
            symbol = u.symbol or ("<module>" if not u.definition else "")
            signature = next((ln.strip() for ln in lines[s - 1:e]
                              if ln.strip() and not re.match(r"\s*(/\*|\*|//|#|--)", ln)), "")[:200]
            doc = summaries.first_line(u.doc)
            if not u.definition:
                micro = f"module header — {doc}" if doc else summaries.first_line(body)[:200]
            else:
                micro = f"{signature} — {doc}" if doc else summaries.generic_micro(body, symbol=symbol)
            if (ws, we) != (u.start, u.end):
                micro += f" (lines {s}-{e})"
            chunks.append(ChunkDraft(text=body, start_line=s, end_line=e, kind="code", symbol=symbol,
                                     micro_summary=micro[:summaries.MAX_MICRO]))
    first = units[0] if units else None
    doc = first.doc if first is not None and not first.definition and not first.symbol else ""
    names = [u.symbol for u in units if u.definition and u.symbol and u.top]
    return chunks, summaries.symbols_macro(doc=doc, symbols=list(dict.fromkeys(names)))
