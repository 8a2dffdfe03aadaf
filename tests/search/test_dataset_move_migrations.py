"""The move of datasets, shares and ranking settings from projects to search keeps every row, both ways.

A populated database at the state before the move (projects, members, datasets with their embedding settings,
shares active and revoked, documents, chunks, jobs, a source, a project's reranker and fusion, a staff grant on
datasets) is migrated forward and back; each time every row is read through the models of that state and must be
the one written, with its foreign keys. The database is left at the latest state.
"""
from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("projects", "0007_created_by"), ("search", "0018_embedding_cache_moves_to_inference")]
FUSION = {"setting": {"method": "weighted", "k": 60, "dense": 0.3, "sparse": 0.7}, "label": "weighted 0.3/0.7",
          "reason": "judged", "evidence": {"judged_queries": 40}}
EVIDENCE = {"model": "adapted-1", "adopted": True, "reason": "held-out gain"}


def _migrate(targets: list[tuple[str, str]]):
    """Migrate the test database to `targets`; the historical apps of that state."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def _latest() -> list[tuple[str, str]]:
    return MigrationExecutor(connection).loader.graph.leaf_nodes()


def _populate(apps) -> dict[str, int]:
    """Rows of every kind the move touches, written with the models of the state before it."""
    user_model = apps.get_model("accounts", "User")
    project_model = apps.get_model("projects", "Project")
    membership = apps.get_model("projects", "Membership")
    dataset = apps.get_model("projects", "Dataset")
    share = apps.get_model("projects", "ProjectShare")
    document = apps.get_model("search", "Document")
    chunk = apps.get_model("search", "Chunk")
    job = apps.get_model("search", "IngestJob")
    source = apps.get_model("search", "Source")
    content_type = apps.get_model("contenttypes", "ContentType")
    permission = apps.get_model("auth", "Permission")

    owner = user_model.objects.create(email="owner@example.com", password="x")
    staff = user_model.objects.create(email="staff@example.com", password="x", is_staff=True)
    ranked = project_model.objects.create(slug="ranked", name="Ranked", reranker="ranked-ce", fusion=FUSION,
                                          created_by=owner)
    plain = project_model.objects.create(slug="plain", name="Plain")
    membership.objects.create(project=ranked, user=owner, role="owner")
    code = dataset.objects.create(project=ranked, name="code", kind="code", embedding_model="adapted-1",
                                  embedding_model_next="adapted-2", embedding_evidence=EVIDENCE, created_by=owner)
    rules = dataset.objects.create(project=ranked, name="rules", kind="rules", is_global=True, is_evaluation=True)
    active = share.objects.create(dataset=code, project=plain, granted_by=owner)
    revoked = share.objects.create(dataset=rules, project=plain, revoked_at="2026-01-02T03:04:05Z")
    doc = document.objects.create(dataset=code, path="app/main.py", content_hash="c" * 64)
    piece = chunk.objects.create(document=doc, dataset=code, path="app/main.py", text="def main(): ...",
                                 text_hash="t" * 64)
    ingest = job.objects.create(dataset=code, source="upload", kind="code")
    followed = source.objects.create(dataset=rules, type="web")
    dataset_type, _ = content_type.objects.get_or_create(app_label="projects", model="dataset")
    grant, _ = permission.objects.get_or_create(content_type=dataset_type, codename="change_dataset",
                                                defaults={"name": "Can change dataset"})
    staff.user_permissions.add(grant)
    return {"ranked": ranked.pk, "plain": plain.pk, "code": code.pk, "rules": rules.pk, "active": active.pk,
            "revoked": revoked.pk, "doc": doc.pk, "chunk": piece.pk, "job": ingest.pk, "source": followed.pk,
            "staff": staff.pk, "owner": owner.pk, "grant": grant.pk, "type": dataset_type.pk}


def _assert_rows(apps, ids: dict[str, int], *, app: str) -> None:
    """Every row as written, read through `app`'s Dataset and ProjectShare (projects before, search after)."""
    dataset = apps.get_model(app, "Dataset")
    share = apps.get_model(app, "ProjectShare")
    code = dataset.objects.get(pk=ids["code"])
    assert (code.project_id, code.name, code.kind, code.created_by_id) == (ids["ranked"], "code", "code", ids["owner"])
    assert (code.embedding_model, code.embedding_model_next, code.embedding_evidence) == ("adapted-1", "adapted-2",
                                                                                         EVIDENCE)
    rules = dataset.objects.get(pk=ids["rules"])
    assert rules.is_global and rules.is_evaluation and rules.kind == "rules"
    assert dataset.objects.count() == 2
    active, revoked = share.objects.get(pk=ids["active"]), share.objects.get(pk=ids["revoked"])
    assert (active.dataset_id, active.project_id, active.granted_by_id, active.revoked_at) == (
        ids["code"], ids["plain"], ids["owner"], None)
    assert revoked.dataset_id == ids["rules"] and revoked.revoked_at is not None
    # search's rows still point at the same datasets, and the relations resolve through the model of this state
    assert apps.get_model("search", "Document").objects.get(pk=ids["doc"]).dataset.name == "code"
    assert apps.get_model("search", "Chunk").objects.get(pk=ids["chunk"]).dataset_id == ids["code"]
    assert apps.get_model("search", "IngestJob").objects.get(pk=ids["job"]).dataset.pk == ids["code"]
    assert apps.get_model("search", "Source").objects.get(pk=ids["source"]).dataset.name == "rules"
    assert sorted(code.shares.values_list("pk", flat=True)) == [ids["active"]]
    # the staff grant on datasets follows the model's content type
    content_type = apps.get_model("contenttypes", "ContentType").objects.get(pk=ids["type"])
    assert (content_type.app_label, content_type.model) == (app, "dataset")
    staff = apps.get_model("accounts", "User").objects.get(pk=ids["staff"])
    assert list(staff.user_permissions.values_list("pk", flat=True)) == [ids["grant"]]


