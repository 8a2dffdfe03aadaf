"""What the worst PDFs of at most 1 MB cost the PDF reader (docs/security.md, "Documents"), in one run.

Each case (tests/hardening/hostile_pdfs.py) is read by search.ingest.formats.pdf.read_pdf in a fresh process of
its own, with the reader's default bounds (PDF_MAX_SECONDS, PDF_MAX_MEMORY_MB, ...); what is reported is the
wall time, the peak resident memory of the reader's child process (where PDFium runs) and of the process that
called it, and the outcome. There is no "before" run: before this reader a PDF was not read at all (its bytes
went to the text readers, or were skipped as binary), so the before column says so.

    .venv/bin/python bench/bench_hostile_pdfs.py [--cap-s 200]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

BEFORE = "not read: no PDF reader (bytes went to the text readers or were skipped as binary)"


def reader_peak_mb(data: bytes) -> float:
    """The peak resident memory of the reader's child process alone (os.wait4 on it), run from this still
    small process with the default bounds: ru_maxrss of a child forked from a process holding Django and the
    models would count the parent's pages it shared before exec."""
    from config import settings as cfg

    lim = {"max_pages": cfg.PDF_MAX_PAGES, "max_page_chars": cfg.PDF_MAX_PAGE_CHARS, "max_chars": cfg.PDF_MAX_CHARS,
           "max_outline": cfg.PDF_MAX_OUTLINE, "max_seconds": cfg.PDF_MAX_SECONDS,
           "max_memory_mb": cfg.PDF_MAX_MEMORY_MB}
    proc = subprocess.Popen([sys.executable, "-m", "search.ingest.formats.pdf_child", json.dumps(lim)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except BrokenPipeError:
        pass
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0  # reaped here
    return usage.ru_maxrss / 1024


def child(case: str) -> None:
    from tests.hardening import hostile_pdfs as hp

    build, _ = hp.CASES[case]
    data = build()
    peak = reader_peak_mb(data)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from search.ingest.formats.pdf import read_pdf
    from search.ingest.formats.text_layer import Refused

    self_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        layer = read_pdf(data=data, name="hostile.pdf")
        outcome = (f"read: {layer.pages} page(s), {len(layer.markdown):,} characters, "
                   f"{layer.pages_without_text} without text")
    except Refused as exc:
        outcome = "refused: " + exc.reason.removeprefix("hostile.pdf: ")
    elapsed = time.perf_counter() - started
    print(json.dumps({"bytes": len(data), "s": elapsed, "outcome": outcome,
                      "child_mb": peak,
                      "self_mb": max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - self_before) / 1024}))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap-s", type=float, default=200)
    ap.add_argument("--child")
    args = ap.parse_args()
    if args.child:
        child(args.child)
        return 0
    from tests.hardening import hostile_pdfs as hp

    rows = []
    for case in hp.CASES:
        try:
            out = subprocess.run([sys.executable, __file__, "--child", case], capture_output=True, text=True,
                                 timeout=args.cap_s, cwd=ROOT, check=False)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append([case, f"{got['bytes'] / 1024:,.0f} KB", BEFORE, f"{got['s']:.2f} s",
                         f"{got['child_mb']:.0f} MB", f"{got['self_mb']:.0f} MB", got["outcome"]])
        except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            rows.append([case, "", BEFORE, f"> {args.cap_s:g} s" if isinstance(exc, subprocess.TimeoutExpired)
                         else "error", "", "", type(exc).__name__])
        print(rows[-1], file=sys.stderr, flush=True)
    text = "\n\n".join([
        "# Hostile PDFs\n\nThe worst PDFs of at most 1 MB (tests/hardening/hostile_pdfs.py) through the PDF reader "
        "with its default bounds, each in a fresh process (bench/bench_hostile_pdfs.py). Memory: the peak resident "
        "size of the reader's child process (PDFium) and the growth of the calling process.",
        table(["case", "size", "before", "after: time", "after: child peak", "after: caller growth", "outcome"],
              rows),
        machine(),
    ])
    write_result("hostile_pdfs", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
