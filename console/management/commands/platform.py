"""`manage.py platform up|down|status|serve`: the embedded services, idempotently.

up     start embedded Postgres and Redis unless a URL points elsewhere; reuse what runs (importing settings
       never starts them: this, the test session and the benchmarks do)
down   stop only what `up` started (recorded in var/platform.json)
status each dependency and the Celery worker (the deep checks: opens the index, pings the workers)
serve  up, then the web server on 127.0.0.1:8000 and one Celery worker (with beat); Ctrl-C stops them
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from config import embedded
from console.health import health_report

if TYPE_CHECKING:
    from types import FrameType


def _state_path() -> Path:
    return settings.VAR_DIR / "platform.json"


def _load_state() -> dict:
    try:
        return json.loads(_state_path().read_text())
    except (OSError, ValueError):
        return {}


def _save_state(state: dict) -> None:
    _state_path().write_text(json.dumps(state, indent=2))


class Command(BaseCommand):
    help = "Start, stop, inspect or serve the platform on its embedded defaults."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["up", "down", "status", "serve"])
        parser.add_argument("--addr", default=os.environ.get("SERVE_ADDR", "127.0.0.1:8000"))

    def handle(self, *args: object, action: str, addr: str, **opts: object) -> None:
        getattr(self, f"do_{action}")(addr=addr)

    # Importing settings starts nothing: `up` is the explicit start of the embedded services (when no URL points
    # elsewhere), exporting their URLs for the web process and the worker that `serve` starts next. It records
    # which ones are ours so `down` stops only those.
    def do_up(self, **_: object) -> None:
        state = _load_state()
        ours = [name for name in ("postgres", "redis") if name in settings.EMBEDDED]
        urls = embedded.start_services(var_dir=settings.VAR_DIR, names=ours)
        for name, state_fn, url in (("postgres", embedded.postgres_state, urls.get("postgres", settings.DATABASE_URL)),
                                    ("redis", embedded.redis_state, urls.get("redis", settings.REDIS_URL))):
            if name in ours:
                st = state_fn(var_dir=settings.VAR_DIR)
                state.setdefault(name, {"pid": st.pid, "dir": st.detail})
                self.stdout.write(f"{name:9s} up, embedded (pid {st.pid}, {st.detail})")
            else:
                self.stdout.write(f"{name:9s} external: {url.split('@')[-1]}")
        qdrant = settings.QDRANT_URL or f"embedded engine at {settings.QDRANT_PATH} (opened by the web process)"
        self.stdout.write(f"{'qdrant':9s} {qdrant}")
        _save_state(state)

    def do_down(self, **_: object) -> None:
        state = _load_state()
        var_dir = settings.VAR_DIR
        if "redis" in state:
            stopped = embedded.stop_redis(var_dir=var_dir)
            self.stdout.write(f"redis     {'stopped' if stopped else 'was not running'}")
        if "postgres" in state:

            connections.close_all()
            stopped = embedded.stop_postgres(var_dir=var_dir)
            self.stdout.write(f"postgres  {'stopped' if stopped else 'was not running'}")
        if not state:
            self.stdout.write("nothing was started by `platform up`")
        _save_state({})

    def do_status(self, **_: object) -> None:
        report = health_report(deep=True)  # a person waits a second for a worker ping and a point count
        for name, check in report["checks"].items():
            mark = "up  " if check["ok"] else "DOWN"
            self.stdout.write(f"{name:10s} {mark} {check['ms']:7.1f} ms  {check['detail']}")
        if not report["ok"]:
            raise CommandError("some dependencies are down")

    def do_serve(self, *, addr: str) -> None:
        self.do_up()
        py = sys.executable
        env = dict(os.environ)
        worker = subprocess.Popen(
            [py, "-m", "celery", "-A", "config", "worker", "-B", "--pool", "threads", "--concurrency", str(settings.CELERY_WORKER_CONCURRENCY),
             "-Q", settings.CELERY_TASK_DEFAULT_QUEUE, "-l", "INFO",
             "--schedule", str(settings.VAR_DIR / "celerybeat-schedule")],
            env=env,
        )
        web = subprocess.Popen([py, "manage.py", "webserver", "--noreload", "--insecure", addr], env=env)
        self.stdout.write(self.style.SUCCESS(f"serving http://{addr}/  (admin: /admin/, API docs: /api/docs/); "
                                             "Ctrl-C stops"))
        procs = [web, worker]

        def stop(signum: int, frame: FrameType | None) -> NoReturn:
            raise KeyboardInterrupt

        # Ctrl-C, and also SIGTERM from a process manager (or a SIGINT that a non-interactive shell started us
        # ignoring), stop the web process, the worker and the embedded services we started.
        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            while all(p.poll() is None for p in procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            pass
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
            self.do_down()
