"""Deterministic micro (per chunk) and macro (per file) summaries.

Why deterministic: they feed the sparse leg, the reranker and the context
pack, so they must be reproducible and free; LLM summaries are an optional
extra, never a dependency.
"""
from __future__ import annotations

import ast
import re

MAX_MICRO = 300
MAX_MACRO = 1200
_SENTENCE = re.compile(r"(.+?[.!?])(\s|$)", re.S)
_SYMBOL = re.compile(
    r"^\s*(?:export\s+)?(?:default\s+)?(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:static\s+)?"
    r"(?:def|class|function|func|fn|interface|struct|enum|trait|type|impl|module|object)\s+([A-Za-z_][\w$]*)",
    re.M,
)


def first_line(text: str | None) -> str:
    for line in (text or "").strip().splitlines():
        if line.strip():
            return line.strip()
    return ""


def first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    m = _SENTENCE.match(flat)
    return (m.group(1) if m else flat)[:MAX_MICRO]


def python_signature(lines: list[str], node: ast.AST) -> str:
    """The def/class header up to its colon (decorators excluded), whitespace-collapsed."""
    start = node.lineno - 1
    out = []
    for line in lines[start:start + 12]:
        code = re.sub(r"\s+#.*$", "", line.rstrip())
        out.append(code.strip())
        if code.endswith(":"):
            break
    return " ".join(out)[:MAX_MICRO]


def python_micro(lines: list[str], node: ast.AST, *, qualname: str) -> str:
    sig = python_signature(lines, node)
    doc = first_line(ast.get_docstring(node)) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                    ast.ClassDef)) else ""
    sig = sig.replace(f"def {node.name}", f"def {qualname}", 1) if qualname != getattr(node, "name", "") else sig
    return f"{sig} — {doc}"[:MAX_MICRO] if doc else sig


def symbols_macro(*, doc: str, symbols: list[str]) -> str:
    """A file's macro summary: its leading doc (module docstring or header comment) plus its top-level symbols."""
    parts = [" ".join(doc.split())] if doc.strip() else []
    if symbols:
        parts.append("Symbols: " + ", ".join(symbols))
    return "\n".join(parts)[:MAX_MACRO]


def python_macro(tree: ast.Module) -> str:
    doc = (ast.get_docstring(tree) or "").strip().split("\n\n")[0]
    symbols = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return symbols_macro(doc=doc, symbols=symbols)


def generic_micro(text: str, *, symbol: str = "") -> str:
    head = first_line(text)[:200]
    return f"{symbol}: {head}"[:MAX_MICRO] if symbol and symbol not in head else head


def generic_macro(text: str) -> str:
    comments = []
    for line in text.splitlines()[:30]:
        s = line.strip()
        if s.startswith(("//", "#", "/*", "*", "--", "<!--")) and not s.startswith("#!"):
            comments.append(s.lstrip("/#*-!< ").strip())
        elif s:
            break
    symbols = list(dict.fromkeys(_SYMBOL.findall(text)))[:40]
    return symbols_macro(doc=" ".join(c for c in comments if c), symbols=symbols)


def generic_symbol(text: str) -> str:
    m = _SYMBOL.search(text)
    return m.group(1) if m else ""


def heading_micro(heading_path: list[str], text: str) -> str:
    heading = " > ".join(heading_path)
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    sentence = first_sentence(body) if body.strip() else ""
    return (f"{heading}: {sentence}" if heading and sentence else heading or sentence)[:MAX_MICRO]
