"""Shared fixtures. Everything runs against the real embedded services."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import django_ratelimit.core
import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def _clear_cache():
    """Rate-limit counters live in Redis; start each test with none."""
    cache.clear()
    yield


class _FrozenClock:
    """time.time() as it was when the test began, for django-ratelimit's window arithmetic only."""

    def __init__(self) -> None:
        self._now = time.time()

    def time(self) -> float:
        return self._now


@pytest.fixture(autouse=True)
def _steady_rate_windows(request, monkeypatch):
    """django-ratelimit counts in fixed windows with a per-key offset, so a test that fills a bucket over a few
    seconds can straddle a window's edge and see its count start again (a CI run once logged in after two counted
    failures). The limiter's clock stands still for the test, so every count lands in one window; a test about
    windows ending (marked rate_windows_turn) keeps the real clock."""
    if request.node.get_closest_marker("rate_windows_turn") is None:
        monkeypatch.setattr(django_ratelimit.core, "time", _FrozenClock())
    yield


@pytest.fixture(autouse=True)
def _quick_password_hashing(settings):
    """Passwords hash with one PBKDF2 iteration in the test process (tests/quick_hasher.py says why)."""
    settings.PASSWORD_HASHERS = ["tests.quick_hasher.QuickPBKDF2PasswordHasher"]


@pytest.fixture
def make_user(db):
    from accounts.models import User

    counter = {"n": 0}

    def make(email: str | None = None, *, credits: int = 0, staff: bool = False, password: str = "pw-secret-123"):
        counter["n"] += 1
        email = email or f"user{counter['n']}-{time.monotonic_ns()}@example.com"
        user = User.objects.create_user(email=email, password=password, is_staff=staff, is_superuser=staff)
        if credits:
            from credits.ledger import grant

            grant(user=user, amount=credits, reason="test")
        return user

    return make


@pytest.fixture
def user(make_user):
    return make_user("alice@example.com", credits=10)


@pytest.fixture
def api_key_for():
    from accounts.apikeys import issue_api_key

    def make(user):
        return issue_api_key(user=user).secret

    return make


@pytest.fixture
def client_for(api_key_for):
    """An APIClient authenticated with a real API key (Bearer)."""

    def make(user) -> APIClient:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_for(user)}")
        return client

    return make


@pytest.fixture
def api(client_for, user) -> APIClient:
    return client_for(user)


@pytest.fixture
def make_project(db):
    from projects.models import Membership, Project

    def make(slug: str, *members, role: str = "owner"):
        project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug.title()})
        for m in members:
            Membership.objects.get_or_create(project=project, user=m, defaults={"role": role})
        return project

    return make


@pytest.fixture
def celery_worker_proc(transactional_db, settings):
    """A real Celery worker process on the test database and this session's Redis queue, with the outbox applier
    thread that the web process runs beside it (the worker writes chunks; the applier indexes them)."""
    from django.db import connection

    env = dict(os.environ)
    db = connection.settings_dict
    env["DATABASE_URL"] = f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}"
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--concurrency", "1",
           "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "--without-gossip", "--without-mingle", "-l", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    from config.celery import app

    deadline = time.time() + 60
    while time.time() < deadline:
        if app.control.ping(timeout=0.5):
            break
        if proc.poll() is not None:
            raise RuntimeError("celery worker exited during start-up")
    else:
        proc.kill()
        raise RuntimeError("celery worker did not answer ping within 60 s")
    from config.heartbeat import read

    while not read().live:  # its heartbeat thread starts on worker_ready: /healthz sees the worker from here on
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise RuntimeError("celery worker wrote no heartbeat")
        time.sleep(0.05)
    from search.engine.applier import BackgroundApplier

    applier = BackgroundApplier().start()  # index=None: whichever store is the process singleton at each pass
    yield proc
    applier.stop()
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
