"""The staff console for the engine: every model browsable, history read-only, dataset upkeep actions."""
from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.urls import reverse

pytestmark = pytest.mark.django_db

FILES = {"pkg/a.py": 'def alpha():\n    """First."""\n    return 1\n',
         "pkg/b.py": 'def beta():\n    """Second."""\n    return 2\n'}


@pytest.fixture
def staff_client(client, make_user):
    client.force_login(make_user("boss@example.com", staff=True))
    return client


@pytest.fixture
def dataset(make_user, make_project, tmp_path):
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    project = make_project("adm", make_user())
    for rel, text in FILES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    ds = Dataset.objects.create(project=project, name="code", kind="code")
    start_ingest(job=IngestJob(dataset=ds, source=str(tmp_path), kind="code", options={"repo": "r"}), sync=True)
    return ds


def test_every_registered_model_lists_and_searches_for_staff(staff_client, dataset):
    for model, model_admin in admin.site._registry.items():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        query = "?q=a" if model_admin.search_fields else ""
        assert staff_client.get(url + query).status_code == 200, url
        obj = model.objects.first()
        if obj is not None:
            change = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_change", args=[obj.pk])
            assert staff_client.get(change).status_code == 200, change


def test_history_models_cannot_be_added_or_edited(staff_client, dataset):
    from search.models import Chunk

    for name in ("search_querysession", "search_rerankresult", "search_feedback", "credits_ledgerentry",
                 "search_chunk", "search_ingestjob"):
        assert staff_client.get(reverse(f"admin:{name}_add")).status_code == 403, name
    chunk = Chunk.objects.first()
    url = reverse("admin:search_chunk_change", args=[chunk.pk])
    staff_client.post(url, {"text": "tampered"})
    chunk.refresh_from_db()
    assert chunk.text != "tampered"


def test_non_staff_cannot_open_the_console(client, make_user):
    client.force_login(make_user("plain@example.com"))
    resp = client.get(reverse("admin:search_chunk_changelist"))
    assert resp.status_code == 302 and "/admin/login/" in resp["Location"]


def test_dataset_page_reports_counts_coverage_and_last_ingest(staff_client, dataset):
    from inference.encoders import dense_model_id

    html = staff_client.get(reverse("admin:search_dataset_change", args=[dataset.pk])).content.decode()
    assert "<b>2</b> documents" in html
    assert f"{dense_model_id()}: 100.0%" in html
    assert "done (2/2 files" in html


def test_reingest_action_queues_a_job_for_the_last_source(staff_client, dataset):
    from search.models import IngestJob

    resp = staff_client.post(reverse("admin:search_dataset_changelist"),
                             {"action": "reingest", "_selected_action": [dataset.pk]})
    assert resp.status_code == 302
    jobs = list(IngestJob.objects.filter(dataset=dataset).order_by("created_at"))
    assert len(jobs) == 2 and jobs[1].source == jobs[0].source and jobs[1].status == "pending"


def test_reembed_recomputes_every_vector_and_queues_upserts(dataset):
    from inference.models import EmbeddingCache
    from search.ingest.maintenance import reembed
    from search.models import Chunk, IndexOutbox

    chunks = Chunk.objects.filter(dataset=dataset)
    EmbeddingCache.objects.filter(text_hash__in=chunks.values("text_hash")).delete()
    outbox_before = IndexOutbox.objects.count()
    stats = reembed(dataset_id=dataset.pk)
    distinct = chunks.values("text_hash").distinct().count()
    assert stats["embedded"] == distinct and stats["chunks"] == chunks.count()
    assert EmbeddingCache.objects.filter(text_hash__in=chunks.values("text_hash")).count() == distinct
    assert IndexOutbox.objects.count() - outbox_before == chunks.count()
    assert reembed(dataset_id=dataset.pk)["embedded"] == 0  # nothing missing now


def test_ingest_job_list_shows_percent_and_refreshes_while_running(staff_client, dataset):
    from search.models import IngestJob

    IngestJob.objects.create(dataset=dataset, source="/x", kind="code", status="running", files_total=4,
                             files_done=1)
    resp = staff_client.get(reverse("admin:search_ingestjob_changelist"))
    assert 'value="25"' in resp.content.decode() and resp["Refresh"] == "3"


def test_editing_a_traversal_config_saves_a_new_active_version(staff_client):
    from search.models import TraversalConfig
    from search.rules.traversal import save_config

    cfg = save_config(ruleset_id="srd", names={"condition": ["Grappled"]})
    url = reverse("admin:search_traversalconfig_change", args=[cfg.pk])
    form = {"ruleset_id": "srd", "is_active": "on", "condition_names": "Grappled,Prone", "spell_names": "",
            "feat_names": "", "item_names": "", "action_names": "", "player_keywords": "i,my",
            "gm_keywords": "dm", "intent_patterns": '{"rule": "how does"}', "policies": "{}"}
    assert staff_client.post(url, form).status_code == 302
    versions = list(TraversalConfig.objects.filter(ruleset_id="srd").order_by("version"))
    assert [v.version for v in versions] == [1, 2]
    assert not versions[0].is_active and versions[1].is_active
    assert versions[1].condition_names == ["Grappled", "Prone"]


