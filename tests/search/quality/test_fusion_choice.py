"""Fusion chosen per project from its feedback, only on evidence.

The rule is checked on hand-made legs, where the right answer is known. Then it is checked end to end: the
command, the admin's evidence, and a query that runs the adopted setting, using real feedback rows on a real
ingest.
"""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from search.engine.fusion_settings import CODE_DEFAULT, DEFAULT, PROSE_DEFAULT, FusionSetting, kind_default
from search.engine.project_ranking import fusion_of, save_fusion
from search.quality.fusion_choice import choose
from search.quality.metrics import ndcg as ndcg10
from tests.search.ctx_fixtures import code_repo, edge_index, ingest  # noqa: F401


def _sparse_knows_legs(n: int, *, offset: int = 0) -> tuple[dict, dict]:
    """Per query: the relevant chunk is first in sparse but 15th in dense, and the chunks dense ranks first are
    also high in sparse. RRF's equal vote then puts the noise on top; a sparse-heavy score fusion does not."""
    legs, judged = {}, {}
    for i in range(offset, offset + n):
        rel = 1000 + i
        noise = [10_000 * (i + 1) + j for j in range(20)]
        dense = [(cid, 0.9 - 0.01 * r) for r, cid in enumerate(noise[:14])] + [(rel, 0.75)] + \
                [(cid, 0.7 - 0.01 * r) for r, cid in enumerate(noise[14:])]
        sparse = [(rel, 10.0)] + [(cid, 6.0 - 0.5 * r) for r, cid in enumerate(noise[:9])]
        legs[f"q{i}"] = (dense, sparse)
        judged[f"q{i}"] = {rel: 3}
    return legs, judged


def test_ndcg10_is_graded_and_normalised_by_the_ideal_order():
    assert ndcg10([1, 2], {1: 3, 2: 1}) == pytest.approx(1.0)
    assert ndcg10([2, 1], {1: 3, 2: 1}) < 1.0
    assert ndcg10([5, 6], {1: 3}) == 0.0


def test_a_setting_that_wins_on_held_out_queries_is_adopted_with_its_evidence():
    legs, judged = _sparse_knows_legs(40)
    result = choose(legs=legs, judged=judged, min_queries=30)
    assert result.adopted, result.reason
    assert result.setting.method in ("weighted", "dbsf") and result.setting.sparse > result.setting.dense
    confirm = result.evidence["confirm"]
    assert confirm["queries"] == 20 and confirm["gain"] >= 0.01 and confirm["gain_lower_95"] > 0
    assert confirm["best"] == pytest.approx(1.0) and confirm["default"] < 1.0
    assert result.evidence["best_all_queries"] >= max(result.evidence["legs"].values())
    assert result.as_dict()["setting"] == result.setting.as_dict()


def test_too_few_judged_queries_keep_the_default_and_say_how_many_are_needed():
    legs, judged = _sparse_knows_legs(20)
    result = choose(legs=legs, judged=judged, min_queries=30)
    assert not result.adopted and result.setting == DEFAULT
    assert "20 judged queries; at least 30" in result.reason and result.as_dict()["setting"] is None


def test_a_tie_keeps_the_default():
    legs = {f"q{i}": ([(i, 0.9), (99, 0.5)], [(i, 5.0), (98, 1.0)]) for i in range(40)}
    judged = {f"q{i}": {i: 2} for i in range(40)}
    result = choose(legs=legs, judged=judged, min_queries=30)
    assert not result.adopted and "default is the best" in result.reason


def test_a_gain_the_held_out_half_does_not_confirm_is_not_adopted():
    """Pick half: sparse knows every answer. Confirm half: dense does and sparse misleads. The pick (a
    sparse-heavy fusion) loses on the confirm half, so the default stays."""
    legs, judged = _sparse_knows_legs(40)
    queries = sorted(judged)
    import random

    random.Random(15).shuffle(queries)
    for q in queries[20:]:
        dense, sparse = legs[q]
        rel = next(iter(judged[q]))
        legs[q] = ([(rel, 0.95)] + [c for c in dense if c[0] != rel], [c for c in sparse if c[0] != rel][:9]
                   + [(rel, 0.1)])
    result = choose(legs=legs, judged=judged, min_queries=30)
    assert not result.adopted and result.setting == DEFAULT
    assert result.evidence["confirm"]["gain"] < 0.01


