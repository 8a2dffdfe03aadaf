"""The input-class sweep over every operation and page form (tests/hardening/input_sweep.py says what and why).

Before the input-validation fixes this sweep found 500s in the nesting, characters, numbers, size and page-form
classes, charged requests in unknown_field, and 200s for text/plain on the rules endpoints."""
from __future__ import annotations

import pytest


# The sweep sends over a thousand requests and runs the jobs its files start: on 2 loaded cores (load average 28)
# it outlived the suite's default 600 s once. The limit catches a hang, not a slow machine.
@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_no_input_class_reaches_a_500_a_write_or_a_charge_on_any_operation_or_page(world, db):
    from django.test import Client, override_settings
    from drf_spectacular.generators import SchemaGenerator

    from accounts.models import User
    from tests.hardening.input_sweep import CLASSES, SIZE_LIMIT, run_sweep

    spec = SchemaGenerator().get_schema(request=None, public=True)
    ids = world.ids
    fill = {"slug": ids["slug"][0], "person_id": ids["person_id"][0], "search_id": ids["search_id"][0],
            "job_id": ids["job_id"][0], "session_id": ids["session_id"][0], "key_id": ids["key_id"][0],
            "share_id": ids["share_id"][0], "dataset_id": ids["dataset_id"][0], "chunk_id": ids["chunk_id"][0]}
    fill.update({k: v[0] for k, v in ids.items() if k not in fill and k != "source"})
    pages = Client()
    pages.force_login(User.objects.get(pk=world.user_id))
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=SIZE_LIMIT):
        report = run_sweep(secret=world.secret, user_id=world.user_id, spec=spec, fill=fill, page_client=pages)
    assert not report.failures, "\n".join(report.failures[:25])
    # every class was exercised, and the ones that are invalid by construction were all refused
    assert set(report.sent) == set(CLASSES), report.sent
    for klass in ("nesting", "characters", "size", "content_type", "unknown_field", "headers", "path_params",
                  "form_bodies", "mcp_arguments"):
        assert report.refused[klass] == report.sent[klass] > 0, (klass, report.sent, report.refused)
    assert sum(report.sent.values()) > 1000


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_hostile_pdfs_as_uploaded_archived_or_pushed_files_are_refused_by_name_or_read_never_a_500_a_row_or_a_charge(
        world, db, settings):
    from drf_spectacular.generators import SchemaGenerator

    from search.ingest.sharing import create_dataset
    from search.models import Dataset
    from tests.hardening.input_sweep import ARCHIVES, FILE_CLASS, hostile_pdf_files, run_file_sweep

    # the reader's own bounds, tightened so the bombs meet them sooner on a shared machine (the outcome is the same
    # refusal by name; tests/hardening/test_hostile_pdfs.py runs them at other bounds)
    settings.PDF_MAX_SECONDS = 30
    settings.PDF_MAX_MEMORY_MB = 384
    settings.RATE_LIMITS = {k: "100000/m" for k in settings.RATE_LIMITS}  # every case reaches its reader
    spec = SchemaGenerator().get_schema(request=None, public=True)
    own = Dataset.objects.get(pk=world.ids["dataset_id"][1])
    rules = create_dataset(user=_owner(world), project=own.project, name="hostile-rules",
                           kind="rules")
    pdfs = hostile_pdf_files()
    assert all(len(data) <= 1024 * 1024 for data, _ in pdfs.values())
    report, outcomes = run_file_sweep(
        secret=world.secret, user_id=world.user_id, spec=spec,
        fill={"slug": world.ids["slug"][0], "dataset_id": own.pk}, rules_dataset_id=rules.pk, pdfs=pdfs,
        seconds_per_file=settings.PDF_MAX_SECONDS + 15)
    assert not report.failures, "\n".join(report.failures[:25])
    # every file-taking operation got every PDF alone, in four archives, and as pushed text; the stored archives
    # reached their reader (a job read every file), the deflated ones were refused by the upload's ratio check
    assert report.sent[FILE_CLASS] == len(outcomes) == 2 * len(pdfs) + len(ARCHIVES), report.sent
    by_label = {o.label.split(": ", 1)[1]: o for o in outcomes}
    for kind, _, target in ARCHIVES:
        o = by_label[f"all in a {kind}{target}"]
        assert (o.status, o.job_status) == ((202, "done") if kind in ("zip", "tar") else (413, "")), o
        assert len(o.refused) + o.read == len(pdfs), o
    refusals = [why for o in outcomes for why in o.refused.values()]
    must_refuse = sum(1 for _, expected in pdfs.values() if expected == "refuse")
    assert len(refusals) >= 3 * must_refuse and all(why.strip() for why in refusals)


def _owner(world):
    from accounts.models import User

    return User.objects.get(pk=world.user_id)
