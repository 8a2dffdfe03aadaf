"""Code sources: walk a directory or git checkout and chunk each file into exact line spans.

Why AST for Python: a function or method is the unit a developer asks about,
and the AST gives exact 1-based line numbers (decorators included). JavaScript,
TypeScript, Go, Rust, Java, C, C++, Ruby, C# and PHP go through their tree-sitter
grammars (search/ingest/syntax.py) for the same reason. Other languages use
top-level indentation/brace blocks with a line cap and a small overlap.
"""
from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import pathspec

from search.ingest import summaries, symbols, syntax
from search.ingest.base import MAX_CHUNK_LINES, ChunkDraft, DocumentDraft
from search.ingest.base import exact_span as _span
from search.ingest.base import line_windows as _windows

MAX_FILE_BYTES = 1_000_000
MAX_HEADER_LINES = 60
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "vendor", "vendors", "third_party", "third-party", ".venv", "venv",
             "env", "__pycache__", "site-packages", "dist", "build", ".tox", ".mypy_cache", ".pytest_cache",
             ".ruff_cache", "bower_components", ".idea", ".vscode", "target", ".next", "var"}
LANGS = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".tsx": "typescript", ".go": "go", ".rs": "rust", ".java": "java",
    ".kt": "kotlin", ".scala": "scala", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".hpp": "cpp",
    ".cs": "csharp", ".rb": "ruby", ".php": "php", ".swift": "swift", ".sh": "shell", ".bash": "shell",
    ".sql": "sql", ".html": "html", ".css": "css", ".scss": "css", ".md": "markdown", ".rst": "rst",
    ".txt": "text", ".toml": "toml", ".yaml": "yaml", ".yml": "yaml", ".json": "json", ".ini": "ini",
    ".cfg": "ini", ".lua": "lua", ".r": "r", ".jl": "julia", ".ex": "elixir", ".exs": "elixir", ".erl": "erlang",
    ".hs": "haskell", ".ml": "ocaml", ".vue": "vue", ".svelte": "svelte", ".dart": "dart",
}
NAMED_FILES = {"Makefile": "make", "Dockerfile": "docker", "Procfile": "text"}


def detect_lang(path: str) -> str | None:
    name = os.path.basename(path)
    if name in NAMED_FILES:
        return NAMED_FILES[name]
    return LANGS.get(os.path.splitext(name)[1].lower())


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gitignore_spec_from(files: Iterable[tuple[str, str]]) -> pathspec.PathSpec:
    """The ignore rules of a tree from its .gitignore files: (root-relative posix path of the file, its text).

    Why from text, not a directory: a git source reads the .gitignore blobs of a commit without a checkout, and
    must ignore exactly what the folder walker ignores in a checkout of the same tree. Files under SKIP_DIRS
    are not read; the rest apply in path order (a later, deeper rule wins), as the walker always did."""
    lines: list[str] = []
    for gi_path, text in sorted(files, key=lambda item: tuple(item[0].split("/"))):
        parts = gi_path.split("/")
        if any(part in SKIP_DIRS for part in parts[:-1]):
            continue
        rel_dir = "/".join(parts[:-1]) or "."
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            if rel_dir != ".":
                neg = line.startswith("!")
                body = line[1:] if neg else line
                anchored = "/" in body.rstrip("/")
                body = f"{rel_dir}/{body.lstrip('/')}" if anchored else f"{rel_dir}/**/{body}"
                line = ("!" if neg else "") + body
            lines.append(line)
    return pathspec.GitIgnoreSpec.from_lines(lines)


def _gitignore_spec(root: Path) -> pathspec.PathSpec:
    return gitignore_spec_from((gi.relative_to(root).as_posix(), gi.read_text(encoding="utf-8", errors="replace"))
                               for gi in root.rglob(".gitignore"))


def skip_dir(name: str, rel: str, spec: pathspec.PathSpec) -> bool:
    """Whether the walker prunes this directory (`rel`: its root-relative posix path): vendored, hidden, ignored."""
    return name in SKIP_DIRS or name.startswith(".") or spec.match_file(rel + "/")


# `also` for a walk that takes every file whatever its name (an upload: the bytes decide, and what no reader takes is
# reported)
ANY_SUFFIX = frozenset({"*"})


