"""Query latency of one checkout of the platform, as JSON: what `bench_context.py --against REV` runs once on REV
and once on this tree, so a refactor's before and after are measured in one run on the same machine and data.

Why a separate process per checkout: two versions of the same packages cannot share one interpreter. The probe
imports whichever checkout `--root` names, so it speaks both the current API (QuerySpec, search.engine.*,
search.ingest.jobs) and the layout before search/ was split by job (search.pipeline, search.ingest.runner).

    .venv/bin/python bench/latency_probe.py --root PATH [--files N] [--passes N]
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

QUERIES = [
    "where is the credit ledger debited", "idempotency key replay", "how are chunks embedded and cached",
    "reciprocal rank fusion of dense and sparse", "apply the index outbox", "project membership access check",
    "rate limit retry after header", "parse a BEIR collection", "rerank candidates with coverage",
    "validate query filters", "people search fallback tiers", "render the why panel", "ingest a git repository",
    "rulebook section path chunking", "celery task for ingestion", "stop embedded postgres",
    "compress the shard snapshot", "retry webhook payload", "normalise tenant credential", "score vector budget",
]
WORDS = ["invoice", "ledger", "token", "session", "payload", "snapshot", "cursor", "manifest", "shard", "bucket",
         "tenant", "credential", "report", "segment", "vector", "query", "budget", "webhook", "schema", "queue"]


def _first(*names: str) -> object:
    """The first of `module:attr` that this checkout has."""
    for name in names:
        module, attr = name.split(":")
        try:
            return getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {names}")


def corpus(dest: Path, files: int) -> None:
    """Generated Python modules (fixed seed): the same bytes for every checkout."""
    rng = random.Random(42)
    for f in range(files):
        funcs = []
        for i in range(25):
            a, b = rng.choice(WORDS), rng.choice(WORDS)
            body = "\n".join(f"    {rng.choice(WORDS)}_{j} = {b}.get('{a}', {rng.randint(1, 99)})" for j in range(6))
            funcs.append(f"def {a}_{b}_{f}_{i}({b}: dict) -> dict:\n    \"\"\"Handle the {a} of a {b}.\"\"\"\n{body}\n"
                         f"    return {{'{a}': {b}}}\n")
        (dest / f"mod_{f:04d}.py").write_text(f'"""Module {f}."""\n\n\n' + "\n\n".join(funcs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", required=True, help="the checkout to measure")
    ap.add_argument("--files", type=int, default=80, help="generated modules (26 chunks each)")
    ap.add_argument("--passes", type=int, default=5, help="passes over the 20 queries after one warm-up pass")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    sys.path.insert(0, str(root))
    os.chdir(root)
    for name in ("DATABASE_URL", "REDIS_URL", "QDRANT_URL"):
        os.environ.pop(name, None)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    var_dir = Path(tempfile.mkdtemp(prefix="latency-probe-"))
    os.environ["VAR_DIR"] = str(var_dir)
    os.environ["CELERY_QUEUE"] = "probe-" + var_dir.name
    from config import embedded

    embedded.start_services(var_dir=var_dir)
    try:
        import django

        django.setup()
        from django.core.management import call_command

        call_command("migrate", verbosity=0)
        print(json.dumps(measure(args)))
    finally:
        embedded.stop_everything(var_dir=var_dir)
        shutil.rmtree(var_dir, ignore_errors=True)


def measure(args: argparse.Namespace) -> dict:
    from projects.models import Project

    dataset_cls = _first("search.models:Dataset", "projects.models:Dataset")  # Dataset moved to search
    start_ingest = _first("search.ingest.jobs:start_ingest", "search.ingest.runner:start_ingest")
    apply_outbox = _first("search.engine.applier:apply_outbox", "search.engine.index:apply_outbox",
                          "search.index:apply_outbox")
    run_query = _first("search.engine.pipeline:run_query", "search.pipeline:run_query")
    try:
        spec_cls = _first("search.engine.pipeline:QuerySpec")
    except ImportError:
        spec_cls = None
    src = Path(tempfile.mkdtemp(prefix="probe-corpus-"))
    corpus(src, args.files)
    project = Project.objects.create(slug="probe", name="Probe")
    dataset = dataset_cls.objects.create(project=project, name="probe", kind="code")
    asked = {"dataset": dataset, "source": str(src), "kind": "code", "options": {"repo": "probe"}}
    if "job" in inspect.signature(start_ingest).parameters:  # the IngestJob row as asked; older checkouts: its fields
        job = start_ingest(job=_first("search.models:IngestJob")(**asked), sync=True, apply_index=False)
    else:
        job = start_ingest(**asked, sync=True, apply_index=False)
    while apply_outbox():
        pass
    shutil.rmtree(src, ignore_errors=True)
    fields = {"include_global": False, "rerank": False, "log": False, "kind": "bench"}
    wall: list[float] = []
    stages: dict[str, list[float]] = {}
    for p in range(args.passes + 1):
        for q in QUERIES:
            t = time.perf_counter()
            if spec_cls is not None:
                res = run_query(user=None, project=project, spec=spec_cls(q=q, **fields))
            else:
                res = run_query(user=None, project=project, q=q, **fields)
            ms = (time.perf_counter() - t) * 1000
            if p:
                wall.append(ms)
                for k, v in res.timings.items():
                    stages.setdefault(k, []).append(float(v))
    return {"chunks": job.chunks_written, "wall": wall, "stages": stages}


if __name__ == "__main__":
    main()
