"""The definitions a task names: `open_url`, `Plot.layout`, `NoSuchCommand`, `convert_type()`.

Why: a task written by a person often says which function it is about, and the ranking that reads it as words can
miss that function. The sparse leg matches the name's terms in every chunk that uses it, and the dense leg reads
the task's meaning, so a one-line function named by the task competes with every caller of it. `locate` lifts
what the task names (search.engine.locate), by the order the names come in.

Only code-like words count: a word in backticks, a snake_case, dotted, camelCase or PascalCase word, or a word
called with `(`. A plain word ("add", "plot") is read as English: in the benchmark's commit messages
(docs/benchmarks/code-localisation.md) plain words that are also a definition's name ("Add", "Fix", "layout") are
verbs and nouns far more often than they are the function. A name defined in more than MAX_DEFINITIONS places of
the searched datasets (`__init__`, `convert`) says too little to lift any one of them; a qualifier narrows it
(`Plot.layout`: the definitions whose qualified name ends so, or `_termui_impl.open_url`: the one in that module).
"""
from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath

from search.engine.code_graph import DEF_FIELDS, FUNCTION_KINDS, Def
from search.engine.index_schema import IndexFilter
from search.models import Symbol

MAX_NAMES = 20       # the mentions read from one task, in order
MAX_DEFINITIONS = 3  # a name defined in more places than this lifts none of them
_URL = re.compile(r"\S+://\S+|\S+@\S+\.\S+")
_TICKED = re.compile(r"`([^`\n]{1,200})`")
_WORD = re.compile(r"(?<![\w.])([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(\s*\()?")
_CAMEL = re.compile(r"[a-z0-9][A-Z]")
# a dotted word ending so names a file (`_utils.py`), not a definition
_FILE_SUFFIXES = frozenset({"py", "pyi", "js", "ts", "tsx", "jsx", "go", "rs", "java", "rb", "c", "h", "cc", "cpp",
                            "hpp", "cs", "kt", "swift", "php", "md", "rst", "txt", "toml", "yaml", "yml", "json",
                            "cfg", "ini"})
_NOT_NAMES = frozenset(keyword.kwlist) | {"self", "cls", "True", "False", "None"}


@dataclass(frozen=True)
class Mention:
    """A name the task says, with what it was qualified by (`Plot` in `Plot.layout`; empty when bare)."""

    name: str
    qualifier: str = ""

    @property
    def said(self) -> str:
        """As the task wrote it: `Plot.layout`, `open_url`."""
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


def _code_like(word: str, *, called: bool) -> bool:
    if called or "_" in word or _CAMEL.search(word):
        return True
    return "." in word and all(len(seg) > 1 for seg in word.split("."))  # `e.g` is not a name


def _mention(word: str) -> Mention | None:
    parts = word.split(".")
    if len(parts) > 1 and parts[-1].lower() in _FILE_SUFFIXES:
        return None
    name = parts[-1]
    if name in _NOT_NAMES or len(name) < 2:
        return None
    return Mention(name=name, qualifier=".".join(parts[:-1]))


def mentioned_names(task: str) -> list[Mention]:
    """The code-like names in `task`, first said first, each once (at most MAX_NAMES)."""
    text = _URL.sub(" ", task)
    found: list[Mention] = []
    for ticked in _TICKED.findall(text):  # everything in backticks is code
        found += [m for w, _ in _WORD.findall(ticked) if (m := _mention(w))]
    for word, call in _WORD.findall(_TICKED.sub(" ", text)):
        if _code_like(word, called=bool(call)) and (m := _mention(word)):
            found.append(m)
    return list(dict.fromkeys(found))[:MAX_NAMES]


def _qualified(d: Def, qualifier: str) -> bool:
    """`Plot.layout` means a definition whose qualified name ends so, or one in a module named `Plot`."""
    if not qualifier:
        return False
    last = qualifier.rsplit(".", 1)[-1]
    return d.qualname.endswith(f"{last}.{d.name}") or PurePosixPath(d.path).stem == last


def named_definitions(*, flt: IndexFilter, mentions: Sequence[Mention]) -> list[tuple[Def, int]]:
    """(definition, the 1-based order of its mention) for the functions, methods and classes of the searched
    datasets that `mentions` name, the filter's repositories, languages and paths applied as to the chunks. A
    qualified mention keeps the definitions it qualifies where there are any; a name left with more than
    MAX_DEFINITIONS definitions is dropped."""
    if not mentions or not flt.dataset_ids or not flt.reads_code:
        return []  # a search of web pages or rulebooks names no code
    rows = flt.admit(Symbol.objects.filter(dataset_id__in=list(flt.dataset_ids),
                                           name__in=sorted({m.name for m in mentions}), kind__in=FUNCTION_KINDS),
                     repo="document__repo")
    by_name: dict[str, list[Def]] = {}
    for row in rows.order_by("path", "start_line").values_list(*DEF_FIELDS):
        d = Def(*row)
        by_name.setdefault(d.name, []).append(d)
    out: list[tuple[Def, int]] = []
    seen: set[int] = set()
    for order, m in enumerate(mentions, start=1):
        defs = by_name.get(m.name, [])
        narrowed = [d for d in defs if _qualified(d, m.qualifier)]
        defs = narrowed or defs
        if len(defs) > MAX_DEFINITIONS:
            continue
        for d in defs:
            if d.id not in seen:
                seen.add(d.id)
                out.append((d, order))
    return out
