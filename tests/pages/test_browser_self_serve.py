"""Self-serve adoption in a real browser: a new team adopts the platform with nothing but Chromium.

Sign up, create a project, add a dataset, upload a zip of a small repository, watch the progress bar reach
100 % (a real Celery worker runs the job), find a function of it with a context search, invite a second user
as viewer, who can search but not upload, then delete the dataset; reconcile finds 0 orphan points.
"""
from __future__ import annotations

import io
import re
import zipfile

import pytest
from django.core import mail

from tests.pages.test_browser import CHROMIUM_ARGS, SHOTS, _chromium
from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
PASSWORD = "a-long-team-passphrase-42"


@pytest.fixture(scope="module")
def browser():
    import os

    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=_chromium(), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def _sign_up(browser, base: str, email: str):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(60000)
    page.goto(f"{base}/accounts/login/")
    page.click("a[href='/accounts/signup/']")
    page.fill("#id_email", email)
    page.fill("#id_password", PASSWORD)
    page.fill("#id_password2", PASSWORD)
    page.click("main button[type=submit]")
    # the same answer whether or not the address has an account; the account comes from the emailed link
    assert email in page.inner_text("#sent")
    link = re.search(r"https?://\S+/accounts/signup/confirm/\S+", mail.outbox[-1].body).group(0)
    page.goto(link)
    page.fill("#id_password", PASSWORD)  # the sign-up's password again: a link alone creates no account
    page.click("#confirm")
    page.wait_for_url(f"{base}/")
    assert email in page.inner_text("header")
    return context, page


def test_a_new_team_signs_up_uploads_a_repo_searches_invites_a_viewer_and_deletes_it(browser, live_server,
                                                                                   celery_worker_proc, tmp_path,
                                                                                   monkeypatch):
    from search.engine.index import get_index
    from search.engine.reconcile import reconcile

    # earlier tests' rolled-back transactions leave young gaps in the outbox ids, behind which the applier
    # waits GAP_GRACE_S (30 s) in case a transaction is still in flight; here none is
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    # the process's store outlives earlier transactional tests, whose teardown TRUNCATEs (no row triggers):
    # start from an exact index so the end state is this flow's alone
    assert reconcile(index=get_index(), fix=True, record=False).after.counts() == {"orphans": 0, "missing": 0,
                                                                                   "stale": 0}

    base = live_server.url
    owner_ctx, page = _sign_up(browser, base, "founder@team.example")
    viewer_ctx, vpage = _sign_up(browser, base, "reader@team.example")

    # create a project and a dataset
    page.click("a[href='/projects/new']")
    page.fill("main input[name=name]", "Team Shop")
    page.click("main button[type=submit]")  # (the header's first submit button is "Log out")
    page.wait_for_url(re.compile(r".*/projects/team-shop/settings$"))
    page.fill("#datasets input[name=name]", "shop")
    page.click("#datasets button:has-text('Add dataset')")
    page.wait_for_url(re.compile(r".*/projects/team-shop/datasets/\d+/$"))
    dataset_url = page.url

    # upload a zip of a small repository and watch the job finish
    repo = tmp_path / "shop.zip"
    with zipfile.ZipFile(repo, "w") as zf:
        zf.writestr("shop-main/billing/ledger.py", LEDGER_PY)
        zf.writestr("shop-main/web/routes.js", ROUTES_JS)
    page.set_input_files("input[type=file]", str(repo))
    page.click("#upload button[type=submit]")
    page.wait_for_url(dataset_url)
    assert page.locator("progress").count() >= 1
    page.screenshot(path=str(SHOTS / "dataset-upload-progress.png"), full_page=True)
    page.wait_for_selector("tr.job[data-status=done]", timeout=180000)
    page.wait_for_selector("#documents td:has-text('billing/ledger.py')", timeout=60000)
    assert page.locator("tr.job progress").first.get_attribute("value") == "100"
    page.screenshot(path=str(SHOTS / "dataset-uploaded.png"), full_page=True)

    # a context search finds a function of the upload
    page.goto(f"{base}/search/?project=team-shop&q=deduct+credits+from+a+wallet")
    first = page.locator(".result").first.inner_text()
    assert "billing/ledger.py" in first and "deduct_credits" in first

    # invite the second user as a viewer
    page.goto(f"{base}/projects/team-shop/settings")
    page.fill("#members input[name=email]", "reader@team.example")
    page.select_option("#members select[name=role]", "viewer")
    page.click("#members button:has-text('Add member')")
    page.wait_for_selector("#members td:has-text('reader@team.example')")

    # the viewer can search, but sees no upload form and is refused an upload
    vpage.goto(f"{base}/search/?project=team-shop&q=deduct+credits+from+a+wallet")
    assert "billing/ledger.py" in vpage.inner_text("main")
    vpage.goto(dataset_url)
    assert vpage.locator("input[type=file]").count() == 0
    token = next(c["value"] for c in viewer_ctx.cookies() if c["name"] == "csrftoken")
    refused = viewer_ctx.request.post(dataset_url + "upload", headers={"Referer": dataset_url},
                                      multipart={"csrfmiddlewaretoken": token,
                                                 "file": {"name": "x.py", "mimeType": "text/x-python",
                                                          "buffer": io.BytesIO(b"x = 1\n").getvalue()}})
    assert refused.status == 403

    # the owner deletes the dataset; the index keeps no point of it
    page.goto(f"{base}/projects/team-shop/settings")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click("#datasets button:has-text('Delete')")
    page.wait_for_selector("#datasets :text('no datasets of its own yet')")
    report = reconcile(index=get_index())
    assert report.exact and report.found.counts()["orphans"] == 0 and report.found.points == 0, report.as_dict()
    owner_ctx.close()
    viewer_ctx.close()
