"""Loaded with -p before pytest-django reads settings: give every test session
its own embedded Postgres, Redis and Qdrant under a fresh temp dir, so runs are
isolated from dev data and from each other, start them, then stop them at the end."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

_OWN_VAR = "VAR_DIR" not in os.environ and "DATABASE_URL" not in os.environ
if _OWN_VAR:
    os.environ["VAR_DIR"] = tempfile.mkdtemp(prefix="platform-test-")
os.environ.setdefault("RATELIMIT_ENABLE", "1")
# Importing console.wsgi (the fuzz run does, at collection) must not start the web process's outbox applier in
# the test process: a stray applier races every test that applies the outbox itself. Tests that need one (a
# worker writes, the "web process" indexes) start it themselves: the celery_worker_proc fixture does.
os.environ.setdefault("INDEX_APPLIER_THREAD", "0")
os.environ.setdefault("CELERY_QUEUE", "test-" + Path(os.environ.get("VAR_DIR", "x")).name)


def _start_services() -> None:
    """Importing settings starts nothing (config/embedded.py): start the embedded Postgres and Redis this session
    runs on here, before pytest-django imports settings; their URLs are exported for the test subprocesses."""
    from config import embedded

    embedded.start_services(var_dir=embedded.default_var_dir())


_start_services()


def pytest_unconfigure(config) -> None:
    if not _OWN_VAR:
        return
    from config import embedded

    var_dir = Path(os.environ["VAR_DIR"])
    embedded.stop_everything(var_dir=var_dir)
    shutil.rmtree(var_dir, ignore_errors=True)
