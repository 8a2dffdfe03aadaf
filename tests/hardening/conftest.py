"""Fixtures shared by the fuzzers (test_fuzz.py, test_input_sweep.py)."""
from __future__ import annotations

import pytest
from django.conf import settings as django_settings

from tests.hardening.fuzz_world import CURRENT, build_world


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory):
    """Built once and committed (each operation's test then runs in its own rolled-back transaction);
    flushed at the end like any transactional test."""
    from django.core.management import call_command
    from django.test import override_settings

    from search.engine.index import open_index, set_index

    tmp = tmp_path_factory.mktemp("fuzz")
    limits = {k: "100000/m" for k in django_settings.RATE_LIMITS}
    with django_db_blocker.unblock(), override_settings(RATE_LIMITS=limits, INGEST_ALLOWED_ROOTS=[tmp / "shop"]):
        index = open_index(path=tmp / "qdrant")
        set_index(index)
        try:
            yield build_world(tmp)
        finally:
            CURRENT.clear()
            set_index(None)
            index.close()
            call_command("flush", interactive=False, verbosity=0)
