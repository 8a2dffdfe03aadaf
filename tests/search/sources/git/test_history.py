"""Commit message -> changed files: the second kind of label-free judged query, and the rule that both kinds agree.

The history is a real git repository written here with dulwich (a root, qualifying commits, a merge, bumps, a
change too wide, a deleted file, docs only), synced through the product's git source over file://; the pairs
come from the source's mirror, walked back from the synced commit.
"""
from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from dulwich.index import commit_tree
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo

from search.engine.fusion_settings import DEFAULT
from search.quality.fusion_choice import JudgedSet, choose, choose_agreed, score_setting
from search.quality.metrics import ndcg as ndcg10
from search.sources.git.history import (
    Walk,
    clean_query,
    history_pairs,
    is_source,
    judge,
    merge_message,
    moved_path_resolver,
)
from tests.search.ctx_fixtures import edge_index, settled_applier  # noqa: F401 - fixtures
from tests.search.quality.test_fusion_choice import _sparse_knows_legs


# ------------------------------------------------------------------------------------------ the filters
def test_the_query_is_the_message_without_trailers_refs_and_rulers():
    msg = ("Refuse negative amounts when deducting credits (#12)\n\nA negative amount used to add credits "
           "(#7, encode/httpx#8).\n\n---\n\nSigned-off-by: A <a@example.com>\nCo-authored-by: B <b@example.com>\n")
    assert clean_query(msg) == ("Refuse negative amounts when deducting credits\n\nA negative amount used to add "
                                "credits.")


def test_source_files_are_parsed_languages_outside_tests_docs_and_build_files():
    assert is_source("httpx/_client.py") and is_source("web/routes.js")
    assert not any(is_source(p) for p in ("tests/test_client.py", "httpx/test_x.py", "docs/conf.py", "setup.py",
                                          "README.md", "pkg/x_test.py"))


def test_judge_skips_bumps_short_subjects_wide_changes_and_additions_only():
    one = lambda: [("M", "pkg/a.py"), ("M", "tests/test_a.py")]  # noqa: E731
    assert judge("Bump version to 1.2.0", one) == "subject"
    assert judge("Fix typo", one) == "subject"
    assert judge("Change five modules in one go", lambda: [("M", f"pkg/m{i}.py") for i in range(5)]) == "files"
    assert judge("Add a brand new module here", lambda: [("A", "pkg/new.py")]) == "no modified source file"
    v = judge("Keep the cookies across redirects (#9)", one)
    assert v.gold == ("pkg/a.py",) and v.query == "Keep the cookies across redirects" and v.other == 1


# ------------------------------------------------------------------------------------------ a real history
AUTHOR = b"Test <test@example.com>"


def _module(names: list[tuple[str, str, str]]) -> str:
    return "".join(f'def {name}(value):\n    """{doc}."""\n    {body}\n    return value\n\n\n'
                   for name, doc, body in names)


LEDGER = [("deduct_credits", "Take credits from a wallet and refuse to go below zero", "wallet.balance -= value"),
          ("grant_bonus", "Give a wallet extra credits as a loyalty reward", "wallet.balance += 5")]
TEXT = [("slugify", "Lower-case the words of a title joined by dashes", "value = value.lower()"),
        ("clamp_width", "Keep a column width between its lower and upper bound", "value = max(1, value)")]
CART = [("cart_total", "Add up the prices of every item in the basket", "value = sum(value)"),
        ("apply_discount", "Take the coupon's percentage off the basket price", "value = value * 0.9")]
MAIL = [("send_receipt", "Email the customer a receipt after checkout completes", "smtp.send(value)"),
        ("retry_send", "Send a message again when the mail server hangs up", "smtp.retry(value)")]


