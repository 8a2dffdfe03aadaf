"""Exact and RE2 search over the indexed text (search.engine.grep): trigram narrowing, line hits, bounds."""
from __future__ import annotations

import pathlib

import pytest

from config.errors import BadInput
from tests.search.code_fixtures import FILES, code_world, edge_index, line_of  # noqa: F401 - fixtures


def test_trigrams_of_a_substring_are_trigrams_of_the_text_casefolded_and_within_lines():
    from search.engine.grep import trigrams

    text = "def Deduct_Credits(wallet):\n    return ΣΑΣ"
    assert set(trigrams("deduct_cred")) <= set(trigrams(text))
    assert set(trigrams("σας")) <= set(trigrams(text))  # casefold maps each letter alone
    assert not set(trigrams("):\n")) and set(trigrams("t):")) <= set(trigrams(text))


def test_trigrams_are_the_sorted_distinct_ids_of_every_lines_casefolded_character_triples():
    """The ids are stored per file (CodeFile.trigrams) and compared with a fresh build by the reconcile check:
    the same text must give exactly these ids, in this order, however they are computed."""
    import ast as ast_module

    from search.engine.grep import trigrams

    def plain(text: str) -> list[int]:
        folded = text.casefold()
        return sorted({(ord(a) << 42) | (ord(b) << 21) | ord(c)
                       for line in folded.split("\n") for a, b, c in zip(line, line[1:], line[2:], strict=False)})

    texts = [pathlib.Path(ast_module.__file__).read_text(encoding="utf-8"), "", "ab", "abc", "\n\n\n\n", "a\nb\nc",
             "ΣΑΣ σας Straße ﬁne\n\tx = 1\r\n", "aaaa aaaa\n" * 50]
    for text in texts:
        assert trigrams(text) == plain(text)


def test_required_literals_are_what_every_match_contains():
    from search.engine.grep import required_literals

    assert required_literals(r"deduct_\w+\(wallet") == ["deduct_", "(wallet"]
    assert required_literals("ab+cd") == ["ab", "cd"] and required_literals("foo|bar") == []
    assert required_literals("[[:alpha:]]abc") == []  # RE2 reads POSIX classes; Python does not


def test_a_literal_finds_every_line_and_only_in_files_holding_it(code_world):
    from search.engine.grep import grep_project

    out = grep_project(project=code_world["project"], pattern="deduct_credits")
    assert [(h["path"], h["line"]) for h in out["hits"]] == [
        ("billing/ledger.py", line_of("billing/ledger.py", "def deduct_credits")),
        ("shop/service.py", 1), ("shop/service.py", line_of("shop/service.py", "ledger.deduct_credits"))]
    assert out["narrowed"] and out["complete"] and not out["truncated"] and out["files_read"] == 2
    assert out["hits"][0]["span"] == f"billing/ledger.py:{out['hits'][0]['line']}"


def test_regex_case_path_and_max_matches(code_world):
    from search.engine.grep import grep_project

    project = code_world["project"]
    defs = grep_project(project=project, pattern=r"^\s*def \w+\(self", regex=True)
    assert {h["path"] for h in defs["hits"]} == {"billing/ledger.py", "shop/service.py"}
    assert grep_project(project=project, pattern="WALLET", case_sensitive=False, path="shop/")["hits"]
    assert not grep_project(project=project, pattern="WALLET", path="shop/")["hits"]
    capped = grep_project(project=project, pattern="wallet", max_matches=2)
    assert len(capped["hits"]) == 2 and capped["truncated"]
    anchored = grep_project(project=project, pattern=r"\Aclass \w+\(ledger", regex=True)  # \A: the line's start
    assert [h["path"] for h in anchored["hits"]] == ["shop/service.py"]
    every = grep_project(project=project, pattern=r"\w", regex=True, max_matches=500)  # narrows nothing
    assert not every["narrowed"] and every["complete"]
    assert every["files_read"] == len(FILES)


def test_a_catastrophic_pattern_runs_in_linear_time(code_world):
    import time

    from search.engine.grep import grep_project

    t0 = time.perf_counter()
    out = grep_project(project=code_world["project"], pattern=r"(a+)+$b", regex=True)
    assert out["hits"] == [] and time.perf_counter() - t0 < 2.0


@pytest.mark.parametrize(("kwargs", "field"), [({"pattern": ""}, "pattern"), ({"pattern": "(unclosed", "regex": True},
                                                                            "pattern"),
                                              ({"pattern": "a\nb"}, "pattern"), ({"pattern": "x", "path": "[z-a]"},
                                                                                 "path"),
                                              ({"pattern": "x", "max_matches": 0}, "max_matches"),
                                              ({"pattern": "x", "dataset": "nope"}, "dataset")])
def test_bad_requests_are_400s_naming_the_field(code_world, kwargs, field):
    from search.engine.grep import grep_project

    with pytest.raises(BadInput) as exc:
        grep_project(project=code_world["project"], **kwargs)
    assert exc.value.field == field


def test_another_projects_text_is_not_searched(code_world):
    from search.engine.grep import grep_project

    assert grep_project(project=code_world["other"], pattern="deduct_credits")["hits"] == []
