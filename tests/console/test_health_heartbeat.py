"""/healthz answers from cheap checks: worker heartbeats in Redis (no ping), the index handle's state (never
opened on a probe). Real Postgres, Redis and Celery worker; only the ping client call is patched, to prove it
is not made."""
import time

import pytest
from celery.app.control import Control
from django.test import Client

from config import heartbeat

pytestmark = pytest.mark.django_db


def _staff_get(make_user) -> tuple[int, dict]:
    client = Client()
    client.force_login(make_user(staff=True))
    resp = client.get("/healthz")
    return resp.status_code, resp.json()


@pytest.fixture
def no_ping(monkeypatch):
    """healthz must not broadcast a ping (a second's wait when no worker answers, a stall behind a solo worker's
    task): make any ping fail loudly. Set after celery_worker_proc, whose start-up does ping."""

    def refuse(*args, **kwargs):
        raise AssertionError("healthz pinged the workers")

    monkeypatch.setattr(Control, "ping", refuse)


def test_a_fresh_heartbeat_is_up_and_a_stale_one_down(settings, make_user, no_ping):
    settings.WORKER_HEARTBEAT_STALE_S = 5.0
    client = heartbeat.redis_client()
    now = client.time()[0]
    client.zadd(heartbeat.heartbeat_key(), {"gone@host:1": now - 60})
    status, body = _staff_get(make_user)
    worker = body["checks"]["worker"]
    assert status == 503 and "worker" in body["down"] and not worker["ok"]
    assert "within 5 s" in worker["detail"] and "newest is" in worker["detail"]

    heartbeat.beat(member="alive@host:2")
    worker = _staff_get(make_user)[1]["checks"]["worker"]
    assert worker["ok"] and worker["detail"].startswith("1 worker(s)"), worker


def test_a_heartbeat_of_another_queue_does_not_count(settings, make_user):
    heartbeat.beat(member="elsewhere@host:3", key=heartbeat.heartbeat_key(queue="some-other-queue"))
    assert not _staff_get(make_user)[1]["checks"]["worker"]["ok"]


def test_healthz_never_opens_the_index(monkeypatch, make_user):
    from search.engine import index

    index.close_index()  # this process holds no handle, as a web process before its applier opened it

    def refuse(**kwargs):
        raise AssertionError("healthz opened the index")

    monkeypatch.setattr(index, "open_index", refuse)
    qdrant = _staff_get(make_user)[1]["checks"]["qdrant"]
    assert not qdrant["ok"] and "not open in this process" in qdrant["detail"]


@pytest.mark.slow
def test_a_running_worker_is_up_by_its_heartbeat_and_a_clean_stop_is_down_at_once(celery_worker_proc, make_user,
                                                                                  no_ping):
    from search.engine.index import get_index

    get_index()  # the web process opens its index at start; healthz reports the handle, it does not open one
    status, body = _staff_get(make_user)
    assert status == 200, body
    assert body["checks"]["worker"]["detail"].startswith("1 worker(s)")
    assert set(body["checks"]) == {"postgres", "redis", "qdrant", "embeddings", "worker"}
    [(member, _)] = heartbeat.read().live
    assert member.endswith(f":{celery_worker_proc.pid}")  # the solo worker's own process beats

    celery_worker_proc.terminate()  # warm shutdown: worker_shutdown removes the heartbeat
    celery_worker_proc.wait(30)
    assert heartbeat.read().live == [] and heartbeat.read().newest_stale_age_s is None
    status, body = _staff_get(make_user)
    assert status == 503 and body["down"] == ["worker"]


@pytest.fixture
def fast_heartbeat(monkeypatch, settings):
    """A worker that beats every 0.2 s, read with a 1 s staleness window (the worker reads its env at start)."""
    monkeypatch.setenv("WORKER_HEARTBEAT_S", "0.2")
    settings.WORKER_HEARTBEAT_S = 0.2
    settings.WORKER_HEARTBEAT_STALE_S = 1.0


@pytest.mark.slow
def test_a_killed_worker_is_down_once_its_heartbeat_is_stale(fast_heartbeat, celery_worker_proc, make_user,
                                                             no_ping):
    assert _staff_get(make_user)[1]["checks"]["worker"]["ok"]
    celery_worker_proc.kill()  # SIGKILL: no shutdown hook runs, the heartbeat just stops
    celery_worker_proc.wait(30)
    deadline = time.monotonic() + 60
    while (worker := _staff_get(make_user)[1]["checks"]["worker"])["ok"]:
        assert time.monotonic() < deadline, "the worker stayed up a minute after it was killed"
        time.sleep(0.1)
    # down because its last beat went stale (it is still recorded), not because anything removed it
    assert "newest is" in worker["detail"], worker
    beats = heartbeat.read()
    assert beats.live == [] and beats.newest_stale_age_s > 1.0


def test_with_a_qdrant_server_healthz_asks_its_readyz(settings, make_user):
    """QDRANT_URL: one short GET of the server's /readyz (here a stand-in HTTP server on loopback), then a closed
    port is down, naming the server."""
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen = []

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("api-key")))
            self.send_response(200 if self.path == "/readyz" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings.QDRANT_URL = f"http://127.0.0.1:{server.server_port}"
        settings.QDRANT_API_KEY = "k-123"
        qdrant = _staff_get(make_user)[1]["checks"]["qdrant"]
        assert qdrant["ok"] and "ready" in qdrant["detail"], qdrant
        assert seen == [("/readyz", "k-123")]
    finally:
        server.shutdown()
        server.server_close()
    settings.QDRANT_URL = "http://127.0.0.1:9"
    qdrant = _staff_get(make_user)[1]["checks"]["qdrant"]
    assert not qdrant["ok"] and "QDRANT_URL" in qdrant["detail"]
