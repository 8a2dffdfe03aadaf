"""A followed repository's history trains the embedding model and its newest commits decide adoption.

The history is a real git repository written here with dulwich (a root, then one commit per change, each a message
about one function), synced through the product's git source over file://; mining reads the source's mirror from
the synced commit back. Training is real and tiny (a few steps of the bundled MiniLM on the CPU).
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from search.quality import adaptation as ad
from search.quality import history_training as ht
from search.sources.git.history import changed_definitions, changed_old_lines
from tests.search.ctx_fixtures import edge_index, settled_applier  # noqa: F401 - fixtures
from tests.search.sources.git.test_history import History

# ------------------------------------------------------------------------------------------ the changed functions
OLD = '''class Wallet:
    def deduct(self, amount):
        self.balance -= amount
        return self.balance

    def grant(self, amount):
        self.balance += amount


def helper(value):
    total = value * 2
    return total
'''


def test_the_gold_is_the_innermost_definition_each_changed_line_is_in():
    changed = OLD.replace("self.balance -= amount", "self.balance -= max(0, amount)")
    assert changed_definitions(path="pkg/wallet.py", old=OLD, new=changed) == ["Wallet.deduct"]  # not the class
    inserted = OLD.replace("    total = value * 2\n", "    total = value * 2\n    total += 1\n")
    assert changed_old_lines(OLD, inserted) == [(11, 11, True)]
    assert changed_definitions(path="pkg/wallet.py", old=OLD, new=inserted) == ["helper"]
    added = OLD + "\n\ndef brand_new():\n    return 1\n"  # a new function did not exist for the searcher
    assert changed_definitions(path="pkg/wallet.py", old=OLD, new=added) == []
    both = changed.replace("return total", "return total + 0")
    assert changed_definitions(path="pkg/wallet.py", old=OLD, new=both) == ["Wallet.deduct", "helper"]


def test_a_message_that_changed_two_functions_is_never_its_own_negative_in_a_batch():
    pairs = [ad.Pair(f"message {i // 2}", f"function {i}", i, "history") for i in range(16)]
    for batch in ad.batches(pairs, size=4, steps=8, seed=3):
        assert len({p.anchor for p in batch}) == len(batch) >= 2


# ------------------------------------------------------------------------------------------ a real history
TOPICS = {
    "shop/billing.py": [("deduct_credits", "wallet balance credits refuse negative amounts"),
                        ("grant_bonus", "loyalty bonus reward extra credits"),
                        ("close_account", "close the account and refund the remaining balance")],
    "shop/text.py": [("slugify_title", "lower case title words joined by dashes"),
                     ("clamp_width", "column width kept between a lower and an upper bound"),
                     ("wrap_paragraph", "wrap a paragraph of prose at the line width")],
    "shop/cart.py": [("cart_total", "sum the prices of every basket item"),
                     ("apply_discount", "coupon percentage taken off the basket price"),
                     ("add_shipping", "shipping fee by the parcel weight")],
    "shop/mail.py": [("send_receipt", "email the customer a receipt after checkout"),
                     ("retry_send", "send the message again when the smtp server hangs up"),
                     ("render_template", "fill the email template with the order fields")],
}
# (function, message): each commit changes one function's body; the newest last
CHANGES = [("deduct_credits", "Refuse negative amounts when deducting wallet credits"),
           ("slugify_title", "Drop punctuation from titles when making slugs"),
           ("cart_total", "Count the quantity of each basket item in the total"),
           ("send_receipt", "Attach the invoice to the receipt email after checkout"),
           ("grant_bonus", "Cap the loyalty bonus at fifty credits a month"),
           ("clamp_width", "Allow a zero column width for hidden columns"),
           ("apply_discount", "Round the discounted basket price to whole cents"),
           ("retry_send", "Wait longer between retries when the mail server hangs up"),
           ("close_account", "Refund the remaining balance before closing an account"),
           ("wrap_paragraph", "Keep long words whole when wrapping a paragraph"),
           ("add_shipping", "Charge shipping by parcel weight band instead of flat fee"),
           ("render_template", "Escape order fields before filling the email template")]


def _source(path: str, versions: dict[str, int]) -> str:
    out = []
    for name, words in TOPICS[path]:
        v = versions.get(name, 0)
        out.append(f'def {name}(order, limit=10):\n    """{words.capitalize()}."""\n'
                   f'    # {words}\n    items = [x for x in order if x][:limit]\n'
                   f'    if not items:\n        raise ValueError("nothing to {words} here")\n'
                   f'    version = {v}\n    return items, version\n\n\n')
    return "".join(out)


def _file_of(name: str) -> str:
    return next(p for p, fns in TOPICS.items() if any(n == name for n, _ in fns))


def write_history(h: History, changes: list[tuple[str, str]], versions: dict[str, int]) -> None:
    for name, message in changes:
        versions[name] = versions.get(name, 0) + 1
        path = _file_of(name)
        h.commit(name, message, change={path: _source(path, versions)})


@pytest.fixture
def repo(tmp_path) -> tuple[History, dict[str, int]]:
    h = History(tmp_path / "shop.git")
    h.commit("root", "Start the shop with billing and mail helpers",
             change={p: _source(p, {}) for p in TOPICS} | {"README.md": "# Shop\n"})
    versions: dict[str, int] = {}
    write_history(h, CHANGES, versions)
    return h, versions


def sync(dataset) -> None:
    from search.engine.applier import apply_outbox, pending_outbox
    from search.sources.sync import start_sync

    job = start_sync(dataset=dataset, run_now=True)
    assert job.status == "done", job.error
    while pending_outbox():
        apply_outbox()


@pytest.fixture
def followed(repo, make_user, make_project, edge_index, settled_applier, settings, tmp_path):
    """A code project whose dataset follows the repository's main branch, synced through the product, with a
    time split of 12 commits: the newest 3 check (a fifth, at least 3), the 9 older ones train."""
    from search.models import Dataset
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source

    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    settings.VAR_DIR = tmp_path / "var"
    settings.ADAPT_HISTORY_MIN_COMMITS = 8
    settings.ADAPT_HISTORY_MIN_CHECK = 3
    h, _ = repo
    project = make_project("shop", make_user("keeper@example.com"))
    dataset = Dataset.objects.create(project=project, name="shop", kind="code")
    set_source(user=None, dataset=dataset, interval_s=None,
               spec=SourceSpec(type="git", config={"url": Path(h.repo.path).as_uri(), "ref": "main", "subdir": ""},
                               local=True))
    sync(dataset)
    return project, dataset


@pytest.mark.django_db
def test_each_commit_pairs_its_message_with_the_changed_function_as_the_synced_tree_holds_it(followed, repo):
    from search.models import Chunk

    _, dataset = followed
    h, _ = repo
    pool = ht.mine_history(dataset_ids=[dataset.pk])
    assert pool.sources[0]["commit"] == h.shas["render_template"].decode() and not pool.stopped
    assert [c.query for c in pool.cases] == [m for _, m in reversed(CHANGES)]  # newest first; the root is not one
    for case, (name, _) in zip(pool.cases, reversed(CHANGES), strict=True):
        assert case.files == (_file_of(name),)
        assert [f.qualname for f in case.functions] == [name]
        chunk = Chunk.objects.get(pk=case.functions[0].chunk_id)
        assert chunk.path == _file_of(name) and f"def {name}(" in chunk.text  # the function the index embeds now


@pytest.mark.django_db
def test_the_newest_commits_check_and_only_older_ones_train(followed):
    _, dataset = followed
    split = ht.split_history(ht.mine_history(dataset_ids=[dataset.pk]))
    assert split.used and [c.query for c in split.check] == [m for _, m in reversed(CHANGES[-3:])]
    assert [c.query for c in split.train] == [m for _, m in reversed(CHANGES[:-3])]
    examples, negatives = ht.training_examples(split, dataset_ids=[dataset.pk], seed=13, log=lambda m: None)
    check_queries = {c.query for c in split.check}
    assert {q for q, _ in examples} == {c.query for c in split.train} and not check_queries & set(negatives)
    gold = {c.query: c.functions[0].chunk_id for c in split.train}
    for q, negs in negatives.items():  # near misses of the same file, then the served retriever's mistakes
        assert negs and gold[q] not in negs
    everything = ht.split_history(ht.mine_history(dataset_ids=[dataset.pk]), check=False)
    assert not everything.check and len(everything.train) == len(CHANGES)  # a caller holding its own commits out


@pytest.mark.django_db
def test_too_few_commits_and_no_history_fall_back_and_say_so(followed, code_dataset, settings):
    _, dataset = followed
    settings.ADAPT_HISTORY_MIN_COMMITS = 40
    split = ht.split_history(ht.mine_history(dataset_ids=[dataset.pk]))
    assert not split.used and not split.train and not split.check
    assert split.why == ("12 qualifying commits with a changed function in the git history (at least 40 are needed: "
                         "3 to check, the rest to train)")
    _, archive = code_dataset  # uploaded as files: no history
    assert ht.split_history(ht.mine_history(dataset_ids=[archive.pk])).why == \
        "no git source: the datasets have no history"
    from search.quality.adoption import decide

    adopt, why = decide(kinds={"code"}, heldout={"code_gain_lower_95": 0.01, "non_name_gain_lower_95": 0.01}, judged=None,
                        history={"used": False, "why": split.why})
    assert adopt and why.endswith(f"(git history does not decide: {split.why})")


@pytest.mark.django_db
def test_a_resync_adds_the_new_commits_to_the_pool_and_a_trained_commit_never_checks(followed, repo):
    _, dataset = followed
    h, versions = repo
    before = ht.split_history(ht.mine_history(dataset_ids=[dataset.pk]))
    write_history(h, [("cart_total", "Skip empty basket items when adding up the total"),
                      ("slugify_title", "Keep digits in slugs made from titles")], versions)
    sync(dataset)
    pool = ht.mine_history(dataset_ids=[dataset.pk])
    assert len(pool.cases) == len(CHANGES) + 2 and pool.cases[0].query == "Keep digits in slugs made from titles"
    trained = {c.sha for c in before.train}
    after = ht.split_history(pool, exclude_from_check=trained)
    assert not trained & {c.sha for c in after.check}


# ------------------------------------------------------------------------------------------ the rule
def _evidence(fn: list[tuple[float, float]], files: list[tuple[float, float]]) -> dict:
    return {"used": True, "commits": len(fn), "k": 10,
            "function_recall@10": ht._level([b for b, _ in fn], [a for _, a in fn], seed=15),
            "file_recall@10": ht._level([b for b, _ in files], [a for _, a in files], seed=15)}


def test_the_time_split_adopts_a_confident_gain_and_refuses_a_regression_or_a_noisy_one():
    flat = [(1.0, 1.0)] * 30
    gain = [(0.0, 1.0)] * 12 + [(0.5, 0.5)] * 18
    adopt, why = ht.decide_history(_evidence(gain, flat))
    assert adopt and why.startswith("newest 30 commits, never trained on: function recall@10 0.3 -> 0.7")
    adopt, why = ht.decide_history(_evidence([(1.0, 0.0)] * 5 + [(0.5, 0.5)] * 25, flat))
    assert not adopt and "function recall must gain 0.01 with a lower bound above 0" in why
    noisy = [(0.0, 1.0)] * 4 + [(1.0, 0.0)] * 3 + [(0.5, 0.5)] * 23  # a gain on average, not with confidence
    assert ht.decide_history(_evidence(noisy, flat))[0] is False
    files_lost = [(1.0, 1.0)] * 20 + [(1.0, 0.0)] * 10  # functions found, whole files lost elsewhere
    adopt, why = ht.decide_history(_evidence(gain, files_lost))
    assert not adopt and "file recall must gain" in why
    ev = _evidence(gain, flat)
    assert ev["function_recall@10"]["interval_95"][0] > 0 and ev["file_recall@10"]["unchanged"]


def test_with_judged_queries_too_both_the_history_and_the_queries_must_pass():
    from search.quality.adoption import decide

    history = _evidence([(0.0, 1.0)] * 12 + [(0.5, 0.5)] * 18, [(1.0, 1.0)] * 30)
    judged_loss = {"queries": 40, "gain": -0.02, "gain_lower_95": -0.05}
    adopt, why = decide(kinds={"code"}, heldout={"confirmed": True}, judged=judged_loss, history=history)
    assert not adopt and why.startswith("git history: newest 30 commits") and "judged queries: -0.0200" in why
    # history refusing decides alone, whatever the held-out pairs say (the rule that let a regression through)
    refused = _evidence([(1.0, 0.0)] * 10 + [(0.5, 0.5)] * 20, [(1.0, 1.0)] * 30)
    adopt, why = decide(kinds={"code"}, heldout={"code_gain_lower_95": 0.15, "non_name_gain_lower_95": 0.1}, judged=None,
                        history=refused)
    assert not adopt and why.startswith("git history:")


# ------------------------------------------------------------------------------------------ end to end
@pytest.mark.django_db
def test_adaptation_trains_on_history_and_the_time_split_decides_and_the_admin_shows_it(followed, client,
                                                                                         make_user):
    from search.models import Dataset
    from search.quality.adoption import adopt_if_confirmed
    from search.quality.judged import JudgedSplit

    project, dataset = followed
    cfg = ad.AdaptConfig(steps=4, batch=4, heldout=0.2)
    result = ad.adapt(name="shop-history", dataset_ids=[dataset.pk], cfg=cfg, progress=False, log=lambda m: None)
    data = result.manifest["data"]
    history = data["history"]
    assert history["used"] and history["train_commits"] == 9 and history["check_commits"] == 3
    assert not set(history["check"]) & set(history["train_shas"])  # the check commits never train
    assert data["train_pairs"]["history"] == 9 and "docstring" in data["train_pairs"]  # beside the label-free pairs
    assert sum(data["steps_by_type"].values()) == 4 and data["steps_by_type"].get("history", 0) >= 1
    outcome = adopt_if_confirmed(name="shop-history", dataset_ids=[dataset.pk], manifest=result.manifest,
                                 split=JudgedSplit(), log=lambda m: None, history=result.history)
    ev = outcome["evidence"]["history"]
    assert ev["used"] and ev["commits"] == 3 and ev["check_commits"] == history["check"]
    for level in ("function_recall@10", "file_recall@10"):
        assert ev[level]["commits"] == 3 and 0 <= ev[level]["base"] <= 1 and 0 <= ev[level]["adapted"] <= 1
        low, high = ev[level]["interval_95"]
        assert low <= ev[level]["gain"] <= high
    assert (outcome["adopted"], outcome["reason"]) == (lambda a, w: (a, f"git history: {w}"))(
        *ht.decide_history(ev))  # three commits cannot give confidence: refused, and the reason says why
    stored = Dataset.objects.get(pk=dataset.pk).embedding_evidence
    assert stored["history"]["check_commits"] == history["check"] and stored["train_pairs"]["history"] == 9
    # the same decision from the manifest alone (a model adapted earlier): the check commits read again
    again = adopt_if_confirmed(name="shop-history", dataset_ids=[dataset.pk], manifest=json.loads(
        (Path(result.path) / "manifest.json").read_text()), split=JudgedSplit(), log=lambda m: None)
    assert again["evidence"]["history"]["function_recall@10"] == ev["function_recall@10"]
    client.force_login(make_user("boss@example.com", staff=True))
    page = client.get(f"/admin/search/dataset/{dataset.pk}/change/").content.decode()
    assert "git history: 9 commits trained (9 changed functions); the newest 3 checked" in page
    assert "function recall@10" in page and "95 % interval" in page and "history 9" in page


@pytest.mark.django_db
def test_the_time_budget_stops_mining_and_training_inside_their_loops(followed):
    from sentence_transformers import SentenceTransformer

    from config.errors import BadInput
    from inference.encoders import resolve_model

    _, dataset = followed
    cut = ht.mine_history(dataset_ids=[dataset.pk], deadline=time.monotonic() - 1)
    assert cut.stopped == "time budget" and cut.cases == [] and cut.sources[0]["skipped"] == {"time budget": 1}
    assert ad.mine(dataset_ids=[dataset.pk], deadline=time.monotonic() - 1).stopped == "time budget"
    with pytest.raises(BadInput, match=r"within the time budget \(0 s\)"):
        ad.adapt(name="shop-no-time", dataset_ids=[dataset.pk], cfg=ad.AdaptConfig(steps=4, batch=4, time_budget_s=0),
                 progress=False, log=lambda m: None)
    # training gets what mining left of the budget, checked before each step
    model = SentenceTransformer(resolve_model()[1], device="cpu")
    plan = [[ad.Pair(f"a{i}", f"p{i}", i, "name") for i in range(4)]] * 3
    trained = ad._train(model, plan, cfg=ad.AdaptConfig(), progress=False, log=lambda m: None, budget_s=0.0)
    assert trained["steps_run"] == 0 and trained["stopped"].startswith("time budget")


@pytest.mark.django_db
def test_adapting_from_history_up_to_the_synced_commit_trains_on_every_commit_and_refuses_without_history(
        followed, code_dataset):
    from config.errors import BadInput

    _, dataset = followed
    result = ad.adapt_from_history(name="shop-all-history", dataset_ids=[dataset.pk],
                                   cfg=ad.AdaptConfig(steps=2, batch=4), log=lambda m: None)
    history = result.manifest["data"]["history"]
    assert history["train_commits"] == len(CHANGES) and history["check"] == [] and result.history.check == []
    _, archive = code_dataset
    with pytest.raises(BadInput, match="no git source: the datasets have no history"):
        ad.adapt_from_history(name="pkg-no-history", dataset_ids=[archive.pk], cfg=ad.AdaptConfig(steps=2, batch=4),
                              log=lambda m: None)


@pytest.mark.django_db
def test_commits_from_before_a_move_under_src_and_a_merged_pull_request_train_on_the_files_where_they_are_now(
        repo, make_user, make_project, edge_index, settings, tmp_path):
    """A package moved under src/ keeps its history (found by the path's tail), and a pull request merged on the
    first-parent line is one change under its title."""
    from search.models import Dataset
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source

    h, versions = repo
    old_paths = [p for p in h.files if p.endswith(".py")]
    h.commit("move", "Move the shop package under src for the new layout",
             change={p: None for p in old_paths} | {f"src/{p}": h.files[p] for p in old_paths})
    versions["cart_total"] += 1
    pr_text = _source("shop/cart.py", versions)
    side = h.commit("pr-side", "wip", change={"src/shop/cart.py": pr_text},
                    parents=[h.repo.refs[b"refs/heads/main"]], on=h.files)
    h.commit("pr", "Merge pull request #7 from a/quantities\n\nCount each basket item once per unit in the total",
             change={"src/shop/cart.py": pr_text}, parents=[h.repo.refs[b"refs/heads/main"], side])
    settings.SOURCES_GIT_DIR = tmp_path / "mirrors"
    settings.VAR_DIR = tmp_path / "var"
    dataset = Dataset.objects.create(project=make_project("moved", make_user("mover@example.com")), name="shop",
                                     kind="code")
    set_source(user=None, dataset=dataset, interval_s=None,
               spec=SourceSpec(type="git", config={"url": Path(h.repo.path).as_uri(), "ref": "main", "subdir": ""},
                               local=True))
    sync(dataset)

    pool = ht.mine_history(dataset_ids=[dataset.pk])
    assert [c.query for c in pool.cases] == ["Count each basket item once per unit in the total",
                                             *[m for _, m in reversed(CHANGES)]]  # the move adds no modified file
    for case, (name, _) in zip(pool.cases[1:], reversed(CHANGES), strict=True):
        assert case.files == (f"src/{_file_of(name)}",)
        assert [(f.path, f.qualname) for f in case.functions] == [(f"src/{_file_of(name)}", name)]
    assert [(f.path, f.qualname) for f in pool.cases[0].functions] == [("src/shop/cart.py", "cart_total")]