class History:
    """A bare repository written commit by commit (trees built from {path: text}); main is the newest."""

    def __init__(self, path) -> None:
        self.repo = Repo.init_bare(str(path), mkdir=True)
        self.repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        self.files: dict[str, str] = {}
        self.shas: dict[str, bytes] = {}

    def commit(self, name: str, message: str, *, change: dict[str, str | None], parents: list[bytes] | None = None,
               on: dict[str, str] | None = None) -> bytes:
        files = dict(self.files if on is None else on)
        for path, text in change.items():
            if text is None:
                files.pop(path)
            else:
                files[path] = text
        entries = []
        for path, text in sorted(files.items()):
            blob = Blob.from_string(text.encode())
            self.repo.object_store.add_object(blob)
            entries.append((path.encode(), blob.id, 0o100644))
        c = Commit()
        c.tree = commit_tree(self.repo.object_store, entries)
        c.parents = parents if parents is not None else ([self.repo.refs[b"refs/heads/main"]] if self.shas else [])
        c.author = c.committer = AUTHOR
        c.author_time = c.commit_time = 1_700_000_000 + len(self.shas) * 60
        c.author_timezone = c.commit_timezone = 0
        c.message = message.encode()
        self.repo.object_store.add_object(c)
        if on is None:
            self.repo.refs[b"refs/heads/main"] = c.id
            self.files = files
        self.shas[name] = c.id
        return c.id


@pytest.fixture
def history(tmp_path) -> History:
    h = History(tmp_path / "shop.git")
    h.commit("root", "Start the shop with billing and text helpers", change={
        "billing/ledger.py": _module(LEDGER), "util/text.py": _module(TEXT), "shop/cart.py": _module(CART),
        "shop/mail.py": _module(MAIL), "old/legacy.py": "def legacy():\n    return 'old'\n",
        "tests/test_ledger.py": "def test_ok():\n    assert ledger.balance() == 0\n", "docs/conf.py": "project = 'shop'\n",
        "README.md": "# Shop\n"})
    h.commit("ledger", "Refuse negative amounts when deducting credits (#12)\n\nA negative amount used to add "
                       "credits.\n\nSigned-off-by: A <a@example.com>\n",
             change={"billing/ledger.py": _module(LEDGER) + "LIMIT = 0\n",
                     "tests/test_ledger.py": "def test_ok():\n    assert ledger.balance() >= 0\n"})
    h.commit("bump", "Bump version to 1.2.0", change={"util/text.py": _module(TEXT) + "VERSION = '1.2.0'\n"})
    h.commit("text", "Make slugify drop punctuation from titles",
             change={"util/text.py": _module(TEXT) + "PUNCT = '.,;'\n", "util/extra.py": "X = 1\n"})
    side = h.commit("side", "Send the receipt email after checkout completes",
                    change={"shop/mail.py": _module(MAIL) + "RECEIPT = True\n"},
                    parents=[h.repo.refs[b"refs/heads/main"]], on=h.files)
    h.commit("merge", "Merge branch 'receipts'", change={"shop/mail.py": _module(MAIL) + "RECEIPT = True\n"},
             parents=[h.repo.refs[b"refs/heads/main"], side])
    h.commit("cart", "Apply the discount before the tax in cart totals",
             change={"shop/cart.py": _module(CART) + "TAX = 0.2\n"})
    h.commit("wide", "Rewrite the helpers across the whole code base",
             change={p: h.files[p] + "# rewritten\n" for p in ("billing/ledger.py", "util/text.py", "shop/cart.py",
                                                               "shop/mail.py", "util/extra.py")})
    h.commit("legacy", "Remove the legacy helper that nobody calls", change={"old/legacy.py": None})
    h.commit("docs", "Explain the ledger rules in the docs", change={"docs/conf.py": "project = 'Shop'\n"})
    h.commit("tidy", "Tidy up", change={"shop/cart.py": h.files["shop/cart.py"] + "# tidy\n"})
    h.commit("mail", "Retry sending mail when the SMTP server hangs up\n\n---\n\nCo-authored-by: B <b@example.com>",
             change={"shop/mail.py": h.files["shop/mail.py"] + "RETRIES = 3\n"})
    return h


def test_pairs_walk_first_parent_history_back_from_the_commit_and_keep_what_the_dataset_holds(history):
    skipped: dict[str, int] = {}
    store = history.repo.object_store
    pairs = history_pairs(store, history.shas["mail"], keep=lambda p: p != "old/legacy.py", skipped=skipped)
    assert [(p.query, p.gold) for p in pairs] == [
        ("Retry sending mail when the SMTP server hangs up", ("shop/mail.py",)),
        ("Apply the discount before the tax in cart totals", ("shop/cart.py",)),
        ("Make slugify drop punctuation from titles", ("util/text.py",)),  # util/extra.py was added: not gold
        ("Refuse negative amounts when deducting credits\n\nA negative amount used to add credits.",
         ("billing/ledger.py",))]  # the test file it changed is not gold
    # the merge and the root; the bump and "Tidy up"; five files, docs only; the deleted file is not held
    assert skipped == {"merge or root": 2, "subject": 2, "files": 2, "not in the dataset": 1}
    # the side branch's commit is not first-parent history; nothing after the start commit takes part
    assert [p.sha for p in history_pairs(store, history.shas["cart"])] == [
        history.shas[n].decode() for n in ("cart", "text", "ledger")]
    assert [p.gold for p in history_pairs(store, history.shas["mail"], subdir="shop", max_pairs=1)] == [("mail.py",)]


