"""Which paths of a code tree hold the code a change edits, and which are its tests, docs, examples and tooling.

Why one place: the commit benchmark's gold (search.sources.git.history.is_source), the history miner's commit
filter and `locate`'s order (source files before the rest: search.engine.locate) must agree on what a source file
is, or `locate` would be judged by one rule and rank by another. The names are conventions, not proof: a package
named `docs` would read as docs, and an operator filters by path where that matters.
"""
from __future__ import annotations

NON_SOURCE_DIRS = frozenset({"test", "tests", "testing", "doc", "docs", "example", "examples", "benchmark",
                             "benchmarks", "bench", "scripts", ".github", "ci"})
NON_SOURCE_FILES = frozenset({"conftest.py", "setup.py", "noxfile.py", "tasks.py", "conf.py", "fabfile.py"})
PROSE_SUFFIXES = (".md", ".rst", ".txt", ".adoc")  # changelogs, READMEs, release notes


def is_aside(path: str) -> bool:
    """A test, doc, example, benchmark, build or CI file, or prose (a changelog, a README): not where the code a
    task changes lives."""
    parts = path.lower().split("/")
    name = parts[-1]
    if any(p in NON_SOURCE_DIRS for p in parts[:-1]) or name in NON_SOURCE_FILES or name.endswith(PROSE_SUFFIXES):
        return True
    return name.startswith("test_") or name.endswith(("_test.py", "_tests.py")) or name == "tests.py"
