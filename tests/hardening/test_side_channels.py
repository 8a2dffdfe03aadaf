"""Nothing crosses tenants: the shared embedding cache, project slugs, feedback and uploaded names.

Each test is what a hostile tenant with ordinary keys would try, through the API, against the real database,
embedding model and vector store. Jobs run with search.ingest.jobs.run_job, what the Celery worker calls."""
from __future__ import annotations

import io
import tarfile

import pytest

from tests.search.ctx_fixtures import edge_index  # noqa: F401

pytestmark = pytest.mark.django_db

# Three paragraphs a tenant would keep private; long enough to make more than one chunk.
SECRET = ("# Vault rotation\n\nThe vault code for the Geneva office is 4471-9902 and it is rotated every quarter "
          "by the facilities lead.\n\n## Escrow\n\nThe escrow account for the Lisbon acquisition is "
          "PT50-0002-0123-1234-5678-9015-4 held at Banco Meridional.\n\n## Board\n\nThe board votes on the "
          "merger with Halcyon Freight on 14 March; until then only the deal team knows the price of 212 "
          "million.\n")


@pytest.fixture
def tenants(make_user, client_for, edge_index, monkeypatch):
    """Alice and Bob, each with a project (made through the API, as a tenant does) and a web dataset."""
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)
    alice, bob = make_user("alice@example.com"), make_user("bob@example.com")
    a, b = client_for(alice), client_for(bob)
    out = {"alice": alice, "bob": bob, "a": a, "b": b}
    for who, client, slug in (("a", a, "alpha"), ("b", b, "beta")):
        assert client.post("/api/projects", {"name": slug.title(), "slug": slug}, format="json").status_code == 201
        resp = client.post(f"/api/projects/{slug}/datasets", {"name": "notes", "kind": "web"}, format="json")
        assert resp.status_code == 201, resp.content
        out[f"{who}_url"] = f"/api/projects/{slug}/datasets/{resp.json()['id']}"
        out[f"{who}_id"] = resp.json()["id"]
    return out


