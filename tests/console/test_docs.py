"""The documentation builds, its generated reference matches the code, and the README stays a newcomer's page.

Why tests: a doc that drifts from the code is worse than none; these fail the build the day a setting, command,
tool, scope or endpoint changes without its page (docs/architecture.md, "Docs that cannot drift").
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from console.reference import bench_catalogue, render_commands, render_scopes, settings_rows, stale_pages

ROOT = Path(__file__).resolve().parents[2]
LABELS = re.compile(r"\b(issue|issues) #?[0-9]+|§ ?[0-9]|\bseed 00[0-9]", re.IGNORECASE)


def test_docs_build_in_strict_mode(tmp_path: Path) -> None:
    """Strict mode turns every broken link, missing page and unlisted page into a failure."""
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "reference" / "settings.html").exists()


@pytest.mark.django_db
def test_reference_pages_match_the_code() -> None:
    assert stale_pages() == [], "run: manage.py reference_docs --write"


def test_every_environment_variable_the_settings_read_is_documented() -> None:
    rows = settings_rows()
    assert len(rows) > 100
    undocumented = [r.env for r in rows if not r.help]
    assert undocumented == [], "add a comment above (or beside) each read in config/settings.py"


def test_settings_reference_lists_a_variable_added_to_the_settings(tmp_path: Path) -> None:
    source = (ROOT / "config" / "settings.py").read_text()
    added = tmp_path / "settings.py"
    added.write_text(source + '\n# How many widgets a page shows.\nWIDGETS = env_int("WIDGETS_PER_PAGE", 7)\n')
    row = next(r for r in settings_rows(added) if r.env == "WIDGETS_PER_PAGE")
    assert (row.setting, row.kind, row.default, row.help) == ("WIDGETS", "integer", "7", "How many widgets a page shows.")


def test_commands_reference_is_built_from_the_parsers() -> None:
    page = render_commands()
    for command, flag in [("ingest", "--kind"), ("evaluate", "--beir"), ("adapt_embeddings", "--judged-max"),
                          ("reference_docs", "--write")]:
        assert f"## `{command}`" in page
        assert f"`{flag}`" in page.split(f"## `{command}`", 1)[1].split("\n## ", 1)[0]


def test_scopes_reference_names_the_scope_each_operation_checks() -> None:
    page = render_scopes()
    assert "| POST | `/api/projects/{slug}/query` | `query` |" in page
    assert "| POST | `/api/search` | `people` |" in page


def test_every_benchmark_script_says_whether_make_bench_runs_it() -> None:
    scripts = {p.name for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_")} - {"run_all.py"}
    catalogued = {entry.split()[0] for entry in bench_catalogue()}
    assert scripts == catalogued


def test_readme_is_a_newcomers_page() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    assert "make run" in text and "make test" in text and "mcpServers" in text
    for target in re.findall(r"\]\(((?:docs|bench)/[^)#]+)", text):
        assert (ROOT / target).exists(), target


def test_the_product_speaks_of_itself_only() -> None:
    """No issue numbers, section marks or seed numbers in code, docs, templates or help texts."""
    tracked = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.html"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    found = [f"{name}:{i}" for name in tracked if not name.startswith("bench/results/") and (ROOT / name).exists()
             for i, line in enumerate((ROOT / name).read_text(errors="replace").splitlines(), 1)
             if LABELS.search(line) and name != "tests/console/test_docs.py"]
    assert found == []