def wanted_file(rel: str, spec: pathspec.PathSpec, *, also: frozenset[str] = frozenset()) -> bool:
    """Whether a file (not a symlink) in a kept directory is a candidate: not ignored, in a language we chunk or
    with a suffix in `also` (the document formats' names: search.ingest.formats.registry.document_suffixes; or
    ANY_SUFFIX)."""
    return not spec.match_file(rel) and (detect_lang(rel) is not None or "*" in also
                                         or os.path.splitext(rel)[1].lower() in also)


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:8192]


def is_minified(path: str, text: str) -> bool:
    if ".min." in os.path.basename(path):
        return True
    lines = text.splitlines() or [""]
    longest = max(len(line) for line in lines)
    return longest > 2000 or (len(text) > 5000 and len(text) / len(lines) > 300)


def walk(root: Path, *, max_bytes: int = MAX_FILE_BYTES, also: frozenset[str] = frozenset(),
         limit: Callable[[str], int] | None = None) -> Iterator[tuple[str, Path, str]]:
    """(repo-relative posix path, absolute path, skip reason or '') for every candidate file, sorted. `also`:
    suffixes taken beyond the languages (documents, read by their bytes); `limit(rel)`: a file's most bytes
    (search.ingest.formats.registry.max_bytes), else `max_bytes`."""
    root = root.resolve()
    spec = _gitignore_spec(root)
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        dirnames[:] = [d for d in sorted(dirnames) if not skip_dir(d, d if rel_dir == "." else f"{rel_dir}/{d}", spec)]
        for name in sorted(filenames):
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if not wanted_file(rel, spec, also=also):
                continue
            abs_path = Path(dirpath) / name
            if abs_path.is_symlink() or not abs_path.is_file():
                continue
            reason = "oversized" if abs_path.stat().st_size > (limit(rel) if limit else max_bytes) else ""
            yield rel, abs_path, reason


