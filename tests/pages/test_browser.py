"""Real headless Chromium (Debian's package) driven by Playwright against a live server.

Screenshots of each page land in $TEST_OUTPUT_DIR/screenshots (default test-output/)."""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.fake_llm import fake_llm  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
SHOTS = Path(os.environ.get("TEST_OUTPUT_DIR", "test-output")) / "screenshots"
PASSWORD = "pw-secret-123"


def _chromium() -> str:
    path = os.environ.get("CHROMIUM_PATH") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        raise RuntimeError("Debian's chromium is required for browser tests: apt-get install chromium "
                           "(.ci/run installs it)")
    return path


@pytest.fixture(scope="module")
def browser():
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs an event loop
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser, live_server, member):
    user, _ = member
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.set_default_timeout(30000)
    pg.goto(f"{live_server.url}/accounts/login/")
    pg.fill("input[name=username]", user.email)
    pg.fill("input[name=password]", PASSWORD)
    pg.click("button[type=submit], input[type=submit]")
    pg.wait_for_url(re.compile(r".*/$"))
    yield pg
    context.close()


def test_sign_in_shows_balance(page):
    assert "10 credits" in page.inner_text("header")
    page.screenshot(path=str(SHOTS / "home.png"), full_page=True)


def test_context_search_shows_file_line_result(page, live_server, member, code_dataset):
    _, project = member
    page.goto(f"{live_server.url}/search/")
    page.fill("input[name=q]", "where are credits deducted?")
    page.click("form.search button[type=submit]")
    page.wait_for_selector(".result .span")
    spans = page.locator(".result .span").all_inner_texts()
    assert "billing/ledger.py:4-9" in spans
    page.locator("details.why").first.click()
    page.locator("form.fb button[value='3']").first.click()
    page.wait_for_function("document.querySelector('.fb-msg').textContent.includes('recorded')")
    page.screenshot(path=str(SHOTS / "context-search.png"), full_page=True)


def test_rules_answer_streams_tokens_then_citations(page, live_server, member, rules_dataset):
    page.goto(f"{live_server.url}/rules/")
    page.fill("#q", "what happens when I'm grappled?")
    page.click("#ask button[type=submit]")
    page.wait_for_function("document.getElementById('answer').textContent.length > 0")
    page.wait_for_selector("#citations li a")
    assert "complete" in page.inner_text("#status")
    assert "speed becomes 0" in page.inner_text("#answer")
    assert page.url.endswith("/rules/")  # streamed in place over EventSource, no page load
    page.screenshot(path=str(SHOTS / "rules-qa.png"), full_page=True)


def test_people_search_profile_unlock_drops_balance(page, live_server, member, directory):
    page.goto(f"{live_server.url}/people/")
    page.fill("input[name=query]", "backend engineers in Bangalore open to work")
    page.select_option("select[name=open_to_work_only]", "yes")
    page.click("form.people button[type=submit]")
    page.wait_for_selector(".card.person h3 a")
    assert page.inner_text("#balance") == "9"
    page.screenshot(path=str(SHOTS / "people-search.png"), full_page=True)
    page.locator(".card.person h3 a").first.click()
    page.wait_for_selector("#unlock")
    page.screenshot(path=str(SHOTS / "person-profile.png"), full_page=True)
    before = int(page.inner_text("#balance"))
    page.click("#unlock")
    page.wait_for_selector("#contact")
    assert int(page.inner_text("#balance")) == before - 1
    page.screenshot(path=str(SHOTS / "person-unlocked.png"), full_page=True)


@pytest.fixture
def llm_worker(fake_llm, monkeypatch, request):
    """A Celery worker process that talks to this test's fake LLM (the live server thread reads settings)."""
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("LLM_MODEL", fake_llm.model)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    return request.getfixturevalue("celery_worker_proc")


