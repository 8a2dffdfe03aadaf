"""Source types and job types are registries: a new source type is one SourceType plus one registry line, and it is
then set, checked, shown and synced through the same API and services as git and web; a job type registers its
handler the same way. The test registers a "notes" type (its config carries the pages themselves)."""
from __future__ import annotations

from typing import Any

import pytest

from config.errors import BadInput
from search.ingest import jobs
from search.ingest.web import web_document_from_bytes
from search.ingest.writer import sync_documents
from search.models import Document, IngestJob, Source
from search.sources import registry
from search.sources.base import SourceSpec, SourceType, text

pytestmark = pytest.mark.django_db


def _parse(raw: dict[str, Any]) -> SourceSpec:
    notes = raw.get("notes")
    if not isinstance(notes, dict) or not notes:
        raise BadInput("source.notes must be an object of page name -> Markdown.", field="source.notes")
    return SourceSpec(type="notes", config={"notes": {text(k, "source.notes"): text(v, f"source.notes.{k}")
                                                      for k, v in notes.items()}})


def _sync(*, job: IngestJob, source: Source, progress: Any = None) -> dict[str, Any]:
    drafts = [web_document_from_bytes(rel=f"{name}.md", data=body.encode(), markdown=True)[0]
              for name, body in sorted(source.config["notes"].items())]
    stats = sync_documents(dataset=job.dataset, drafts=drafts, job=job, progress=progress)
    return {"pages": stats["files"]}


NOTES = SourceType(name="notes", kinds=("web",), fields=frozenset({"notes"}), parse=_parse,
                   display=lambda config: f"notes:{len(config['notes'])}", sync=_sync)


@pytest.fixture
def notes_type():
    registry.register(NOTES)
    yield NOTES
    registry.SOURCE_TYPES.pop("notes")


@pytest.fixture
def web_dataset(make_user, make_project, client_for):
    from search.models import Dataset

    owner = make_user("notes-owner@example.com")
    project = make_project("notes", owner)
    ds = Dataset.objects.create(project=project, name="handbook", kind="web")
    return client_for(owner), ds, f"/api/projects/notes/datasets/{ds.pk}"


def test_a_registered_source_type_is_set_shown_and_synced_through_the_api(notes_type, web_dataset):
    from search.sources.sync import start_sync

    client, ds, base = web_dataset
    r = client.put(f"{base}/source", {"source": {"type": "notes", "notes": {
        "deploys": "# Deploys\n\nRoll back with `make rollback` within ten minutes.",
        "oncall": "# On call\n\nPage the secondary after fifteen minutes."}}}, format="json")
    assert r.status_code == 200, r.content
    assert client.get(base).json()["source"]["url"] == "notes:2"
    job = start_sync(dataset=ds, run_now=True)
    assert job.status == IngestJob.Status.DONE and job.options["source_type"] == "notes"
    assert set(Document.objects.filter(dataset=ds).values_list("path", flat=True)) == {"deploys.md", "oncall.md"}
    assert Source.objects.get(dataset=ds).state == {"pages": 2}


def test_a_registered_source_type_is_checked_like_the_built_in_ones(notes_type, web_dataset):
    client, _ds, base = web_dataset
    bad = client.put(f"{base}/source", {"source": {"type": "notes", "notes": []}}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "source.notes"
    stray = client.put(f"{base}/source", {"source": {"type": "notes", "notes": {"a": "b"}, "colour": "red"}},
                       format="json")
    assert stray.status_code == 400 and stray.json()["field"] == "source.colour"


def test_an_unregistered_source_type_is_refused_naming_the_registered_ones(web_dataset):
    client, _ds, base = web_dataset
    r = client.put(f"{base}/source", {"source": {"type": "notes", "notes": {"a": "b"}}}, format="json")
    assert r.status_code == 400 and r.json()["field"] == "source.type"
    assert "git" in r.json()["detail"] and "web" in r.json()["detail"] and "notes" not in r.json()["detail"]


def test_a_type_name_registered_twice_is_refused(notes_type):
    with pytest.raises(ValueError, match="already registered"):
        registry.register(SourceType(name="notes", kinds=("web",), fields=frozenset(), parse=_parse,
                                     display=str, sync=_sync))


def test_a_job_type_runs_the_handler_it_registered(monkeypatch, web_dataset):
    _client, ds, _base = web_dataset
    monkeypatch.setattr(jobs, "_HANDLERS", dict(jobs._HANDLERS))
    seen = []

    @jobs.register("stamp")
    def stamp(*, job: IngestJob, progress: Any = None) -> None:
        seen.append(job.pk)
        IngestJob.objects.filter(pk=job.pk).update(result={"stamped": True})

    job = IngestJob.objects.create(dataset=ds, source="-", kind="web", options={"origin": "stamp"})
    done = jobs.run_job(job=job)
    assert seen == [job.pk] and done.status == IngestJob.Status.DONE and done.result == {"stamped": True}
    unknown = IngestJob.objects.create(dataset=ds, source="-", kind="web", options={"origin": "nobody"})
    with pytest.raises(LookupError, match="nobody"):
        jobs.run_job(job=unknown)
    assert IngestJob.objects.get(pk=unknown.pk).status == IngestJob.Status.FAILED
