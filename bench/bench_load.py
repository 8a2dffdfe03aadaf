"""Load: throughput and p50/p95/p99 for context query, rules answer (no LLM) and people search at rising
concurrency, against gunicorn on the embedded stack (loopback only, bounded in time).

Why gunicorn with one gthread worker: the embedded Qdrant store admits one open handle (search/engine/index_embedded.py;
docs/architecture.md, "Data ownership"), so the process that serves context and rules queries must be a
single process; its threads share the handle. Postgres, Redis and the embedding model are the real ones.
With QDRANT_URL set, more workers could be added; that is not what this measures.

Each level runs closed-loop clients (each sends its next request when the last one finished) for a fixed
time; the p95 ratio is against the same endpoint at 1 client, measured in the same run. "p95 doubles at"
names the first level whose p95 is at least twice the 1-client p95.

    .venv/bin/python bench/bench_load.py [--levels 1,2,4,8,16,32] [--seconds 15] [--threads 32]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, p50, pct, setup_django, table, write_result

CONTEXT_QUERIES = ["where are credits deducted", "idempotency key replay", "how are chunks embedded",
                   "reciprocal rank fusion", "apply the index outbox", "project membership access check",
                   "rate limit retry after", "stop embedded postgres", "rerank candidates", "people search tiers"]
RULES_QUERIES = ["how does grappling work", "what happens when a creature is frightened", "how long is a rest",
                 "can I cast two spells in one turn", "what does advantage do", "how does stealth work"]
PEOPLE_QUERIES = ["backend engineers in bangalore", "react developers who worked at flipkart",
                  "data engineers with spark", "devops engineer kubernetes open to work",
                  "android engineers at swiggy", "security engineer appsec", "junior python developer chennai"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _seed() -> str:
    """Demo content (this repo's source, the Emberfall rulebook, 200 people) and a bench API key."""
    from django.core.management import call_command

    from accounts.apikeys import issue_api_key
    from accounts.models import User
    from credits.ledger import grant
    from search.engine.applier import apply_outbox
    from search.engine.index import close_index

    t0 = time.perf_counter()
    call_command("demo")
    apply_outbox()
    close_index()  # gunicorn owns the embedded store from here
    user = User.objects.get(email="demo@example.com")
    grant(user=user, amount=1_000_000, reason="bench")
    print(f"seeded demo content in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return issue_api_key(user=user, name="bench-load").secret


def _start_gunicorn(threads: int) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    env = dict(os.environ, RATE_LIMIT_SEARCH="1000000/m", RATE_LIMIT_CONTEXT_QUERY="1000000/m",
               RATE_LIMIT_ANSWER="1000000/m", RATE_LIMIT_UNLOCK="1000000/m", RATE_LIMIT_DEFAULT="1000000/m",
               OPENAI_BASE_URL="", LLM_MODEL="")
    proc = subprocess.Popen([sys.executable, "-m", "gunicorn", "console.wsgi:application", "-k", "gthread",
                             "-w", "1", "--threads", str(threads), "-b", f"127.0.0.1:{port}", "--timeout", "300",
                             "--log-level", "warning"], cwd=ROOT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=5)
            return proc, url
        except urllib.error.HTTPError:  # 503 (e.g. no worker) still means it serves
            return proc, url
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            if proc.poll() is not None:
                raise SystemExit("gunicorn exited during start-up") from None
            time.sleep(0.5)
    proc.terminate()
    raise SystemExit("gunicorn did not come up")


def _post(url: str, body: dict, key: str) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, resp.read()  # an SSE answer is read to its last event
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _level(*, url: str, key: str, path: str, make_body, clients: int, seconds: float) -> dict:
    lat: list[float] = []
    errors: dict[int, int] = {}
    lock = threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(n: int) -> None:
        i = n
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            status, body = _post(url + path, make_body(i), key)
            ms = (time.perf_counter() - t0) * 1000
            ok = status == 200 and (b"event: error" not in body)
            with lock:
                if ok:
                    lat.append(ms)
                else:
                    errors[status] = errors.get(status, 0) + 1
            i += clients

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    return {"clients": clients, "ok": len(lat), "errors": errors, "rps": len(lat) / wall, "p50": p50(lat),
            "p95": pct(lat, 95), "p99": pct(lat, 99), "wall": wall}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="1,2,4,8,16,32")
    ap.add_argument("--seconds", type=float, default=15.0, help="per level and endpoint")
    ap.add_argument("--threads", type=int, default=32, help="gunicorn gthread threads")
    ap.add_argument("--var-dir", default="")
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]

    setup_django(var_dir=args.var_dir or None)
    key = _seed()
    proc, url = _start_gunicorn(args.threads)
    endpoints = [
        ("context query", "/api/projects/demo/query",
         lambda i: {"q": CONTEXT_QUERIES[i % len(CONTEXT_QUERIES)], "top_k": 10}),
        ("rules answer (extractive, SSE)", "/api/projects/demo/answer",
         lambda i: {"q": RULES_QUERIES[i % len(RULES_QUERIES)]}),
        ("people search", "/api/search", lambda i: {"query": PEOPLE_QUERIES[i % len(PEOPLE_QUERIES)]}),
    ]
    sections, summary = [], []
    try:
        for name, path, make_body in endpoints:
            _level(url=url, key=key, path=path, make_body=make_body, clients=1, seconds=3)  # warm caches/model
            rows, base, doubled = [], None, None
            for c in levels:
                r = _level(url=url, key=key, path=path, make_body=make_body, clients=c, seconds=args.seconds)
                base = base or r["p95"]
                ratio = r["p95"] / base if base else 0.0
                if doubled is None and c > 1 and ratio >= 2.0:
                    doubled = c
                errs = ", ".join(f"{k}: {v}" for k, v in sorted(r["errors"].items())) or "0"
                rows.append([c, r["ok"], errs, round(r["rps"], 2), round(r["p50"]), round(r["p95"]),
                             round(r["p99"]), f"{ratio:.2f}x"])
                print(f"{name} c={c}: {r['ok']} ok, {r['rps']:.2f} rps, p95 {r['p95']:.0f} ms", file=sys.stderr)
            sections += [f"### {name} — `POST {path}`", "",
                         table(["clients", "requests ok", "errors", "req/s", "p50 ms", "p95 ms", "p99 ms",
                                "p95 vs 1 client"], rows), ""]
            summary.append([name, f"{rows[0][3]}", f"{max(r[3] for r in rows)}",
                            f"{doubled} clients" if doubled else f"not within {levels[-1]}"])
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = "\n".join([
        f"## Load: gunicorn (1 gthread worker, {args.threads} threads) on the embedded stack, "
        f"{args.seconds:.0f} s per level", "",
        table(["endpoint", "req/s at 1 client", "best req/s", "p95 doubles at"], summary), "",
        *sections,
        "- Closed-loop clients on loopback; every request authenticated; people searches are real paid searches "
        "(the bench user holds a large grant). Rate limits raised for the run; the LLM is off, so rules "
        "answers are extractive and people queries use the deterministic parser.",
        "- One process serves everything because the embedded Qdrant store admits one open handle; CPU-bound "
        "stages (query embedding, rerank) share the machine's cores, so throughput saturates at the core count.",
        "", machine(), "",
        "Reproduce: `.venv/bin/python bench/bench_load.py` (add `--levels 1,8,32 --seconds 10` for a quick run).",
    ])
    write_result("load", text)


if __name__ == "__main__":
    main()