def test_the_move_keeps_every_row_forward_and_backward_and_ends_at_the_latest_state():
    latest = _latest()
    try:
        before = _migrate(BEFORE)
        ids = _populate(before)
        _assert_rows(before, ids, app="projects")

        after = _migrate(latest)
        _assert_rows(after, ids, app="search")
        tables = set(connection.introspection.table_names())
        assert {"search_dataset", "search_projectshare"} <= tables  # renamed, not copied
        assert not {"projects_dataset", "projects_projectshare"} & tables
        ranking = after.get_model("search", "ProjectRanking")
        assert list(ranking.objects.values_list("project_id", "reranker", "fusion")) == [
            (ids["ranked"], "ranked-ce", FUSION)]  # the project that set nothing gets no row
        assert not {"reranker", "fusion"} & {f.name for f in after.get_model("projects", "Project")._meta.fields}

        # and through the app's own code: the ranking a query reads, the datasets a project reads
        from projects.models import Project
        from search.engine.access import accessible_dataset_ids
        from search.engine.project_ranking import fusion_of, reranker_of

        ranked, plain = Project.objects.get(pk=ids["ranked"]), Project.objects.get(pk=ids["plain"])
        assert reranker_of(ranked) == "ranked-ce" and fusion_of(ranked) == FUSION
        assert reranker_of(plain) == "" and fusion_of(plain) == {}
        assert accessible_dataset_ids(plain) == {ids["code"], ids["rules"]}  # shared + global
        assert accessible_dataset_ids(plain, include_global=False) == {ids["code"]}

        back = _migrate(BEFORE)
        _assert_rows(back, ids, app="projects")
        tables = set(connection.introspection.table_names())
        assert {"projects_dataset", "projects_projectshare"} <= tables
        assert not {"search_dataset", "search_projectshare", "search_projectranking"} & tables
        project_model = back.get_model("projects", "Project")
        assert (project_model.objects.get(pk=ids["ranked"]).reranker,
                project_model.objects.get(pk=ids["ranked"]).fusion) == ("ranked-ce", FUSION)
        assert (project_model.objects.get(pk=ids["plain"]).reranker,
                project_model.objects.get(pk=ids["plain"]).fusion) == ("", {})
    finally:
        _migrate(latest)
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()
    assert not MigrationExecutor(connection).migration_plan(latest)  # nothing left to apply