def test_a_merge_counts_as_one_change_under_its_pull_request_title_when_the_walk_takes_merges(history):
    h = history
    side = h.commit("side2", "Wip", change={"shop/cart.py": h.files["shop/cart.py"] + "ROUND = 2\n"},
                    parents=[h.repo.refs[b"refs/heads/main"]], on=h.files)
    h.commit("pr", "Merge pull request #31 from a/rounding\n\nRound cart totals to whole cents",
             change={"shop/cart.py": h.files["shop/cart.py"] + "ROUND = 2\n"},
             parents=[h.repo.refs[b"refs/heads/main"], side])
    store = h.repo.object_store
    plain = history_pairs(store, h.shas["pr"])
    merged = history_pairs(store, h.shas["pr"], walk=Walk(merges=True))
    assert h.shas["pr"].decode() not in [p.sha for p in plain]
    assert (merged[0].sha, merged[0].query, merged[0].gold) == (
        h.shas["pr"].decode(), "Round cart totals to whole cents", ("shop/cart.py",))
    # a merge with nothing under its generated subject ("Merge branch 'receipts'") is still not a query
    assert h.shas["merge"].decode() not in [p.sha for p in merged]


def test_a_merge_message_keeps_a_title_a_person_wrote_and_drops_a_generated_subject():
    assert merge_message("Merge pull request #12 from a/b\n\nKeep cookies on redirects") == "Keep cookies on redirects"
    assert merge_message("Merge branch 'stable'\n") == ""
    assert merge_message("Rewrite the help page section (#2821)\n\nShorter.") == (
        "Rewrite the help page section (#2821)\n\nShorter.")


def test_a_path_moved_under_src_or_out_of_a_folder_resolves_to_where_the_tree_holds_it_now():
    resolve = moved_path_resolver(["src/click/core.py", "src/click/utils.py", "click/_compat.py", "a/x/util.py",
                                   "b/x/util.py"])
    assert resolve("src/click/core.py") == "src/click/core.py"
    assert resolve("click/core.py") == "src/click/core.py"  # the package moved under src/
    assert resolve("lib/click/_compat.py") == "click/_compat.py"  # out of a folder
    assert resolve("x/util.py") is None  # two files end so: no guess
    assert resolve("core.py") is None  # one component is too little to go on
    assert resolve("click/gone.py") is None


@pytest.fixture
def synced_shop(history, make_user, make_project, edge_index, settled_applier, settings, tmp_path):
    """A code project whose one dataset follows the history's main branch, synced through the product."""
    from search.engine.applier import apply_outbox, pending_outbox
    from search.models import Dataset
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source, start_sync

    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    project = make_project("shop", make_user("keeper@example.com"))
    dataset = Dataset.objects.create(project=project, name="shop", kind="code")
    set_source(user=None, dataset=dataset, interval_s=None,
               spec=SourceSpec(type="git", config={"url": Path(history.repo.path).as_uri(), "ref": "main",
                                                   "subdir": ""}, local=True))
    job = start_sync(dataset=dataset, run_now=True)
    assert job.status == "done", job.error
    while pending_outbox():
        apply_outbox()
    return project, dataset


