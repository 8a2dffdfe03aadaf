"""Commit message -> changed source files: judged queries a repository's history writes for itself.

Why commits: a commit message says, in its author's words, what had to change, and the source files it modified
are where the change was. Unlike a docstring (search.quality.docstring_pairs), it names identifiers, error
messages and behaviour as a person asking about the code does; on encode/httpx the two kinds of query preferred
different fusions (docstrings the dense leg, commit messages the sparse one), so the label-free fusion choice
(search.quality.self_judged) asks both to agree.

Which commits (the rules of bench/bench_code_commits.py, which imports them from here, so there is one copy):
first-parent history, non-merge commits changing 1-MAX_SOURCE_FILES source files (a language the code chunker
parses; not tests, docs, examples, setup.py, ...), at least one of them modified or deleted, whose subject has
at least MIN_SUBJECT_WORDS words and is not a release/bump/typo/format/lint/merge/pre-commit message. The query
is the message with trailers (Signed-off-by, ...), `(#123)` refs and squash rulers removed; the gold is the
modified or deleted source files (added files did not exist for the searcher).

Why from the synced commit backwards: the dataset holds that commit's tree, so every query is about code the
searcher could find, and no later commit (a benchmark's test commit, say) takes part.

Pure (a dulwich repository in, pairs out): no Django.
"""
from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dulwich.diff_tree import CHANGE_ADD, CHANGE_DELETE, tree_changes
from dulwich.object_store import tree_lookup_path
from dulwich.objects import Commit

from search.engine.path_roles import is_aside
from search.ingest.code import MAX_FILE_BYTES, detect_lang
from search.ingest.symbols import extract
from search.ingest.syntax import GRAMMARS
from search.sources.git.objects import read_blob

MAX_SOURCE_FILES = 4
MIN_SUBJECT_WORDS = 4
MAX_PAIRS = 300  # recent history is enough for a confident choice; more only costs query time
MAX_WALK = 3000  # first-parent commits looked at, at most (most are skipped: docs, tests, bumps, big changes)
MAX_QUERY_CHARS = 2000  # the API's limit (search.engine.pipeline.MAX_Q)
PARSED_LANGS = frozenset({"python", *GRAMMARS})
SKIP_SUBJECT = re.compile(
    r"\b(release[sd]?|releasing|bump(s|ed|ing)?|typos?|format(s|ted|ting|ters?)?|reformat(s|ted|ting)?|lint(s|ed|ing|er)?"
    r"|merge[sd]?|merging|pre-commit|autoupdate|changelog)\b|^\s*v?\d+(\.\d+)+\s*$", re.I)
TRAILER = re.compile(r"^\s*(signed-off-by|co-authored-by|reviewed-by|acked-by|tested-by|reported-by|suggested-by"
                     r"|helped-by|cc|change-id)\s*:.*$", re.I | re.M)
PR_REF = re.compile(r"\s*\((?:(?:[\w.-]+/[\w.-]+)?#\d+[,\s]*)+\)|(?<![\w/])#\d+\b")
_RULER = re.compile(r"\s*-{3,}\s*")

GOLD_DEFINITION_KINDS = ("function", "method", "class")  # bench/bench_code_commits.py's gold functions, one rule

# why a commit was not taken (the keys the benchmark reports)
SKIPS = ("merge or root", "subject", "files", "no modified source file", "empty query")


def is_source(path: str, parsed_langs: Iterable[str] = PARSED_LANGS) -> bool:
    """A file of a parsed language that is not a test, doc, example, build or CI file."""
    return detect_lang(path) in set(parsed_langs) and not is_aside(path)


def clean_query(message: str) -> str:
    """The message as a query: trailers, PR refs and squash rulers out, runs of blank lines squeezed."""
    text = PR_REF.sub("", TRAILER.sub("", message))
    out: list[str] = []
    for ln in (ln.rstrip() for ln in text.splitlines() if not _RULER.fullmatch(ln)):
        if ln or (out and out[-1]):
            out.append(ln)
    q = "\n".join(out).strip()
    if len(q) > MAX_QUERY_CHARS:
        q = q[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]
    return q


def subject_of(message: str) -> str:
    """The first line, PR refs removed."""
    lines = message.strip().splitlines()
    return PR_REF.sub("", lines[0]).strip() if lines else ""


def subject_ok(message: str) -> bool:
    subject = message.strip().splitlines()[0] if message.strip() else ""
    return len(PR_REF.sub("", subject).split()) >= MIN_SUBJECT_WORDS and not SKIP_SUBJECT.search(subject)


@dataclass(frozen=True)
class Verdict:
    """A commit that qualifies: its query, gold (modified/deleted source files), added source files, and how many
    other files (tests, docs, config) it changed."""

    query: str
    subject: str
    gold: tuple[str, ...]
    added: tuple[str, ...]
    other: int


