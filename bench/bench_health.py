"""/healthz latency: the cheap checks a load balancer polls, against the old path (a worker ping and an index
opened and counted on the request), on the embedded stack with one real Celery worker (--pool solo).

Why: a load balancer polls /healthz every few seconds per web process; the old path cost about a second per probe
(`app.control.ping` waits out its timeout collecting replies) and several seconds on the first one (opening the
embedded index loads the embedding model). The old path is still what `manage.py platform status` runs
(`health_report(deep=True)`), so it is measured here as it is, not from memory.

Rows: the old path in-process; the new path in-process through Django's test client (view and middleware,
no network); the new path over HTTP against gunicorn (1 gthread worker), whose first probes come while its
applier thread is still opening the index (503 "qdrant", answered fast) and the rest once it is open.

    .venv/bin/python bench/bench_health.py [--requests 300] [--deep 10]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, p50, pct, setup_django, table, write_result
from bench_load import _free_port


def _start_worker() -> subprocess.Popen:
    from django.conf import settings

    from config.heartbeat import read

    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo", "--concurrency", "1",
           "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "--without-gossip", "--without-mingle", "-l", "WARNING"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ))
    deadline = time.time() + 120
    while not read().live:
        if time.time() > deadline or proc.poll() is not None:
            proc.kill()
            raise SystemExit("the Celery worker wrote no heartbeat")
        time.sleep(0.1)
    return proc


def _ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000, out


def _row(name: str, first: float, times: list[float], note: str) -> list[object]:
    return [name, round(first, 1), len(times), round(p50(times), 2), round(pct(times, 95), 2),
            round(max(times), 2), note]


def _http_get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            resp.read()
            return resp.status
    except urllib.error.HTTPError as exc:
        exc.read()
        return exc.code


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=300, help="probes per row of the new path")
    ap.add_argument("--deep", type=int, default=10, help="calls of the old path (about a second each)")
    args = ap.parse_args()
    setup_django()
    from django.db import connection
    from django.test import Client

    from accounts.models import User
    from console.health import health_report
    from search.engine.index import close_index, get_index

    worker = _start_worker()
    rows, per_check = [], {}
    try:
        # new path, in-process, cold: this process holds no index handle yet, and the probe does not open one.
        # Staff, so each check reports its own ms (anonymous callers see only ok/down; the work is the same).
        client = Client()
        client.force_login(User.objects.create_user(email="bench-health@example.com", password="x" * 16,
                                                     is_staff=True))
        connection.close()
        first_cold, resp = _ms(lambda: client.get("/healthz"))
        cold_down = resp.json().get("down", [])

        # old path: the first call opens the index (loads the model), every call pings the workers
        first_deep, _ = _ms(lambda: health_report(deep=True))
        deep = [_ms(lambda: health_report(deep=True))[0] for _ in range(args.deep)]
        rows.append(_row("before: worker ping + index opened and counted (now `platform status`)", first_deep,
                         deep, "first call opens the index"))

        get_index()  # as the web process's applier thread does at start
        statuses, fast = set(), []
        for _ in range(args.requests):
            connection.close()  # the test client keeps it between requests; a served request opens its own
            ms, resp = _ms(lambda: client.get("/healthz"))
            fast.append(ms)
            statuses.add(resp.status_code)
            for name, check in resp.json()["checks"].items():
                per_check.setdefault(name, []).append(check.get("ms", 0.0))
        rows.append(_row("after: /healthz, Django test client (in-process)", first_cold, fast,
                         f"first probe (first-request imports; index not open yet): 503 {cold_down}; "
                         f"then {sorted(statuses)}"))
        close_index()  # gunicorn owns the embedded store from here

        port = _free_port()
        web = subprocess.Popen([sys.executable, "-m", "gunicorn", "console.wsgi:application", "-k", "gthread", "-w",
                                "1", "--threads", "4", "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
                               cwd=ROOT, env=dict(os.environ))
        url = f"http://127.0.0.1:{port}/healthz"
        try:
            deadline = time.time() + 120
            first_http, opening = None, 0
            while True:  # probes while gunicorn starts and its applier opens the index
                try:
                    ms, status = _ms(lambda: _http_get(url))
                except (urllib.error.URLError, ConnectionError):
                    if web.poll() is not None or time.time() > deadline:
                        raise SystemExit("gunicorn did not come up") from None
                    time.sleep(0.2)
                    continue
                first_http = first_http if first_http is not None else ms
                if status == 200:
                    break
                opening += 1
                if time.time() > deadline:
                    raise SystemExit("/healthz never turned 200")
                time.sleep(0.1)
            http = [_ms(lambda: _http_get(url))[0] for _ in range(args.requests)]
            rows.append(_row("after: /healthz over HTTP (gunicorn gthread, loopback)", first_http, http,
                             f"first 200 right after start (first-request imports); {opening} probe(s) before it "
                             "answered 503 while the applier opened the index"))
        finally:
            web.terminate()
            web.wait(30)
    finally:
        worker.terminate()
        worker.wait(30)

    check_rows = [[name, round(p50(v), 2), round(pct(v, 95), 2)] for name, v in per_check.items()]
    text = "\n".join([
        "## /healthz latency: cheap checks vs the old ping path", "",
        table(["path", "first call ms", "calls", "p50 ms", "p95 ms", "max ms", "note"], rows), "",
        "Per check inside the in-process /healthz (the `ms` each check reports):", "",
        table(["check", "p50 ms", "p95 ms"], check_rows), "",
        "- New checks: Postgres (one catalogue read on a fresh connection, as every request opens one with "
        "DB_CONN_MAX_AGE=0), Redis PING, "
        "the worker heartbeat (one pipelined Redis read; workers beat every WORKER_HEARTBEAT_S), whether this "
        "process's index handle is open (no I/O), the embedding configuration (no weights).",
        "- The old path waits out the ping timeout (1 s) collecting replies even when the worker answers at once.",
        "", machine(), "",
        "Reproduce: `.venv/bin/python bench/bench_health.py` (about a minute).",
    ])
    write_result("health", text)


if __name__ == "__main__":
    main()
