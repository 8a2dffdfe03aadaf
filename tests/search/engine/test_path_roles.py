"""search.engine.path_roles: one rule for what a source file is, shared by the benchmark's gold and locate."""
from __future__ import annotations

import pytest

from search.engine.path_roles import is_aside
from search.sources.git.history import is_source


@pytest.mark.parametrize("path", ["httpx/_client.py", "networkx/algorithms/dominance.py", "web/routes.js",
                                  "src/click/core.py", "pkg/testing_utils.py"])
def test_code_outside_tests_docs_and_examples_is_not_aside(path):
    assert not is_aside(path)


@pytest.mark.parametrize("path", ["tests/test_client.py", "networkx/algorithms/tests/test_dominance.py",
                                  "httpx/test_x.py", "pkg/client_test.py", "docs/conf.py", "setup.py",
                                  "examples/termui/termui.py", "CHANGES.rst", "CHANGELOG.md", "README.md",
                                  "doc/release/release_2.5.rst", "Docs/Intro.TXT"])
def test_tests_docs_examples_and_prose_are_aside(path):
    assert is_aside(path)


def test_the_benchmarks_gold_and_locate_read_source_files_the_same_way():
    for path in ("httpx/_client.py", "tests/test_client.py", "docs/conf.py", "src/click/core.py", "setup.py"):
        assert is_source(path) is not is_aside(path)
    assert not is_source("NOTES.md") and is_aside("NOTES.md")  # prose is neither: not parsed, and aside