def judge(message: str, changes: Callable[[], list[tuple[str, str]]],
          parsed_langs: Iterable[str] = PARSED_LANGS) -> Verdict | str:
    """A non-merge commit's Verdict, or the SKIPS reason it is not taken. `changes`: -> [(status, path)], status
    "M", "A", "D" or "T" as `git diff-tree --no-renames --name-status` writes it; called only when the subject
    passes (reading a diff costs more than reading a message)."""
    if not subject_ok(message):
        return "subject"
    status = changes()
    langs = set(parsed_langs)
    source = [(s, p) for s, p in status if is_source(p, langs)]
    if not 1 <= len(source) <= MAX_SOURCE_FILES:
        return "files"
    gold = tuple(sorted(p for s, p in source if s[:1] in ("M", "D", "T")))
    if not gold:
        return "no modified source file"
    query = clean_query(message)
    if not query:
        return "empty query"
    return Verdict(query=query, subject=subject_of(message), gold=gold,
                   added=tuple(sorted(p for s, p in source if s[:1] not in ("M", "D", "T"))),
                   other=len(status) - len(source))


@dataclass(frozen=True)
class HistoryPair:
    sha: str
    query: str
    gold: tuple[str, ...]  # paths relative to the dataset's root (the source's subdir), that the dataset holds


def _status(store: object, parent: Commit, commit: Commit) -> list[tuple[str, str]]:
    out = []
    for change in tree_changes(store, parent.tree, commit.tree):  # no rename detection, as --no-renames
        if change.type == CHANGE_ADD:
            out.append(("A", change.new.path.decode(errors="replace")))
        elif change.type == CHANGE_DELETE:
            out.append(("D", change.old.path.decode(errors="replace")))
        else:
            out.append(("M", change.new.path.decode(errors="replace")))
    return out


@dataclass(frozen=True)
class Walk:
    """How far a history walk may go: first-parent commits looked at, and a time.monotonic() deadline. `merges`:
    a merge on the first-parent line counts as one change (its diff from the first parent, its message as
    `merge_message` reads it) instead of being skipped."""

    max_walk: int = MAX_WALK
    deadline: float | None = None
    merges: bool = False
    known: frozenset[str] = frozenset()  # commits already read: the walk ends at the first (skipped["known"] = 1)


MERGE_SUBJECT = re.compile(r"^\s*merge (pull request|branch|remote-tracking branch|tag)\b", re.I)


def merge_message(message: str) -> str:
    """A merge's message as a change's message: a generated subject ("Merge pull request #12 from a/b",
    "Merge branch 'x'") gives way to the body under it, where GitHub writes the pull request's title; a subject
    a person wrote (a pull request merged under its own title) stays.

    Why merges at all: a repository that merges pull requests has most of its first-parent history as merges
    (pallets/click: 818 of 1,378), and each is one change with one title, as a squashed commit is."""
    lines = message.strip().splitlines()
    if lines and MERGE_SUBJECT.match(lines[0]):
        return "\n".join(lines[1:]).strip()
    return message


def moved_path_resolver(current: Iterable[str]) -> Callable[[str], str | None]:
    """Historical path -> the path the synced tree holds that file at, or None: the path itself, else the one
    current path ending with it, else the one current path it ends with (a package moved under src/, or out of a
    folder). Only a tail of two components or more matches, and only a unique one.

    Why not Git's rename detection: it compares blob contents commit by commit, too slow for a whole history;
    a layout move keeps a path's tail, which is what this matches."""
    held = set(current)
    by_tail: dict[str, set[str]] = {}
    for p in held:
        parts = p.split("/")
        for i in range(1, len(parts) - 1):
            by_tail.setdefault("/".join(parts[i:]), set()).add(p)

    def resolve(path: str) -> str | None:
        if path in held:
            return path
        if len(hits := by_tail.get(path, set())) == 1:
            return next(iter(hits))
        parts = path.split("/")
        tails = ["/".join(parts[i:]) for i in range(1, len(parts) - 1)]
        found = [t for t in tails if t in held]
        return found[0] if len(found) == 1 else None

    return resolve