def chunk_python(text: str, *, path: str, tree: ast.Module | None = None) -> tuple[list[ChunkDraft], str] | None:
    """AST chunks (module header, classes, functions, methods) + macro summary; None on a syntax error.
    `tree`: the text's tree where the caller parsed it already (symbols.python_tree)."""
    tree = tree if tree is not None else symbols.python_tree(text)
    if tree is None:
        return None
    lines = text.split("\n")
    chunks: list[ChunkDraft] = []
    covered: set[int] = set()

    def node_start(node: ast.AST) -> int:
        decos = getattr(node, "decorator_list", [])
        return min([node.lineno] + [d.lineno for d in decos])

    def add(start: int, end: int, *, symbol: str, micro: str) -> None:
        for ws, we in _windows(start, end):
            s, e, body = _span(lines, ws, we)
            if not body.strip():
                continue
            part = "" if (ws, we) == (start, end) else f" (lines {s}-{e})"
            chunks.append(ChunkDraft(text=body, start_line=s, end_line=e, kind="code", symbol=symbol,
                                     micro_summary=micro + part))
            covered.update(range(s, e + 1))

    defs = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    first_def = min((node_start(n) for n in defs), default=len(lines) + 1)
    # path-free like every embed input (base.embed_input): a renamed file must hit the embedding cache
    module_doc = summaries.first_line(ast.get_docstring(tree))
    if first_def > 1:
        header_end = min(first_def - 1, MAX_HEADER_LINES)
        s, e, body = _span(lines, 1, header_end)
        if body.strip():
            chunks.append(ChunkDraft(text=body, start_line=s, end_line=e, kind="code", symbol="<module>",
                                     micro_summary="module header" + (f" — {module_doc}" if module_doc else "")))
            covered.update(range(s, e + 1))
    for node in defs:
        start, end = node_start(node), node.end_lineno or node.lineno
        if isinstance(node, ast.ClassDef):
            methods = [m for m in node.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            class_end = (node_start(methods[0]) - 1) if methods else end
            add(start, max(start, class_end), symbol=node.name,
                micro=summaries.python_micro(lines, node, qualname=node.name))
            for m in methods:
                qual = f"{node.name}.{m.name}"
                add(node_start(m), m.end_lineno or m.lineno, symbol=qual,
                    micro=summaries.python_micro(lines, m, qualname=qual))
            # class-level statements between/after methods
            _gaps(lines, start, end, covered, chunks, symbol=node.name)
        else:
            add(start, end, symbol=node.name, micro=summaries.python_micro(lines, node, qualname=node.name))
    _gaps(lines, 1, len(lines), covered, chunks, symbol="<module>")
    chunks.sort(key=lambda c: (c.start_line, c.end_line))
    return chunks, summaries.python_macro(tree)


def _gaps(lines: list[str], start: int, end: int, covered: set[int], chunks: list[ChunkDraft], *, symbol: str) -> None:
    """Module- or class-level statements not inside any def still deserve a chunk."""
    run: list[int] = []
    for n in range(start, end + 2):
        inside = n <= end and n not in covered
        if inside:
            run.append(n)
            continue
        if run:
            for ws, we in _windows(run[0], run[-1]):
                s, e, body = _span(lines, ws, we)
                if body.strip() and any(not lines[i - 1].lstrip().startswith("#") for i in range(s, e + 1)
                                        if lines[i - 1].strip()):
                    chunks.append(ChunkDraft(text=body, start_line=s, end_line=e, kind="code", symbol=symbol,
                                             micro_summary=summaries.generic_micro(body, symbol=symbol)))
                    covered.update(range(s, e + 1))
            run = []


def chunk_generic(text: str) -> tuple[list[ChunkDraft], str]:
    """Top-level blocks (a non-indented line that is not a closing bracket starts one), capped with overlap."""
    lines = text.split("\n")
    boundaries = [1]
    for i, line in enumerate(lines, start=1):
        if i > 1 and line and not line[0].isspace() and not line.startswith(("}", ")", "]", "end")) \
                and not lines[i - 2].rstrip().endswith((",", "\\", "(", "{", "[")):
            prev = lines[i - 2].strip()
            if not prev or prev.startswith(("}", "//", "#", "/*", "*", "--")) or prev.endswith((";", "}")):
                boundaries.append(i)
    boundaries.append(len(lines) + 1)
    blocks = [(boundaries[k], boundaries[k + 1] - 1) for k in range(len(boundaries) - 1)]
    # pack small blocks together up to the cap; split big ones into overlapping windows
    packed: list[tuple[int, int]] = []
    cur: tuple[int, int] | None = None
    for s, e in blocks:
        if cur and e - cur[0] + 1 <= MAX_CHUNK_LINES:
            cur = (cur[0], e)
        else:
            if cur:
                packed.append(cur)
            cur = (s, e)
    if cur:
        packed.append(cur)
    chunks = []
    for s0, e0 in packed:
        for ws, we in _windows(s0, e0):
            s, e, body = _span(lines, ws, we)
            if not body.strip():
                continue
            symbol = summaries.generic_symbol(body)
            chunks.append(ChunkDraft(text=body, start_line=s, end_line=e, kind="code", symbol=symbol,
                                     micro_summary=summaries.generic_micro(body, symbol=symbol)))
    return chunks, summaries.generic_macro(text)


def chunk_file(*, path: str, text: str, lang: str, tree: ast.Module | None = None) -> tuple[list[ChunkDraft], str]:
    """Python by its AST, languages with a tree-sitter grammar wheel by their syntax tree, the rest by blocks.
    `tree`: a Python file's tree where the caller parsed it already."""
    if lang == "python":
        result = chunk_python(text, path=path, tree=tree)
    else:
        grammar = "tsx" if path.lower().endswith(".tsx") else lang
        result = syntax.chunk_syntax(text, lang=grammar, cap=MAX_CHUNK_LINES)
    return result if result is not None else chunk_generic(text)


def read_code_document(*, root: Path, rel: str, abs_path: Path, repo: str) -> tuple[DocumentDraft | None, str]:
    """A DocumentDraft for one file, or (None, skip reason)."""
    return code_document(rel=rel, data=abs_path.read_bytes(), repo=repo)


def code_document(*, rel: str, data: bytes, repo: str) -> tuple[DocumentDraft | None, str]:
    """A DocumentDraft from a file's bytes, or (None, skip reason). A git source reads blobs, not files."""
    if is_binary(data):
        return None, "binary"
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n")
    lang = detect_lang(rel) or ""
    if is_minified(rel, text):
        return None, "minified"
    tree = symbols.python_tree(text) if lang == "python" else None  # one parse for the chunks and the facts
    chunks, macro = chunk_file(path=rel, text=text, lang=lang, tree=tree)
    for c in chunks:
        c.meta = {**c.meta}
    facts = symbols.facts_of_chunks(path=rel, lang=lang, text=text, tree=tree,
                                    spans=[(c.start_line, c.end_line, c.text) for c in chunks])
    return DocumentDraft(path=rel, repo=repo, lang=lang, content_hash=content_hash(data), chunks=chunks,
                         macro_summary=macro, title=os.path.basename(rel), facts=facts), ""