# ------------------------------------------------------------------------------------------ end to end
@pytest.fixture
def judged_project(make_user, make_project, code_repo, edge_index):
    from search.models import Chunk, Feedback, QuerySession

    owner = make_user("owner@example.com")
    project = make_project("shop", owner)
    ds, _ = ingest(project, "src", code_repo, repo="shop")
    chunks = {c.symbol.rsplit(".", 1)[-1]: c for c in Chunk.objects.filter(dataset=ds) if c.symbol}
    asks = {"take credits from a wallet": "deduct_credits", "give a bonus to a wallet": "grantBonus",
            "list the products": "listProducts", "checkout the cart total": "checkoutCart",
            "the balance of a user": "Wallet", "HTTP routes of the shop": "listProducts"}
    for q, symbol in asks.items():
        session = QuerySession.objects.create(project=project, query=q, kind="context")
        Feedback.objects.create(session=session, chunk=chunks[symbol], relevance=3, user=owner)
    return project, owner


@pytest.mark.django_db
def test_choose_fusion_stores_its_decision_and_the_admin_shows_the_evidence(judged_project, client, make_user):
    project, _ = judged_project
    out = StringIO()
    call_command("choose_fusion", "--project", "shop", "--min-queries", "4", stdout=out)
    text = out.getvalue()
    assert "pick half: 3 queries" in text and "single legs on all judged queries" in text
    project.refresh_from_db()
    assert fusion_of(project)["evidence"]["judged_queries"] == 6 and fusion_of(project)["reason"] in text
    assert fusion_of(project)["evidence"]["pick"]["grid"]  # every setting's score on the pick half

    client.force_login(make_user("boss@example.com", staff=True))
    page = client.get(f"/admin/projects/project/{project.pk}/change/").content.decode()
    assert "fusion, from feedback" in page.lower() and "judged queries" in page and "pick half (3 q)" in page

    out = StringIO()
    call_command("choose_fusion", "--project", "shop", stdout=out)  # default minimum: 30
    assert "6 judged queries; at least 30 are needed" in out.getvalue()


@pytest.mark.django_db
def test_a_query_that_names_no_fusion_runs_the_projects_adopted_setting(judged_project, client_for):

    project, owner = judged_project
    client = client_for(owner)
    body = {"q": "take credits from a wallet"}
    plain = client.post("/api/projects/shop/query", body, format="json").json()
    assert plain["fusion_source"] == "default" and plain["fusion_params"] == CODE_DEFAULT.as_dict()

    adopted = FusionSetting("weighted", 60, 0.3, 0.7)
    save_fusion(project=project, choice={"setting": adopted.as_dict(), "label": adopted.label})
    data = client.post("/api/projects/shop/query", body, format="json").json()
    assert data["fusion"] == "weighted" and data["fusion_source"] == "project"
    assert data["fusion_params"] == adopted.as_dict()
    top = data["results"][0]["why"]
    assert top["fused_score"] <= 1.0  # a min-max score fusion, not RRF's 1/(k + rank) sums

    named = client.post("/api/projects/shop/query", {**body, "fusion": "rrf"}, format="json").json()
    assert named["fusion_source"] == "request" and named["fusion_params"]["rrf_k"] == 60
    assert named["results"][0]["why"]["fused_score"] < 0.05


@pytest.mark.django_db
def test_the_admin_action_runs_the_choice_in_the_web_process_and_says_what_it_decided(judged_project, client,
                                                                                        make_user):
    project, _ = judged_project
    client.force_login(make_user("boss@example.com", staff=True))
    resp = client.post("/admin/projects/project/", {"action": "choose_fusion", "_selected_action": [project.pk]},
                       follow=True)
    assert resp.status_code == 200
    page = resp.content.decode().lower()
    assert "shop: kept the default (weighted dense 0.6 / sparse 0.4): 6 judged queries; at least 30 are needed" in page
    project.refresh_from_db()
    assert fusion_of(project)["reason"] == "6 judged queries; at least 30 are needed"


def test_the_default_follows_the_kind_searched_prose_and_code_alone_get_the_fusion_their_labelled_data_chose():
    assert kind_default({"web"}) == kind_default({"beir", "web"}) == PROSE_DEFAULT
    assert kind_default({"code"}) == CODE_DEFAULT
    assert kind_default({"code", "web"}) == kind_default({"rules"}) == DEFAULT
    assert kind_default(set()) == DEFAULT


@pytest.mark.django_db
def test_a_web_only_project_runs_the_prose_default_and_says_so(make_user, make_project, edge_index, tmp_path,
                                                                client_for):
    from tests.search.ctx_fixtures import GUIDE_HTML

    owner = make_user("web@example.com")
    project = make_project("docs", owner)
    site = tmp_path / "site"
    site.mkdir()
    (site / "guide.html").write_text(GUIDE_HTML)
    ingest(project, "site", site, kind="web")
    data = client_for(owner).post("/api/projects/docs/query", {"q": "when are refunds issued?"},
                                  format="json").json()
    assert data["fusion"] == "dbsf" and data["fusion_source"] == "default"
    assert data["fusion_params"] == PROSE_DEFAULT.as_dict()
    assert "Refunds" in data["results"][0]["text"]


