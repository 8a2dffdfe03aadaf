"""The input-class sweep over every operation and page form (tests/hardening/input_sweep.py says what and why).

Before the input-validation fixes this sweep found 500s in the nesting, characters, numbers, size and page-form
classes, charged requests in unknown_field, and 200s for text/plain on the rules endpoints."""
from __future__ import annotations

import pytest


@pytest.mark.slow
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
