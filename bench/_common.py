"""Shared plumbing for the benchmark scripts (not tests).

Why: every bench runs Django against its own private embedded Postgres, Redis
and Qdrant under a temp dir (like tests/envsetup.py), so figures never touch
dev data and runs do not disturb each other. Also: machine description,
percentiles and the results file writer, so every table has the same footer.
"""
from __future__ import annotations

import atexit
import datetime
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def setup_django(*, var_dir: str | None = None) -> Path:
    """Private VAR_DIR, django.setup(), migrate. Services are stopped at exit; a temp dir is removed, a given
    --var-dir is kept so a later run reuses its data (e.g. the SciFact embeddings)."""
    keep = bool(var_dir)
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ.pop("QDRANT_URL", None)
    var_dir = Path(var_dir).resolve() if var_dir else Path(tempfile.mkdtemp(prefix="platform-bench-"))
    var_dir.mkdir(parents=True, exist_ok=True)
    os.environ["VAR_DIR"] = str(var_dir)
    os.environ.setdefault("CELERY_QUEUE", "bench-" + var_dir.name)
    atexit.register(_teardown, var_dir, keep)
    from config import embedded

    embedded.start_services(var_dir=var_dir)  # importing settings starts nothing; a bench starts its own
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return var_dir


def _teardown(var_dir: Path, keep: bool) -> None:
    from config import embedded

    embedded.stop_everything(var_dir=var_dir)
    if not keep:
        shutil.rmtree(var_dir, ignore_errors=True)


def machine() -> str:
    """One markdown line naming the machine the figures come from."""
    cpu = platform.processor() or "?"
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == (platform.processor() or "?"):
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    bf16 = [f for f in ("amx_bf16", "avx512_bf16") if f in flags]
    cpu += f" (native bf16: {', '.join(bf16)})" if bf16 else " (no native bf16)"
    ram = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
                break
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        import torch

        tv = f"{torch.__version__} (threads {torch.get_num_threads()})"
    except Exception:  # noqa: BLE001
        tv = "n/a"
    try:
        import sentence_transformers

        st = sentence_transformers.__version__
    except Exception:  # noqa: BLE001
        st = "n/a"
    load = "/".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"Machine: {cpu}, {cores} cores usable, {ram} RAM; Python {platform.python_version()}, "
            f"torch {tv}, sentence-transformers {st}; {platform.platform()}. Load average (1/5/15 min) when the "
            f"table was written: {load} — the cores were shared with other jobs, so absolute times are pessimistic.")


def amx_line() -> str:
    """AMX said plainly (machine() names the bf16 flags): the encoder's speed depends on it."""
    try:
        flags = next((ln.split(":", 1)[1].split() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                      if ln.startswith("flags")), [])
    except OSError:
        flags = []
    amx = [f for f in flags if f.startswith("amx")]
    return f"AMX: {'yes (' + ', '.join(amx) + ')' if amx else 'no'}."


def pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0 for no values."""
    if not values:
        return 0.0
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def table(headers: list[str], rows: list[list[object]]) -> str:
    def fmt(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.4g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(fmt(v) for v in r) + " |" for r in rows]
    return "\n".join(out)


def write_result(name: str, text: str) -> Path:
    """Print the markdown and save it as bench/results/<name>.md, stamped with the day it was measured (the
    benchmark index, docs/reference/benchmark-results.md, reads the stamp)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.md"
    text = text.rstrip() + f"\n\nMeasured: {datetime.date.today().isoformat()}\n"
    path.write_text(text)
    print(text)
    print(f"\n[written {path.relative_to(ROOT)}]", file=sys.stderr)
    return path
