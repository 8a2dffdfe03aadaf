"""`make bench`: every benchmark in turn, each in its own process with private services.

Why sequential: the figures are latencies and throughputs on a small machine; two benches at once would
measure each other. Each script writes bench/results/<name>.md, which the README quotes.
Pass script names (with arguments, quoted) to run a subset: `.venv/bin/python bench/run_all.py bench_load.py
'bench_context.py --chunks 4000'`. The 100k context run alone takes ~20 min on 2 cores.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = ["bench_embedding.py", "bench_context.py", "bench_context.py --chunks 100000",
           "bench_query_during_ingest.py", "bench_people.py", "bench_people_relaxation.py",
           "bench_eval.py", "bench_load.py", "bench_health.py", "fuzz_api.py", "access_property.py"]


def main() -> int:
    wanted = sys.argv[1:] or SCRIPTS
    failed = []
    for entry in wanted:
        name, *args = entry.split()
        path = HERE / name
        if not path.exists():
            print(f"== {name}: missing, skipped", flush=True)
            failed.append(name)
            continue
        print(f"== {entry}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(path), *args], cwd=HERE.parent)
        print(f"== {entry}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(entry)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