@pytest.mark.django_db
def test_choose_fusion_names_a_missing_project_and_a_minimum_too_small(edge_index):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no project 'nosuch'"):
        call_command("choose_fusion", "--project", "nosuch", stdout=StringIO())
    with pytest.raises(CommandError, match="at least 2"):
        call_command("choose_fusion", "--project", "nosuch", "--min-queries", "1", stdout=StringIO())


_TOPICS = [("parse_invoice", "Read an invoice file and return its line items", "lines = text.splitlines()"),
           ("send_reminder", "Email a payment reminder to the customer who owes money", "mailer.send(customer)"),
           ("compute_tax", "Work out the value added tax for a basket of goods", "rate = 0.2"),
           ("refund_order", "Give the buyer their money back for a cancelled order", "ledger.credit(order)"),
           ("rotate_logs", "Compress yesterday's log files and delete the oldest ones", "gzip.open(path)"),
           ("resize_image", "Scale a picture down so its longest side fits the thumbnail", "img.thumbnail(size)"),
           ("hash_password", "Derive a salted key from a password for storage", "salt = os.urandom(16)"),
           ("merge_carts", "Combine a guest basket with the signed-in user's basket", "items = a + b"),
           ("schedule_backup", "Plan the nightly copy of the database to remote storage", "cron.add(job)"),
           ("detect_language", "Guess which human language a text is written in", "scores = {}"),
           ("throttle_requests", "Slow down clients that call the API too often", "bucket.take()"),
           ("export_report", "Write the monthly sales figures to a spreadsheet file", "sheet.save(path)")]


@pytest.fixture
def documented_repo(tmp_path):
    root = tmp_path / "billing"
    (root / "billing").mkdir(parents=True)
    for i, (name, doc, body) in enumerate(_TOPICS):
        (root / "billing" / f"m{i}.py").write_text(
            f'def {name}(value):\n    """{doc}."""\n    {body}\n    return value\n')
    return root


@pytest.mark.django_db
def test_a_code_project_without_feedback_chooses_on_its_own_docstrings(documented_repo, make_user, make_project,
                                                                       edge_index, client):
    from search.models import Chunk, Dataset

    project = make_project("books", make_user("keeper@example.com"))
    ingest(project, "src", documented_repo, repo="billing")
    out = StringIO()
    call_command("choose_fusion", "--project", "books", "--self-judged", "--min-queries", "6", stdout=out)
    assert "dry run: nothing stored" in out.getvalue()  # a self-judged choice is stored only with --adopt
    project.refresh_from_db()
    assert not fusion_of(project)
    out = StringIO()
    call_command("choose_fusion", "--project", "books", "--self-judged", "--adopt", "--min-queries", "6", stdout=out)
    text = out.getvalue()
    assert "self-judged queries: 12 documented functions" in text and "pick half: 6 queries" in text
    project.refresh_from_db()
    ev = fusion_of(project)["evidence"]
    assert ev["source"] == "self-judged" and ev["pairs"] == 12 and ev["pick"]["queries"] == 6
    assert ev["baseline"] == CODE_DEFAULT.label  # what a code project runs without a choice
    assert ("confirm" in ev) == (ev["pick"]["best"] != ev["baseline"])  # confirmed only when the pick differs
    # the queries were searched over the functions without their docstrings, in an evaluation dataset of `eval`
    copy = Dataset.objects.get(name=ev["evaluation_dataset"])
    assert copy.is_evaluation and copy.project.slug == "eval"
    texts = list(Chunk.objects.filter(dataset=copy).values_list("text", flat=True))
    assert len(texts) >= 12 and not any("Email a payment reminder" in t for t in texts)
    assert any("mailer.send(customer)" in t for t in texts)
    client.force_login(make_user("boss@example.com", staff=True))
    page = client.get(f"/admin/projects/project/{project.pk}/change/").content.decode()
    assert "12 self-judged (docstring → function, no feedback; at least 6)" in page


@pytest.mark.django_db
def test_self_judged_needs_enough_documented_functions_and_a_code_only_project(documented_repo, make_user,
                                                                              make_project, edge_index, tmp_path):
    from search.quality.self_judged import choose_self_judged
    from tests.search.ctx_fixtures import GUIDE_HTML

    project = make_project("few", make_user("few@example.com"))
    ingest(project, "src", documented_repo, repo="billing")
    few = choose_self_judged(project=project, save=False)  # default minimum: 30
    assert not few.adopted and few.reason == "12 documented functions; at least 30 are needed"
    site = tmp_path / "site"
    site.mkdir()
    (site / "guide.html").write_text(GUIDE_HTML)
    ingest(project, "docs", site, kind="web")
    mixed = choose_self_judged(project=project, min_queries=6, save=False)
    assert not mixed.adopted and "also searches web" in mixed.reason and mixed.evidence["pairs"] == 12
