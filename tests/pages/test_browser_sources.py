"""Dataset sources in a real browser: a member adds a git source to a dataset on its page, is told a server path is
for staff, syncs now, and watches the sync (run by a real Celery worker) fail with its reason shown as the last
error and in the sync history; a viewer sees the same, with no form and no button.

The failing source is a closed port on 127.0.0.1, allowed for the web process and the worker alike
(SOURCES_ALLOWED_NETWORKS in the worker's environment), so it fails fast whatever the git fetcher does.
"""
from __future__ import annotations

import re
import socket

import pytest

from tests.pages.test_browser import SHOTS
from tests.pages.test_browser_self_serve import browser  # noqa: F401 - fixture: one Chromium per module
from tests.search.sources.git_fixtures import git_remote  # noqa: F401 - fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-secret-123"


@pytest.fixture
def loopback_allowed(monkeypatch, settings):
    """127.0.0.1 may be fetched from: here and in the worker started after this fixture."""
    monkeypatch.setenv("SOURCES_ALLOWED_NETWORKS", "127.0.0.1/32")
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]


def _login(browser, base: str, email: str):
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(60000)
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", email)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit], input[type=submit]")
    page.wait_for_url(re.compile(r".*/$"))
    return context, page


def test_a_member_adds_a_git_source_syncs_it_and_sees_the_failure(browser, live_server, loopback_allowed,
                                                                   celery_worker_proc, make_user, make_project):
    from search.models import Dataset, IngestJob, Source

    owner, viewer = make_user("src-owner@example.com"), make_user("src-viewer@example.com")
    project = make_project("srcs", owner)
    make_project("srcs", viewer, role="viewer")
    dataset = Dataset.objects.create(project=project, name="app", kind="code")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    repo_url = f"http://127.0.0.1:{port}/org/app.git"
    base = live_server.url
    url = f"{base}/projects/srcs/datasets/{dataset.pk}/"
    ctx, page = _login(browser, base, owner.email)
    page.goto(url)
    assert "follows no git repository" in page.inner_text("#source")
    assert "for staff only" in page.inner_text("#source-form")

    # a path on the server is refused with a clear message, the form keeps what was typed
    page.fill("#source-form input[name=url]", "/srv/repos/app")
    page.click("#source-form button[type=submit]")
    assert "Only staff may use a path on this server" in page.inner_text("[role=alert]")
    assert page.input_value("#source-form input[name=url]") == "/srv/repos/app"
    assert not Source.objects.exists()

    # a repository URL is accepted and shown; the upload form gives way to the source
    page.fill("#source-form input[name=url]", repo_url)
    page.fill("#source-form input[name=ref]", "main")
    page.click("#source-form button[type=submit]")
    page.wait_for_url(url)
    assert repo_url in page.inner_text("#source") and "manual syncs only" in page.inner_text("#source")
    assert page.locator("#upload").count() == 0
    page.screenshot(path=str(SHOTS / "source-added.png"), full_page=True)

    # sync now: the worker runs it, the page follows the job and reloads when it ends
    page.click("#sync-now")
    page.wait_for_url(url)
    assert page.locator("tr.job").count() == 1
    page.wait_for_selector("#syncs tr.sync[data-status=failed]", timeout=120000)
    job = IngestJob.objects.get(dataset=dataset)
    assert job.status == "failed" and job.options["trigger"] == "manual"
    last_error = page.inner_text(".source-error")
    assert last_error.startswith(job.error[:60]) and page.inner_text("#syncs .summary").startswith(job.error[:60])
    assert "never" not in page.inner_text(".last-sync") and "last success" not in page.inner_text(".last-sync")
    page.screenshot(path=str(SHOTS / "source-sync-failed.png"), full_page=True)
    ctx.close()

    # a viewer sees the source, the error and the history, and can change nothing
    vctx, vpage = _login(browser, base, viewer.email)
    vpage.goto(url)
    assert repo_url in vpage.inner_text("#source") and vpage.locator(".source-error").count() == 1
    assert vpage.locator("#sync-now").count() == 0 and vpage.locator("#source-form").count() == 0
    vctx.close()


def test_staff_follow_a_repository_on_the_page_and_a_second_sync_shows_exactly_the_changed_file(
        browser, live_server, celery_worker_proc, make_user, make_project, git_remote, monkeypatch):
    """A staff member (the only role that may use a path on the server) points a dataset at a file:// repository,
    syncs it (a real worker runs the job), sees the documents and the commit; after a commit that changes one
    function, Sync now again: the history says the sync re-ingested exactly that file."""
    from search.models import Dataset, Document
    from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS

    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    staff = make_user("src-staff@example.com", staff=True)
    dataset = Dataset.objects.create(project=make_project("srcok", staff), name="shop", kind="code")
    first = git_remote.commit({"billing/ledger.py": LEDGER_PY, "web/routes.js": ROUTES_JS}, "first")
    base = live_server.url
    url = f"{base}/projects/srcok/datasets/{dataset.pk}/"
    ctx, page = _login(browser, base, staff.email)
    page.goto(url)
    assert "As staff you may also give a path on this server" in page.inner_text("#source-form")
    page.fill("#source-form input[name=url]", git_remote.url)
    page.click("#source-form button[type=submit]")
    page.wait_for_url(url)
    page.click("#sync-now")
    page.wait_for_url(url)
    page.wait_for_selector("#syncs tr.sync[data-status=done]", timeout=180000)
    assert page.inner_text(".source-commit") == first
    assert "full" in page.inner_text("#syncs .summary") and "2 changed" in page.inner_text("#syncs .summary")
    page.wait_for_selector("#documents td:has-text('billing/ledger.py')")

    second = git_remote.commit({"billing/ledger.py": LEDGER_PY.replace("insufficient credits", "not enough credit"),
                                "web/routes.js": ROUTES_JS}, "one function changes")
    page.click("#sync-now")
    page.wait_for_url(url)
    page.wait_for_function("document.querySelectorAll('#syncs tr.sync[data-status=done]').length == 2",
                           timeout=180000)
    newest = page.locator("#syncs tr.sync").first.inner_text()
    assert "diff" in newest and "1 changed (billing/ledger.py)" in newest and "0 deleted" in newest
    assert page.inner_text(".source-commit") == second and page.locator(".source-error").count() == 0
    assert Document.objects.filter(dataset=dataset).count() == 2
    page.screenshot(path=str(SHOTS / "source-synced.png"), full_page=True)
    ctx.close()
