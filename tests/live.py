"""A real server process on loopback for the tests that need one (gunicorn, `manage.py webserver`), on the test
database: start it, wait until it answers, stop it. Shared so that each live test does not grow its own loop."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

from tests.conftest import ROOT


def free_port() -> int:
    """A port on 127.0.0.1 free right now (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def db_env(**extra: str) -> dict[str, str]:
    """This process's environment with DATABASE_URL pointing at the test database, plus `extra`."""
    from django.db import connection

    db = connection.settings_dict
    return dict(os.environ, DATABASE_URL=f"postgresql://{db['USER']}:@/{db['NAME']}?host={db['HOST']}", **extra)


@contextlib.contextmanager
def serving(argv: list[str], *, env: dict[str, str], probe: str, what: str,
            start_timeout_s: float = 90) -> Iterator[tuple[str, subprocess.Popen]]:
    """Run `python argv...` (each "{port}" in it replaced by a free port) until it answers `probe` over HTTP (any
    HTTP status counts), yield (base URL, process), then terminate it."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, *(a.replace("{port}", str(port)) for a in argv)], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + start_timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{url}{probe}", timeout=5)
            break
        except urllib.error.HTTPError:
            break  # any HTTP answer means it serves
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"{what} did not come up") from None
            time.sleep(0.2)
    try:
        yield url, proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
