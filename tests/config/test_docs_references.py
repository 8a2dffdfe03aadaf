"""The docs name only what exists: every module, dotted name and file path that README.md or any page under docs/
quotes in backticks resolves, so a move or a rename that forgets the page fails here, not in a reader's hands.

What is checked (everything else in backticks is code, a URL, an option or a value, and is left alone):
- a dotted name whose first part is one of the project's packages (`search.engine.applier`,
  `search.tasks.run_ingest_job`) or another importable top-level module not listed in EXTERNAL: its longest
  prefix that is a module is found (importlib.util.find_spec) and the rest are attributes of it;
- a path whose first part is one of the repository's folders (`search/engine/pipeline.py`, `templates/pages/`),
  with `::name` after a test file meaning a function of that file, and `<app>/<NNNN>` meaning that migration.
Placeholders (`<area>`, `{slug}`, `*`) are templates, not paths, and are skipped.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md")))
PACKAGES = {"config", "inference", "accounts", "projects", "credits", "search", "people", "console", "bench",
            "tests"}
# Quoted on purpose, not resolved here: other projects' names (importing them needs their own set-up) and
# the runtime folder, which exists only once the platform has run.
EXTERNAL = {"django", "rest_framework", "drf_spectacular", "celery", "torch", "sentence_transformers", "ranx",
            "qdrant_client", "mcp"}
RUNTIME_DIRS = {"var"}
TOP_DIRS = {p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".")} - RUNTIME_DIRS

BACKTICKED = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
FILE_SUFFIX = re.compile(r"\.(py|md|toml|txt|json|jsonl|tsv|html|cfg|ini|yml|yaml|sh)$")
MIGRATION = re.compile(r"([a-z_]+)/(\d{4})")


def quoted(doc: str) -> list[str]:
    return BACKTICKED.findall((ROOT / doc).read_text(encoding="utf-8"))


def dotted_problem(name: str) -> str | None:
    """None when `name` resolves; else what is missing. Names that are not module references return None."""
    if FILE_SUFFIX.search(name):
        return None  # a bare file name (`manage.py`, `apps.py`): no folder to find it in
    parts = name.split(".")
    if parts[0] in EXTERNAL or (parts[0] not in PACKAGES and importlib.util.find_spec(parts[0]) is None):
        return None  # another project's name, or an expression (`request.META`, `self.x`)
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module_name)
        except ModuleNotFoundError:
            found = None
        if found is None:
            continue
        target: object = importlib.import_module(module_name)
        for attr in parts[cut:]:
            if not hasattr(target, attr):
                return f"{module_name} has no {'.'.join(parts[cut:])}"
            target = getattr(target, attr)
        return None
    return "no such module"


def path_problem(text: str) -> str | None:
    """None when the quoted path exists (or is not a repository path); else what is missing."""
    if any(c in text for c in "<>{}*@~, ") or "://" in text or text.startswith(("/", ".")):
        return None
    path, _, function = text.partition("::")
    if path.split("/", 1)[0] not in TOP_DIRS:
        return None  # a URL tail (`code/grep`), an example (`a/b/c.py`) or a folder of someone's content
    migration = MIGRATION.fullmatch(path)
    if migration:
        app, number = migration.groups()
        return None if list((ROOT / app / "migrations").glob(f"{number}_*.py")) else "no such migration"
    if not (ROOT / path).exists():
        return "no such file or folder"
    if function and not re.search(rf"^\s*(async )?def {re.escape(function)}\(", (ROOT / path).read_text(), re.M):
        return f"no function {function}"
    return None


@pytest.mark.parametrize("doc", DOCS)
def test_every_module_and_dotted_name_the_doc_quotes_exists(doc):
    missing = {name: why for name in sorted(set(quoted(doc))) if DOTTED.fullmatch(name)
               if (why := dotted_problem(name))}
    assert missing == {}


@pytest.mark.parametrize("doc", DOCS)
def test_every_file_path_the_doc_quotes_exists(doc):
    missing = {text: why for text in sorted(set(quoted(doc))) if "/" in text if (why := path_problem(text))}
    assert missing == {}


def test_the_checks_catch_a_renamed_module_attribute_path_and_test():
    assert dotted_problem("search.engine.no_such_module") == "search.engine has no no_such_module"
    assert dotted_problem("nosuchapp_at_all.x") is None  # not a package of ours nor importable: an expression
    assert dotted_problem("config.errors.NoSuchError") == "config.errors has no NoSuchError"
    assert path_problem("search/engine/no_such_file.py") == "no such file or folder"
    assert path_problem("tests/config/test_docs_references.py::test_no_such_test") == "no function test_no_such_test"
    assert path_problem("credits/9999") == "no such migration"
    assert dotted_problem("config.errors.BadInput") is None
    this_test = "test_the_checks_catch_a_renamed_module_attribute_path_and_test"
    assert path_problem(f"tests/config/test_docs_references.py::{this_test}") is None