def history_pairs(store: object, head: str | bytes, *, subdir: str = "",
                  keep: Callable[[str], bool] | None = None, max_pairs: int = MAX_PAIRS,
                  skipped: dict[str, int] | None = None, walk: Walk = Walk()) -> list[HistoryPair]:
    """The newest `max_pairs` qualifying first-parent commits from `head` (inclusive), newest first, in a dulwich
    object store. Gold paths are taken relative to `subdir` (files outside it are not the dataset's) and kept
    only when `keep(path)` (the dataset holds the file); a commit left without gold is skipped, as is a query
    text an earlier (newer) commit already gave. `skipped` counts why commits were not taken. `walk`: at most
    max_walk commits, and none past the deadline, checked before each (skipped["time budget"] says so)."""
    skipped = skipped if skipped is not None else {}
    prefix = subdir.strip("/") + "/" if subdir.strip("/") else ""
    langs = PARSED_LANGS  # the languages whose files the index parses into symbols
    sha = head.encode() if isinstance(head, str) else head
    seen: set[str] = set()
    out: list[HistoryPair] = []
    deadline = walk.deadline
    for _ in range(walk.max_walk):
        if len(out) >= max_pairs:
            break
        if deadline is not None and time.monotonic() > deadline:
            skipped["time budget"] = skipped.get("time budget", 0) + 1
            break
        try:
            commit = store[sha]  # type: ignore[index]
        except KeyError:  # a shallow mirror: history ends here
            break
        if not isinstance(commit, Commit):
            break
        if commit.id.decode() in walk.known:
            skipped["known"] = 1
            break
        if not commit.parents or (len(commit.parents) > 1 and not walk.merges):
            skipped["merge or root"] = skipped.get("merge or root", 0) + 1
            if not commit.parents:
                break
            sha = commit.parents[0]
            continue
        try:
            parent = store[commit.parents[0]]  # type: ignore[index]
        except KeyError:
            break
        message = commit.message.decode("utf-8", errors="replace")
        if len(commit.parents) > 1:
            message = merge_message(message)
        verdict = judge(message, lambda c=commit, p=parent: _status(store, p, c), langs)
        sha = commit.parents[0]
        if isinstance(verdict, str):
            skipped[verdict] = skipped.get(verdict, 0) + 1
            continue
        gold = tuple(p[len(prefix):] for p in verdict.gold if p.startswith(prefix))
        gold = tuple(p for p in gold if keep is None or keep(p))
        if not gold:
            skipped["not in the dataset"] = skipped.get("not in the dataset", 0) + 1
            continue
        if verdict.query in seen:
            skipped["duplicate query"] = skipped.get("duplicate query", 0) + 1
            continue
        seen.add(verdict.query)
        out.append(HistoryPair(sha=commit.id.decode(), query=verdict.query, gold=gold))
    return out


# ------------------------------------------------------------------------------------------ function level
def changed_old_lines(old: str, new: str) -> list[tuple[int, int, bool]]:
    """Old-side line ranges a change touches, 1-based: (start, end, False) for lines removed or replaced, and
    (after, after, True) for a pure insertion after old line `after` (`git diff -U0`'s hunks, as the commit
    benchmark reads them)."""
    a, b = old.split("\n"), new.split("\n")
    # The common head and tail first, as git does: a change touches a few lines of a long file, and the matcher's
    # longest-match search is quadratic in what it is given (it was half the cost of a history's first memory).
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
        hi += 1
    matcher = difflib.SequenceMatcher(a=a[lo:len(a) - hi], b=b[lo:len(b) - hi], autojunk=False)
    out = []
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            out.append((lo + i1 + 1, lo + i2, False))
        elif tag == "insert":
            out.append((lo + i1, lo + i1, True))
    return out


def changed_definitions(*, path: str, old: str, new: str) -> list[str]:
    """Qualified names of the innermost functions, methods or classes of the old text that the change from `old`
    to `new` touches, in file order: for each changed old line, the smallest definition holding it (a pure
    insertion: the smallest that strictly contains it, lines before and after inside). Innermost, not every
    enclosing one: a class around a changed method would otherwise be gold for every change in it."""
    defs = [d for d in extract(path=path, text=old, lang=detect_lang(path) or "").definitions
            if d.kind in GOLD_DEFINITION_KINDS]
    if not defs:
        return []
    found: dict[str, int] = {}
    for start, end, insertion in changed_old_lines(old, new):
        for line in [start] if insertion else range(start, end + 1):
            holders = [d for d in defs if d.start_line <= line and d.end_line >= line + 1] if insertion else \
                [d for d in defs if d.start_line <= line <= d.end_line]
            if holders:
                inner = min(holders, key=lambda d: (d.end_line - d.start_line, -d.start_line))
                found.setdefault(inner.qualname, inner.start_line)
    return sorted(found, key=found.__getitem__)


def blob_text(store: Any, tree: bytes, path: str) -> str | None:
    """The file's text in `tree`, or None (absent, not a file, or larger than the ingest reads)."""
    try:
        _, sha = tree_lookup_path(store.__getitem__, tree, path.encode())
    except (KeyError, NotADirectoryError):
        return None
    data, _ = read_blob(store, sha, limit=MAX_FILE_BYTES)
    return data.decode("utf-8", errors="replace") if data is not None else None


def commit_definitions(store: Any, sha: str, files: Iterable[str], *, subdir: str = "") -> list[tuple[str, str]]:
    """(path, qualname) of the definitions the commit changed in `files` (paths relative to `subdir`, as
    HistoryPair.gold), against its first parent: changed_definitions on each file's two versions. A file the
    parent lacks (or too large to read) names none."""
    prefix = subdir.strip("/") + "/" if subdir.strip("/") else ""
    commit = store[sha.encode()]
    if not isinstance(commit, Commit) or not commit.parents:
        return []
    parent = store[commit.parents[0]]
    out = []
    for path in files:
        old = blob_text(store, parent.tree, prefix + path)
        if old is None:
            continue
        new = blob_text(store, commit.tree, prefix + path) or ""
        out += [(path, q) for q in changed_definitions(path=path, old=old, new=new)]
    return out
