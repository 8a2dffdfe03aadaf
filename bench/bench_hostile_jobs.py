"""Two hostile syncs of one tenant against another tenant's ingest: how long the neighbour's push waits.

The scenario is tests/hardening/test_job_bounds.py's worker test, run as it is in two trees in the same run: a
real Celery worker with two thread slots (the default concurrency) on a test database; tenant A queues two web
syncs of sites on 127.0.0.1 whose 200 pages each answer after 1 s (each sync holds its slot for minutes), then
tenant B pushes one document. Before (the code before jobs had per-project slots) both slots go to A and B waits
for them; after, A holds one slot and B runs in the other. The wait is capped at 120 s by the test ("> 120 s").
Peak memory is the largest resident size among the processes each run waited for (pytest; the worker is its child).

    .venv/bin/python bench/bench_hostile_jobs.py --before /tmp/old-tree   # a worktree of the code before
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

WRAPPER = ("import resource, subprocess, sys; rc = subprocess.call([sys.executable, *sys.argv[1:]]); "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)")
TEST = "tests/hardening/test_job_bounds.py::test_two_hostile_syncs_of_one_tenant_leave_a_worker_slot_for_another_tenants_ingest"


def run(tree: Path) -> dict[str, object]:
    """The scenario in `tree` (its own copy of the test), capped at 10 minutes; -> what it saw."""
    test = tree / "tests/hardening/test_job_bounds.py"
    if tree != ROOT:
        test.write_text((ROOT / "tests/hardening/test_job_bounds.py").read_text())
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        report = Path(f.name)
    env = {**os.environ, "JOB_BOUNDS_REPORT": str(report)}
    t0 = time.monotonic()
    peak_mib = 0.0
    try:  # a wrapper process per run, so the peak is this run's (RUSAGE_CHILDREN: the processes it waited for)
        proc = subprocess.run([str(ROOT / ".venv/bin/python"), "-c", WRAPPER, "-m", "pytest", TEST, "-q", "-p",
                               "no:randomly"], cwd=tree, env=env, capture_output=True, text=True, timeout=600)
        passed = proc.returncode == 0
        peak_mib = float(proc.stderr.strip().splitlines()[-1]) / 1024
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        passed = False
    seen = json.loads(report.read_text() or "{}") if report.exists() and report.stat().st_size else {}
    report.unlink(missing_ok=True)
    return {"seen": seen, "passed": passed, "total_s": time.monotonic() - t0, "peak_mib": peak_mib}


def cell(r: dict[str, object]) -> list[object]:
    seen = r["seen"]
    if not seen:
        return ["?", f"{r['peak_mib']:.0f}", "no report"]
    done = seen["b_status"] == "done"
    wait = f"{seen['b_wait_s']} s" if done else "> 120 s"
    outcome = (f"B {seen['b_status']}; A ran {seen['hostile_running_at_most']} sync(s) at once")
    return [wait, f"{r['peak_mib']:.0f}", outcome]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="a worktree of the code before (git worktree add)")
    args = ap.parse_args()
    before = run(args.before.resolve())
    after = run(ROOT)
    rows = [["two hostile syncs of tenant A (2 x 200 pages at 1 s) vs tenant B's one-document push, "
             "worker with 2 thread slots", *cell(before), *cell(after)]]
    text = "\n".join([
        "# Hostile jobs: one tenant's slow syncs against another tenant's ingest", "", machine(), "",
        table(["case", "before: B waited", "before: peak MiB", "before: outcome", "after: B waited",
               "after: peak MiB", "after: outcome"], rows), "",
        "B waited: from B's push to its job being done (the scenario stops watching at 120 s). Peak MiB: the "
        "largest resident size of the processes the run waited for.",
    ])
    write_result("hostile_jobs", text)


if __name__ == "__main__":
    main()
