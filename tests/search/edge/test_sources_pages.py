"""The dataset page's source forms (search.edge.pages.sources): add a git or web source, see it, sync now, the sync
history with the failure, remove it; refused sources re-render the page with the reason and the form refilled.

A sync that must fail points at a closed port on 127.0.0.1 (allowed here by SOURCES_ALLOWED_NETWORKS), so it
fails fast whatever the git fetcher does."""
from __future__ import annotations

import html as htmllib
import socket

import pytest
from django.test import Client

from search.models import IngestJob, Source

pytestmark = pytest.mark.django_db
PUBLIC_GIT = "https://93.184.216.34/org/repo.git"


@pytest.fixture
def pages(make_user, make_project, settings):
    from search.models import Dataset

    settings.SOURCES_ALLOWED_NETWORKS = []
    owner, viewer = make_user("owner@example.com"), make_user("viewer@example.com")
    project = make_project("team", owner)
    make_project("team", viewer, role="viewer")
    code = Dataset.objects.create(project=project, name="code", kind="code")
    web = Dataset.objects.create(project=project, name="docs", kind="web")
    a, b = Client(), Client()
    a.force_login(owner)
    b.force_login(viewer)
    return {"owner": a, "viewer": b, "code": code, "web": web, "url": f"/projects/team/datasets/{code.pk}/",
            "web_url": f"/projects/team/datasets/{web.pk}/"}


def _text(resp) -> str:
    return htmllib.unescape(resp.content.decode())


def test_an_owner_adds_a_git_source_and_the_page_shows_it_and_hides_the_upload(pages):
    owner, url = pages["owner"], pages["url"]
    before = _text(owner.get(url))
    assert 'id="source-form"' in before and "follows no git repository" in before and 'id="upload"' in before
    resp = owner.post(url + "source", {"type": "git", "url": PUBLIC_GIT, "ref": "main", "interval_s": "",
                                       "token": "s3cret-token"})
    assert resp.status_code == 302 and resp["Location"] == url
    source = Source.objects.get(dataset=pages["code"])
    assert source.config == {"url": PUBLIC_GIT, "ref": "main", "subdir": ""} and source.interval_s is None
    page = _text(owner.get(url))
    assert PUBLIC_GIT in page and "manual syncs only" in page and "token stored" in page
    assert "s3cret-token" not in page and 'id="upload"' not in page and 'id="sync-now"' in page


def test_a_web_source_comes_from_the_form_lines(pages):
    resp = pages["owner"].post(pages["web_url"] + "source", {
        "type": "web", "seeds": "https://93.184.216.34/docs/\r\nhttps://93.184.216.34/blog/\r\n", "scope": "prefix",
        "max_pages": "50", "max_depth": "2", "include": "/docs/\n", "exclude": "", "interval_s": "3600"})
    assert resp.status_code == 302
    source = Source.objects.get(dataset=pages["web"])
    assert source.config == {"seeds": ["https://93.184.216.34/docs/", "https://93.184.216.34/blog/"],
                             "scope": "prefix", "max_pages": 50, "max_depth": 2, "include": ["/docs/"],
                             "exclude": []}
    assert source.interval_s == 3600 and source.next_sync_at is not None
    assert "every 3600 s" in _text(pages["viewer"].get(pages["web_url"]))


@pytest.mark.parametrize("form,status,says", [
    ({"type": "git", "url": "http://127.0.0.1:9/org/repo.git"}, 400, "loopback, private, link-local or metadata"),
    ({"type": "git", "url": "http://169.254.169.254/latest"}, 400, "loopback, private, link-local or metadata"),
    ({"type": "git", "url": "/srv/repos/app"}, 403, "Only staff may use a path on this server"),
    ({"type": "git", "url": PUBLIC_GIT, "interval_s": "10"}, 400, "interval_s"),
    ({"type": "git", "url": PUBLIC_GIT, "interval_s": "１２"}, 400, "interval_s"),
    ({"type": "git", "url": "https://93.184.216.34/a\x00b.git"}, 400, "NUL"),
    ({"type": "web", "seeds": "https://93.184.216.34/"}, 400, "A web source feeds a web dataset"),
])
def test_a_refused_source_re_renders_the_page_with_the_reason_and_the_form_refilled(pages, form, status, says):
    resp = pages["owner"].post(pages["url"] + "source", form)
    page = _text(resp)
    assert resp.status_code == status and says in page, page[:500]
    assert not Source.objects.exists()
    if "\x00" not in form.get("url", "") and form.get("url"):
        assert f'value="{form["url"]}"' in page


def test_the_staff_only_note_is_shown_to_members_and_the_path_option_to_staff(pages, make_user):
    from projects.models import Membership

    assert "is for staff only" in _text(pages["owner"].get(pages["url"]))
    staff = make_user("ops@example.com", staff=True)
    Membership.objects.create(project=pages["code"].project, user=staff, role="editor")
    client = Client()
    client.force_login(staff)
    assert "As staff you may also give a path on this server" in _text(client.get(pages["url"]))


def test_sync_now_queues_a_job_and_the_failure_shows_as_the_last_error_and_in_the_history(pages, settings):
    from search.ingest.jobs import run_job

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    owner, url = pages["owner"], pages["url"]
    owner.post(url + "source", {"type": "git", "url": f"http://127.0.0.1:{port}/org/repo.git"})
    assert owner.post(url + "sync").status_code == 302
    job = IngestJob.objects.get()
    assert job.options["trigger"] == "manual" and "running now" in _text(owner.get(url))
    again = owner.post(url + "sync")
    assert again.status_code == 409 and "already queued or running" in _text(again)
    with pytest.raises(Exception):  # noqa: B017 - the fetcher's own error; the page shows it
        run_job(job=job)
    job.refresh_from_db()
    page = _text(pages["viewer"].get(url))
    assert job.status == "failed" and 'class="source-error failed"' in page and job.error in page
    assert 'id="syncs"' in page and 'data-status="failed"' in page
    assert 'id="sync-now"' not in page and 'id="source-form"' not in page  # a viewer sees, does not act


def test_a_viewer_cannot_set_sync_or_remove(pages):
    Source.objects.create(dataset=pages["code"], type="git", config={"url": PUBLIC_GIT, "ref": "", "subdir": ""})
    viewer, url = pages["viewer"], pages["url"]
    assert viewer.post(url + "source", {"type": "git", "url": PUBLIC_GIT}).status_code == 403
    assert viewer.post(url + "sync").status_code == 403
    assert viewer.post(url + "source/remove").status_code == 403
    assert Source.objects.count() == 1 and not IngestJob.objects.exists()


def test_removing_the_source_brings_the_upload_back(pages):
    owner, url = pages["owner"], pages["url"]
    owner.post(url + "source", {"type": "git", "url": PUBLIC_GIT})
    assert owner.post(url + "source/remove").status_code == 302
    assert not Source.objects.exists() and 'id="upload"' in _text(owner.get(url))
    assert owner.post(url + "sync").status_code == 404  # no source: the page says so