def _push(client, url: str, text: str, *, path: str = "notes/plan.md"):
    from search.ingest.jobs import run_job
    from search.models import IngestJob

    resp = client.put(f"{url}/documents", {"documents": [{"external_id": path, "path": path, "text": text}]},
                      format="json")
    assert resp.status_code == 202, resp.content
    job = IngestJob.objects.get(pk=resp.json()["id"])
    run_job(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    return client.get(f"/api/ingest-jobs/{job.pk}").json()


# --------------------------------------------------------------------------- the embedding cache
def test_pushing_another_tenants_exact_text_reports_nothing_cached_and_embeds_it_like_new_text(tenants):
    """Bob guesses Alice's private text exactly. Before, his job said `embeddings_cached: 3` and embedded
    nothing (and ran faster): a confirmed guess. Now his push does the same work a never-seen text does: every
    chunk is embedded again, none counted as cached, so neither the counts nor the time can differ."""
    mine = _push(tenants["a"], tenants["a_url"], SECRET)
    assert mine["embeddings_computed"] >= 3 and mine["embeddings_cached"] == 0
    guess = _push(tenants["b"], tenants["b_url"], SECRET)
    assert guess["embeddings_cached"] == 0
    assert guess["embeddings_computed"] == mine["embeddings_computed"]
    unseen = _push(tenants["b"], tenants["b_url"], SECRET.replace("Geneva", "Zurich").replace("Lisbon", "Porto")
                   .replace("Halcyon", "Ostrava"), path="notes/other.md")
    assert (unseen["embeddings_computed"], unseen["embeddings_cached"]) == (guess["embeddings_computed"], 0)


def test_a_wrong_guess_and_a_right_guess_of_a_short_secret_look_the_same(tenants):
    """Guessing a short secret one candidate at a time: the right one must not stand out."""
    _push(tenants["a"], tenants["a_url"], "The door code is 4471.")
    answers = {code: _push(tenants["b"], tenants["b_url"], f"The door code is {code}.", path=f"g/{code}.md")
               for code in ("4470", "4471", "4472")}
    assert {(j["embeddings_computed"], j["embeddings_cached"]) for j in answers.values()} == {(1, 0)}


def test_a_project_still_reuses_the_vectors_of_its_own_texts(tenants):
    """The cache keeps its purpose inside a project: the same text in a second dataset embeds nothing."""
    first = _push(tenants["a"], tenants["a_url"], SECRET)
    resp = tenants["a"].post("/api/projects/alpha/datasets", {"name": "copy", "kind": "web"}, format="json")
    again = _push(tenants["a"], f"/api/projects/alpha/datasets/{resp.json()['id']}", SECRET)
    assert again["embeddings_computed"] == 0 and again["embeddings_cached"] == first["embeddings_computed"]


def test_a_global_datasets_text_is_reused_by_every_tenant(tenants):
    """A global dataset is readable by every project, so reusing its vectors tells nobody anything."""
    from search.models import Dataset

    first = _push(tenants["a"], tenants["a_url"], SECRET)
    Dataset.objects.filter(pk=tenants["a_id"]).update(is_global=True)
    other = _push(tenants["b"], tenants["b_url"], SECRET)
    assert other["embeddings_computed"] == 0 and other["embeddings_cached"] == first["embeddings_computed"]


def test_a_sync_of_another_tenants_text_counts_nothing_cached(tenants):
    """The other write path (sources, rulebooks: sync_documents -> write_documents) scopes the cache too."""
    from search.ingest.base import ChunkDraft, DocumentDraft
    from search.ingest.writer import sync_documents
    from search.models import Dataset

    def draft() -> DocumentDraft:
        return DocumentDraft(path="plan.md", content_hash="h", chunks=[ChunkDraft(text=SECRET, start_line=1, end_line=9, kind="web")])

    mine = sync_documents(dataset=Dataset.objects.get(pk=tenants["a_id"]), drafts=[draft()])
    theirs = sync_documents(dataset=Dataset.objects.get(pk=tenants["b_id"]), drafts=[draft()])
    assert mine["embedded"] == theirs["embedded"] == 1 and theirs["cached"] == 0


# --------------------------------------------------------------------------- project slugs
def test_a_slug_another_tenant_holds_is_created_without_naming_that_project(tenants):
    """Bob asks for Alice's slug. Before: 409 'A project with the slug 'alpha' already exists.' Now he gets a
    project of his own under a free slug; the answer says nothing of Alice's, and both stay addressable."""
    resp = tenants["b"].post("/api/projects", {"name": "Alpha", "slug": "alpha"}, format="json")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["slug"] != "alpha" and body["slug"].startswith("alpha-") and body["role"] == "owner"
    assert "exist" not in resp.content.decode().lower()
    assert tenants["b"].get(f"/api/projects/{body['slug']}").json()["role"] == "owner"
    assert tenants["b"].get("/api/projects/alpha").status_code == 404
    mine = tenants["a"].get("/api/projects/alpha").json()
    assert mine["role"] == "owner" and [m["email"] for m in mine["members"]] == ["alice@example.com"]
    derived = tenants["b"].post("/api/projects", {"name": "Alpha"}, format="json")  # slug from the name
    assert derived.status_code == 201 and derived.json()["slug"] not in ("alpha", body["slug"])


def test_a_slug_of_your_own_project_is_still_409(tenants):
    resp = tenants["a"].post("/api/projects", {"name": "Again", "slug": "alpha"}, format="json")
    assert resp.status_code == 409 and resp.json()["code"] == "project_exists" and resp.json()["field"] == "slug"


# --------------------------------------------------------------------------- feedback
@pytest.fixture
def served(make_user, make_project):
    """A logged session of Alice's in a project where Vic is a viewer (rows as run_query writes them)."""
    from search.models import Chunk, Dataset, Document, QuerySession, RerankResult

    alice, vic = make_user("alice@example.com"), make_user("vic@example.com")
    shop = make_project("shop", alice)
    make_project("shop", vic, role="viewer")
    ds = Dataset.objects.create(project=shop, name="src", kind="code")
    doc = Document.objects.create(dataset=ds, path="a.py", content_hash="h")
    chunk = Chunk.objects.create(document=doc, dataset=ds, path="a.py", text="x = 1", text_hash="t")
    session = QuerySession.objects.create(user=alice, project=shop, query="q")
    RerankResult.objects.create(session=session, chunk=chunk, dataset_id=ds.pk, project_id=shop.pk, rank_before=1,
                                final_rank=1, fused_score=1.0)
    return {"alice": alice, "vic": vic, "session": session, "chunk": chunk}


def test_a_viewer_cannot_overwrite_another_members_feedback(served, client_for):
    from search.models import Feedback

    url = f"/api/query-sessions/{served['session'].pk}/feedback"
    body = {"chunk_id": served["chunk"].pk, "relevance": 3}
    assert client_for(served["alice"]).post(url, body, format="json").status_code == 201
    resp = client_for(served["vic"]).post(url, {**body, "relevance": 0}, format="json")
    assert resp.status_code == 403 and resp.json()["code"] == "not_session_owner"
    assert resp.json()["field"] == "session_id" and resp.json()["detail"]
    fb = Feedback.objects.get(session=served["session"])
    assert (fb.relevance, fb.user) == (3, served["alice"])


def test_a_viewer_cannot_judge_another_members_session_first_either(served, client_for):
    from search.models import Feedback

    resp = client_for(served["vic"]).post(f"/api/query-sessions/{served['session'].pk}/feedback",
                                          {"chunk_id": served["chunk"].pk, "relevance": 0}, format="json")
    assert resp.status_code == 403 and not Feedback.objects.exists()


# --------------------------------------------------------------------------- uploaded rulebook names
BOOK = (b"# Conditions\n\n## Grappled\n\nA grappled creature's speed becomes 0. See Escaping a Grapple.\n\n"
        b"## Escaping a Grapple\n\nA grappled creature can use its action to escape, making a Strength "
        b"(Athletics) check contested by the grappler.\n")


def _upload(client, url: str, name: str, data: bytes):
    from search.ingest.jobs import run_job
    from search.models import IngestJob

    f = io.BytesIO(data)
    f.name = name
    resp = client.post(f"{url}/uploads", {"file": f}, format="multipart")
    assert resp.status_code == 202, resp.content
    job = IngestJob.objects.get(pk=resp.json()["id"])
    run_job(job=job)
    job.refresh_from_db()
    assert job.status == "done", job.error
    return job


def _rules_dataset(tenants) -> tuple[str, int]:
    resp = tenants["a"].post("/api/projects/alpha/datasets", {"name": "book", "kind": "rules"}, format="json")
    return f"/api/projects/alpha/datasets/{resp.json()['id']}", resp.json()["id"]


def test_an_uploaded_rulebook_is_named_by_the_uploaded_file_not_the_staging_folder(tenants):
    from search.models import Chunk, Document

    url, ds = _rules_dataset(tenants)
    _upload(tenants["a"], url, "house-rules.md", BOOK)
    assert list(Document.objects.filter(dataset_id=ds).values_list("path", flat=True)) == ["house-rules/house-rules.md"]
    assert set(Chunk.objects.filter(dataset_id=ds).values_list("book_id", flat=True)) == {"house-rules"}
    shown = tenants["a"].get(f"{url}/documents").content.decode()
    assert "house-rules.md" in shown and "ingest-staged" not in shown and "/tmp" not in shown
    again = _upload(tenants["a"], url, "house-rules.md", BOOK)  # the same book again replaces, never duplicates
    assert again.embeddings_computed == 0 and Document.objects.filter(dataset_id=ds).count() == 1


def test_an_uploaded_rulebook_archive_keeps_its_own_file_names(tenants):
    from search.models import Chunk, Document

    url, ds = _rules_dataset(tenants)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name in ("conditions.md", "spells/grapple.md"):
            info = tarfile.TarInfo(name)
            info.size = len(BOOK)
            tar.addfile(info, io.BytesIO(BOOK))
    _upload(tenants["a"], url, "My SRD.tar.gz", buf.getvalue())
    assert sorted(Document.objects.filter(dataset_id=ds).values_list("path", flat=True)) == [
        "My-SRD/conditions.md", "My-SRD/spells/grapple.md"]
    assert set(Chunk.objects.filter(dataset_id=ds).values_list("book_id", flat=True)) == {"My-SRD"}