@pytest.mark.django_db
def test_a_synced_git_source_gives_commit_queries_and_both_kinds_judge_the_choice(synced_shop, history, client,
                                                                                  make_user):
    from search.quality.self_judged import choose_self_judged, project_history

    project, dataset = synced_shop
    queries, sources = project_history(project=project)
    assert sources[0]["commit"] == history.shas["mail"].decode() and sources[0]["commits"] == 4
    assert queries["Apply the discount before the tax in cart totals"] == {(dataset.pk, "shop/cart.py")}
    result = choose_self_judged(project=project, min_queries=4, save=False)
    ev = result.evidence
    assert ev["pairs"] == 8 and ev["history"] == 4
    assert set(ev["types"]) == {"docstring", "history"} and all(t["used"] for t in ev["types"].values())
    assert ev["types"]["history"]["pick"] == 2 and set(ev["types"]["history"]["legs"]) == {"dense", "sparse"}
    assert ev["pick"]["kinds"] == ["docstring", "history"]
    if ev["pick"]["best"] != ev["baseline"]:  # a pick is confirmed on each kind's own held-out half
        assert {"confirm", "passes"} <= set(ev["types"]["docstring"]) and "confirm" in ev["types"]["history"]
        assert result.adopted == all(t["passes"] for t in ev["types"].values())
    out = StringIO()
    call_command("choose_fusion", "--project", "shop", "--self-judged", "--adopt", "--min-queries", "4", stdout=out)
    text = out.getvalue()
    assert "8 documented functions, 4 commit messages (1 git sources)" in text
    assert "docstring queries: 8" in text and "history queries: 4" in text
    client.force_login(make_user("boss@example.com", staff=True))
    page = client.get(f"/admin/projects/project/{project.pk}/change/").content.decode()
    assert "commit-message queries" in page and "4 (commit message → changed files" in page


@pytest.mark.django_db
def test_too_few_commits_leave_the_choice_to_the_docstrings_and_the_reason_says_so(synced_shop):
    from search.quality.self_judged import choose_self_judged

    project, _ = synced_shop
    result = choose_self_judged(project=project, min_queries=5, save=False)
    assert result.evidence["types"] == {"docstring": result.evidence["types"]["docstring"]}
    assert result.reason.endswith("(4 qualifying commits in the git history (at least 5), so docstrings decide "
                                  "alone)")


# ------------------------------------------------------------------------------------------ the agreement rule
def _flat(n: int) -> tuple[dict, dict]:
    """Every setting ranks the answer first: no setting gains anything."""
    legs = {f"h{i}": ([(5000 + i, 0.9), (1, 0.5)], [(5000 + i, 9.0), (2, 1.0)]) for i in range(n)}
    return legs, {f"h{i}": {5000 + i: 1} for i in range(n)}


def test_one_kind_decides_as_choose_does():
    legs, judged = _sparse_knows_legs(40)
    one = choose_agreed(sets={"docstring": JudgedSet(legs, judged)}, min_queries=30)
    ref = choose(legs=legs, judged=judged, min_queries=30)
    assert (one.adopted, one.setting, one.reason) == (ref.adopted, ref.setting, ref.reason)
    assert one.evidence["confirm"] == ref.evidence["confirm"] and one.evidence["legs"] == ref.evidence["legs"]


def test_a_setting_one_kind_likes_and_the_other_does_not_confirm_is_not_adopted():
    legs, judged = _sparse_knows_legs(40)
    hlegs, hjudged = _flat(40)
    result = choose_agreed(sets={"docstring": JudgedSet(legs, judged), "history": JudgedSet(hlegs, hjudged)},
                           min_queries=30)
    assert not result.adopted and "on the history confirm half" in result.reason
    types = result.evidence["types"]
    assert types["docstring"]["passes"] and not types["history"]["passes"]
    assert set(types["history"]["grid"].values()) == {1.0}  # each kind's own pick-half grid is kept
    few = choose_agreed(sets={"docstring": JudgedSet(legs, judged), "history": JudgedSet(*_flat(10))},
                        min_queries=30)  # too few commits: the docstrings decide alone
    assert few.adopted and few.evidence["types"]["history"] == {"queries": 10, "used": False}


def test_history_is_judged_per_file_each_file_once():
    """Two chunks of one file count once: the second gold file, third by chunk, is second by file."""
    to_doc = {1: "a.py", 2: "a.py", 3: "b.py", 4: "c.py"}
    legs = {f"q{i}": ([(1, 0.9), (2, 0.8), (3, 0.7), (4, 0.6)], [(1, 9.0), (2, 8.0), (3, 7.0)]) for i in range(4)}
    judged = {q: {"a.py": 1, "b.py": 1} for q in legs}
    scores = score_setting(DEFAULT, legs=legs, judged=judged, queries=sorted(legs), to_doc=to_doc)
    assert scores == [pytest.approx(1.0)] * 4  # by chunk, b.py would be third
    assert score_setting(DEFAULT, legs=legs, judged={q: {1: 1, 3: 1} for q in legs}, queries=sorted(legs)) \
        == [pytest.approx(ndcg10([1, 2, 3], {1: 1, 3: 1}))] * 4
