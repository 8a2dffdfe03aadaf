"""The input-class sweep (tests/hardening/input_sweep.py) as a table: cases per class, refused, 5xx, writes.

Why a bench as well as the test: the README's reliability table reports how many cases each class of bad
input generated and what happened to them; the test asserts the outcome, this prints the figures (and the
slowest single request, to show that none held the database past STATEMENT_TIMEOUT_MS).

    .venv/bin/python bench/fuzz_inputs.py [--no-write]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import machine, setup_django, table, write_result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-write", action="store_true", help="print only; do not write bench/results/inputs.md")
    args = ap.parse_args()
    setup_django()

    from django.conf import settings
    from django.test import Client, override_settings
    from drf_spectacular.generators import SchemaGenerator

    from accounts.models import User
    from tests.hardening.fuzz_world import build_world
    from tests.hardening.input_sweep import CLASSES, SIZE_LIMIT, run_sweep

    tmp = Path(tempfile.mkdtemp(prefix="inputs-world-"))
    limits = {k: "1000000/m" for k in settings.RATE_LIMITS}
    with override_settings(RATE_LIMITS=limits):
        world = build_world(tmp)
        spec = SchemaGenerator().get_schema(request=None, public=True)
        fill = {k: v[0] for k, v in world.ids.items() if k != "source"}
        pages = Client()
        pages.force_login(User.objects.get(pk=world.user_id))
        t0 = time.perf_counter()
        with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=SIZE_LIMIT):
            report = run_sweep(secret=world.secret, user_id=world.user_id, spec=spec, fill=fill, page_client=pages)
        elapsed = time.perf_counter() - t0
    fails = {k: sum(1 for f in report.failures if f" {k}:" in f or f.startswith(k)) for k in CLASSES}
    rows = [[k, report.sent[k], report.refused[k], fails[k]] for k in CLASSES]
    rows.append(["**total**", sum(report.sent.values()), sum(report.refused.values()), len(report.failures)])
    text = "\n".join([
        "# Input classes",
        "",
        "`.venv/bin/python bench/fuzz_inputs.py`: every operation of `/api/schema/` and every page form, sent "
        "deep nesting, NUL and lone surrogates in every string, key and header, glob/regex metacharacters, "
        "Unicode digits and huge integers, bodies over the size limit, wrong content types, unknown fields, "
        "bad path ids, NUL in every field of the page forms that write (form bodies) and NUL and lone "
        "surrogates in every string argument of every MCP tool (tests/hardening/input_sweep.py). A failure is a 5xx, a non-JSON API error, a refused "
        "request that wrote a row or charged, or an invalid-by-construction input that was accepted.",
        "",
        table(["class", "cases", "refused (4xx)", "failures"], rows),
        "",
        f"Slowest single request: {report.slowest_ms:.0f} ms ({report.slowest}); statement timeout "
        f"{settings.STATEMENT_TIMEOUT_MS} ms. Whole sweep: {elapsed:.0f} s.",
        "",
        *(["Failures:", "", *[f"- `{f[:300]}`" for f in report.failures[:30]], ""] if report.failures else []),
        machine(),
        "",
    ])
    if args.no_write:
        print(text)
    else:
        write_result("inputs", text)


if __name__ == "__main__":
    main()