def test_people_search_shows_relaxation_notice_then_refined_reasons(page, live_server, member, directory,
                                                                    fake_llm, llm_worker):
    """The page says what the search relaxed, then shows the LLM's refined reasons (after
    the paid response, from Celery, by polling), marked as refined, with the rule-based ones kept."""
    import json

    fake_llm.reply("not json", when="clean up a recruiter")  # query parsing falls back to the deterministic parser

    def why(body):
        people = json.loads(body["messages"][1]["content"])["people"]
        return json.dumps({"people": [{"id": p["id"], "why_matched": [f"Refined: {p['name']} fits"]} for p in people]})

    fake_llm.reply(why, when="explain why each person matches")
    page.goto(f"{live_server.url}/people/")
    page.fill("input[name=query]", "backend engineers at Flipkart in Pune")
    page.click("form.people button[type=submit]")
    page.wait_for_selector("#relaxation")
    assert "showing people from other cities" in page.inner_text("#relaxation")
    assert page.locator(".card.person .why.deterministic li").count() > 0
    page.wait_for_selector(".why.refined li", timeout=60000)
    assert page.locator(".why.refined li").first.inner_text().startswith("Refined: ")
    assert page.locator(".badge").first.inner_text() == "refined by LLM"
    assert page.locator(".card.person .why.deterministic li").count() > 0  # kept
    assert "rule-based reasons kept" in page.inner_text("#refinement")
    page.screenshot(path=str(SHOTS / "people-search-refined.png"), full_page=True)


def _two_weeks_of_activity(*, staff, project) -> None:
    """Logged rows as the product writes them, spread over the last days, so the charts have lines."""
    from datetime import timedelta

    from django.utils import timezone

    from credits.ledger import deduct, grant
    from credits.models import LedgerEntry
    from people.models import Search
    from search.models import DailyMetric, EvaluationRun, QuerySession

    now = timezone.now()
    grant(user=staff, amount=500)
    for d in range(10):
        when = now - timedelta(days=d)
        for i in range(3 + d % 4):
            for kind, ms in (("context", 120 + 9 * d + i), ("rules", 210 + 5 * i)):
                qs = QuerySession.objects.create(user=staff, project=project, kind=kind, query=f"q{d}-{i}",
                                                 timings={"total_ms": ms}, result_count=10)
                QuerySession.objects.filter(pk=qs.pk).update(created_at=when)
            s = Search.objects.create(searcher=staff, query_text=f"backend {d}-{i}", expires_at=when,
                                      latency_ms=300 + 11 * i)
            Search.objects.filter(pk=s.pk).update(created_at=when)
            e = deduct(user=staff, amount=1, reason="search", reference_type="search_id", reference_id=str(s.pk))
            LedgerEntry.objects.filter(pk=e.pk).update(created_at=when)
        DailyMetric.objects.create(project=project, day=when.date(), kind="context", judged_sessions=4 + d,
                                   mrr_at_10=0.55 + 0.02 * (d % 5), ndcg_at_10=0.5 + 0.03 * (d % 4))
    EvaluationRun.objects.create(collection="ctx-minilm (scifact)", queries=300,
                                 results={"dense": {"ndcg@10": 0.645}, "fused": {"ndcg@10": 0.667},
                                          "fused+rerank": {"ndcg@10": 0.688}})


def test_admin_dashboard_shows_charts(browser, live_server, make_user, make_project):
    staff = make_user("staff@example.com", staff=True)
    _two_weeks_of_activity(staff=staff, project=make_project("dash", staff))
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.goto(f"{live_server.url}/admin/login/?next=/admin/dashboard/")
    pg.fill("input[name=username]", staff.email)
    pg.fill("input[name=password]", PASSWORD)
    pg.click("input[type=submit]")
    pg.wait_for_selector("#chart-volume svg")
    assert pg.locator("figure.chart svg").count() == 4
    body = pg.inner_text("body")
    assert "dash" in body and "ctx-minilm (scifact)" in body and "fused+rerank: 0.688" in body
    for kind in ("context", "rules", "people"):  # 10 days of 3..6 queries each: 43 per kind
        assert f"{kind}: 43 queries" in body, kind
    pg.screenshot(path=str(SHOTS / "admin-dashboard.png"), full_page=True)
    context.close()
