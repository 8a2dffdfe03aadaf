"""Importing settings starts nothing: no Postgres, no Redis, no data directory (config/embedded.py starts them only
when asked: `manage.py platform up`, the test session, the benchmarks)."""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, django
django.setup()
import config.celery, console.urls  # the Celery app and every view module, as a worker or the web process loads them
from django.conf import settings
print(json.dumps({"db": settings.DATABASE_URL, "redis": settings.REDIS_URL, "embedded": sorted(settings.EMBEDDED),
                  "var": str(settings.VAR_DIR)}))
"""


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        if text in args:
            found.append(f"{cmdline.parent.name}: {args}")
    return found


def test_importing_settings_starts_no_service_and_creates_no_data_dir(tmp_path):
    var_dir = tmp_path / "var"  # does not exist: importing settings must not create it either
    env = {k: v for k, v in os.environ.items()
           if k not in {"DATABASE_URL", "REDIS_URL", "PLATFORM_EMBEDDED", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND",
                        "QDRANT_URL", "QDRANT_PATH"}}
    env.update(VAR_DIR=str(var_dir), DJANGO_SETTINGS_MODULE="config.settings", INDEX_APPLIER_THREAD="0")
    try:
        proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        started = _processes_mentioning(str(var_dir))
    finally:  # a regression must not leave its servers running: stop what the child started (SIGINT: fast stop)
        for line in _processes_mentioning(str(var_dir)):
            try:
                os.kill(int(line.split(":", 1)[0]), signal.SIGINT)
            except OSError:
                pass
    assert started == []
    assert proc.returncode == 0, proc.stderr
    resolved = json.loads(proc.stdout.strip().splitlines()[-1])
    # the settings know where the embedded servers will be, without them running
    assert resolved["var"] == str(var_dir.resolve())
    assert resolved["db"].endswith(f"host={var_dir.resolve() / 'pg'}")
    assert resolved["redis"] == f"unix://{var_dir.resolve() / 'redis' / 'redis.sock'}"
    assert {"postgres", "redis"} <= set(resolved["embedded"])
    # and nothing was started or created
    assert not var_dir.exists(), sorted(str(p) for p in tmp_path.rglob("*"))
    assert not [p for p in tmp_path.rglob("*") if p.is_socket()]
