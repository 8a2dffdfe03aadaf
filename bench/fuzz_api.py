"""Fuzz every API operation with schemathesis against the served OpenAPI schema, and count what breaks.

Why: tests/hardening/test_fuzz.py is a small derandomised run inside `make test`; this is the large one
(several hundred examples per operation, each operation bounded in time). Requests go through the real
Django WSGI app on private embedded Postgres/Redis/Qdrant, authenticated as a member of a project with a
small ingested code dataset, the demo rulebook, people, a past search and credits (the same world as the
test: tests/hardening/fuzz_world.py). Every request runs in a rolled-back savepoint, so examples do not
change the world for each other. Rate limits are raised for the run (they are tested in
tests/hardening/test_rate_limit_load.py) and API ingest may only read the fixture repo.

Per operation: examples sent, 5xx responses, responses whose body breaks the schema for their status,
and status codes the schema does not list for the operation. The first failing request of each kind is
shown as a curl line so it can be replayed.

    .venv/bin/python bench/fuzz_api.py [--examples 300] [--seconds 60] [--only PATH-SUBSTRING]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--examples", type=int, default=300, help="examples per operation")
    ap.add_argument("--seconds", type=float, default=60.0, help="time bound per operation")
    ap.add_argument("--only", default="", help="only operations whose path contains this")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/fuzz.md")
    args = ap.parse_args()
    setup_django()

    import schemathesis
    from django.test import override_settings
    from hypothesis import HealthCheck, given
    from hypothesis import settings as hsettings
    from hypothesis import strategies as st
    from schemathesis import GenerationMode
    from schemathesis.checks import not_a_server_error
    from schemathesis.specs.openapi.checks import (
        content_type_conformance,
        ignored_auth,
        negative_data_rejection,
        response_schema_conformance,
        status_code_conformance,
    )

    from console.wsgi import application
    from tests.hardening.fuzz_world import InProcessRequests, build_world, use_world

    tmp = Path(tempfile.mkdtemp(prefix="fuzz-world-"))
    limits = {k: "1000000/m" for k in __import__("django.conf").conf.settings.RATE_LIMITS}
    override = override_settings(RATE_LIMITS=limits, INGEST_ALLOWED_ROOTS=[tmp / "shop"])
    override.enable()
    t0 = time.perf_counter()
    world = build_world(tmp)
    print(f"world built in {time.perf_counter() - t0:.1f} s", flush=True)
    schema = schemathesis.openapi.from_wsgi("/api/schema/", application)

    kinds = {"5xx": [not_a_server_error], "schema": [response_schema_conformance],
             "status": [status_code_conformance], "content_type": [content_type_conformance],
             "negative_accepted": [negative_data_rejection], "auth_ignored": [ignored_auth]}
    rows, totals = [], defaultdict(int)
    samples: list[str] = []
    for result in schema.get_all_operations():
        op = result.ok()
        label = f"{op.method.upper()} {op.path}"
        if args.only and args.only not in op.path:
            continue
        counts: dict[str, int] = defaultdict(int)
        statuses: dict[int, int] = defaultdict(int)
        seen: set[str] = set()
        deadline = time.monotonic() + args.seconds

        def make_run(counts=counts, statuses=statuses, seen=seen, deadline=deadline,
                     label=label, op=op):
            @hsettings(max_examples=args.examples, deadline=None, database=None,
                       suppress_health_check=list(HealthCheck))
            @given(case=st.one_of(op.as_strategy(GenerationMode.POSITIVE),
                                  op.as_strategy(GenerationMode.NEGATIVE)),
                   rnd=st.randoms(use_true_random=False))
            def run(case, rnd):
                use_world(case, rnd, secret=world.secret)  # before the time check: draws must not depend on it
                if time.monotonic() > deadline:
                    return
                with InProcessRequests():
                    response = case.call()
                    counts["examples"] += 1
                    statuses[response.status_code] += 1
                    for kind, checks in kinds.items():
                        try:
                            case.validate_response(response, checks=checks)
                        except (AssertionError, BaseExceptionGroup) as exc:  # schemathesis: Failure or FailureGroup
                            counts[kind] += 1
                            if kind not in seen:
                                seen.add(kind)
                                first = str(exc).strip().splitlines()
                                curl = case.as_curl_command(headers={"Authorization": "Bearer ..."})
                                samples.append(f"- `{label}` {kind}: HTTP {response.status_code}: "
                                               f"{' '.join(first[:12])[:900]}\n  `{curl[:400]}`")
            return run

        run_op = make_run()
        t_op = time.perf_counter()
        run_op()
        elapsed = time.perf_counter() - t_op
        row = [label, counts["examples"], counts["5xx"], counts["schema"], counts["status"], counts["content_type"],
               counts["negative_accepted"], counts["auth_ignored"],
               " ".join(f"{k}:{v}" for k, v in sorted(statuses.items())), f"{elapsed:.0f}"]
        rows.append(row)
        for k in ("examples", *kinds):
            totals[k] += counts[k]
        print(" | ".join(str(x) for x in row), flush=True)

    rows.append(["**total**", totals["examples"], totals["5xx"], totals["schema"], totals["status"],
                 totals["content_type"], totals["negative_accepted"], totals["auth_ignored"], "", ""])
    out = [
        "# API fuzzing (schemathesis)",
        "",
        f"`.venv/bin/python bench/fuzz_api.py --examples {args.examples} --seconds {args.seconds:g}`: "
        f"schemathesis {schemathesis.__version__ if hasattr(schemathesis, '__version__') else ''} generating "
        f"requests from `/api/schema/` for every operation, up to {args.examples} examples or "
        f"{args.seconds:g} s per operation, authenticated, through the Django WSGI app on private embedded "
        "services. Checks: not_a_server_error (5xx), response_schema_conformance (body breaks the schema), "
        "status_code_conformance (status not listed for the operation), content_type_conformance (media type "
        "not listed), negative_data_rejection (a request that breaks the schema was accepted with 2xx) and "
        "ignored_auth (the same request without credentials was not refused). Generation modes: positive and "
        "negative. About half the path, query and body values are swapped for real ids of the world.",
        "",
        table(["operation", "examples", "5xx", "schema violations", "undocumented status", "wrong content type",
               "invalid input accepted", "auth ignored", "statuses seen", "s"], rows),
        "",
    ]
    if samples:
        out += ["First failing request of each kind:", "", *samples, ""]
    out += [machine(), ""]
    text = "\n".join(out)
    if args.no_write or args.only:
        print(text)
    else:
        write_result("fuzz", text)


if __name__ == "__main__":
    main()