# --------------------------------------------------------------------------- dataset sources
PUBLIC_GIT = "https://93.184.216.34/org/repo.git"


@pytest.fixture
def sources(make_project, settings):
    """Two code datasets with git sources: one healthy, one whose last two syncs failed."""
    from search.models import Dataset, Source

    settings.SOURCES_ALLOWED_NETWORKS = []
    project = make_project("srcadm")
    ok = Source.objects.create(dataset=Dataset.objects.create(project=project, name="ok", kind="code"), type="git",
                               config={"url": PUBLIC_GIT, "ref": "", "subdir": ""})
    bad = Source.objects.create(dataset=Dataset.objects.create(project=project, name="bad", kind="code"), type="git",
                                config={"url": PUBLIC_GIT.replace("repo", "gone"), "ref": "", "subdir": ""},
                                consecutive_failures=2, last_error="GitError: repository not found")
    return ok, bad


def test_the_failing_sources_filter_lists_only_sources_whose_syncs_fail_with_their_error(staff_client, sources):
    ok, bad = sources
    html = staff_client.get(reverse("admin:search_source_changelist") + "?health=failing").content.decode()
    assert "GitError: repository not found" in html and "srcadm/bad" in html and "srcadm/ok" not in html
    html = staff_client.get(reverse("admin:search_source_changelist") + "?health=ok").content.decode()
    assert "srcadm/ok" in html and "srcadm/bad" not in html


def test_the_admin_token_is_write_only_and_stored_encrypted(staff_client, sources):
    from search.models import Source
    from search.sources.secrets import source_token

    ok, _ = sources
    url = reverse("admin:search_source_change", args=[ok.pk])
    form = staff_client.get(url).content.decode()
    assert 'type="password" name="token"' in form
    resp = staff_client.post(url, {"type": "git", "config": json.dumps({"url": PUBLIC_GIT, "ref": "main"}),
                                   "interval_s": "3600", "token": "tok-admin-42"})
    assert resp.status_code == 302, resp.content.decode()[-2000:]
    ok.refresh_from_db()
    assert source_token(ok) == "tok-admin-42" and ok.config["ref"] == "main" and ok.interval_s == 3600
    page = staff_client.get(url).content.decode()
    assert "tok-admin-42" not in page and bytes(ok.secret).decode() not in page
    # a save with the token box left blank keeps the token; "remove" clears it
    staff_client.post(url, {"type": "git", "config": json.dumps({"url": PUBLIC_GIT}), "interval_s": ""})
    assert source_token(Source.objects.get(pk=ok.pk)) == "tok-admin-42"
    staff_client.post(url, {"type": "git", "config": json.dumps({"url": PUBLIC_GIT}), "clear_token": "on"})
    assert not Source.objects.get(pk=ok.pk).has_secret


def test_the_admin_refuses_an_unsafe_source_like_the_api(staff_client, sources):
    ok, _ = sources
    url = reverse("admin:search_source_change", args=[ok.pk])
    resp = staff_client.post(url, {"type": "git", "config": '{"url": "http://169.254.169.254/latest"}'})
    assert resp.status_code == 200 and "metadata address" in resp.content.decode()
    ok.refresh_from_db()
    assert ok.config["url"] == PUBLIC_GIT


def test_the_sync_now_action_queues_one_sync_per_source_and_warns_when_one_runs(staff_client, sources):
    from search.models import IngestJob

    ok, bad = sources
    changelist = reverse("admin:search_source_changelist")
    resp = staff_client.post(changelist, {"action": "sync_now", "_selected_action": [ok.pk, bad.pk]}, follow=True)
    jobs = IngestJob.objects.filter(options__origin="sync")
    assert {j.dataset_id for j in jobs} == {ok.dataset_id, bad.dataset_id}
    assert all(j.options["trigger"] == "admin" and j.status == "pending" for j in jobs)
    assert "sync queued" in resp.content.decode()
    resp = staff_client.post(changelist, {"action": "sync_now", "_selected_action": [ok.pk]}, follow=True)
    assert "already queued or running" in resp.content.decode() and jobs.count() == 2
    page = staff_client.get(reverse("admin:search_source_change", args=[ok.pk])).content.decode()
    assert "admin" in page and "pending" in page  # the recent syncs table


def test_ingest_again_on_a_followed_dataset_queues_a_sync_once(staff_client, sources):
    from search.models import IngestJob

    ok, _ = sources
    changelist = reverse("admin:search_dataset_changelist")
    staff_client.post(changelist, {"action": "reingest", "_selected_action": [ok.dataset_id]})
    job = IngestJob.objects.get(dataset=ok.dataset)
    assert job.options == {"origin": "sync", "trigger": "admin", "source_type": "git"} and job.source == PUBLIC_GIT
    resp = staff_client.post(changelist, {"action": "reingest", "_selected_action": [ok.dataset_id]}, follow=True)
    assert "already queued or running" in resp.content.decode() and IngestJob.objects.count() == 1
