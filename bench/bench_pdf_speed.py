"""PDF speed: pages per second for the reader alone and for a first ingest end to end, and a re-ingest of an
unchanged PDF that reads nothing again.

Why: a rulebook or a manual arrives as one PDF of hundreds of pages; what a user waits for is the whole ingest
(read, chunk, embed, write, apply), and a sync of an unchanged book must cost only the hash of its bytes. Each
PDF is ingested the product's way (`start_ingest`, synchronous, the outbox applied) into a fresh dataset: the
real manual ("An Introduction to R", 113 pages, from Debian's r-doc-pdf; see bench/bench_pdf_manuals.py for the
apt-get commands) as a rules dataset and as a web dataset; with --srd-ingest / --web-srd also the SRD typeset by
bench/typeset_srd.py (the SRD is read alone in every run). Then the same source is ingested again:
the job's counters must show every file skipped (unchanged hash), no chunk written and nothing embedded, which
the script asserts.

The embedding cache is cold at the start of each first ingest of a document (a private VAR_DIR per run; the
rules and web datasets of the SRD chunk the text differently, so they share few embeddings).

    .venv/bin/python bench/bench_pdf_speed.py [--srd-pdf var/bench/srd-pdf/srd51_plain.pdf] [--manual PATH]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, setup_django, table, write_result

DEFAULT_MANUAL = "/tmp/pdfjudge/x/r-doc-pdf_4.2.2.20221110-2_all/usr/share/R/doc/manual/R-intro.pdf"


def read_alone(*, pdf: Path, repeats: int) -> tuple[int, float]:
    """(pages, best seconds) of the reader on the bytes, best of `repeats` (the machine is shared)."""
    from search.ingest.formats.pdf import read_pdf

    data = pdf.read_bytes()
    best, pages = float("inf"), 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        layer = read_pdf(data=data, name=pdf.name)
        best = min(best, time.perf_counter() - t0)
        pages = layer.pages
    return pages, best


def ingest_twice(*, slug: str, kind: str, pdf: Path) -> dict:
    """First ingest and a re-ingest of the unchanged file, with the job counters of each."""
    from projects.models import Project
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    folder = Path(tempfile.mkdtemp(prefix=f"{slug}-"))
    shutil.copy(pdf, folder / pdf.name)
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=f"{slug}-{kind}", defaults={"kind": kind})
    options = {"ruleset_id": slug, "book_id": slug} if kind == "rules" else {}
    out = {}
    for step in ("first", "again"):
        t0 = time.perf_counter()
        job = start_ingest(job=IngestJob(dataset=dataset, source=str(folder), kind=kind, options=options), sync=True)
        out[step] = {"seconds": time.perf_counter() - t0, "status": job.status, "files": job.files_total,
                     "skipped": job.files_skipped, "chunks": job.chunks_written,
                     "embedded": job.embeddings_computed, "error": job.error}
    again = out["again"]
    assert out["first"]["status"] == "done" and out["first"]["chunks"] > 0, out["first"]
    assert again["status"] == "done" and again["files"] >= 1 and again["skipped"] == again["files"], again
    assert again["chunks"] == 0 and again["embedded"] == 0, again
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srd-pdf", default=str(ROOT / "var" / "bench" / "srd-pdf" / "srd51_plain.pdf"))
    ap.add_argument("--manual", default=DEFAULT_MANUAL)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--srd-ingest", action="store_true",
                    help="also ingest the SRD PDF as a rules dataset (about 2,000-4,000 chunks to embed: long on a "
                         "loaded CPU; bench/bench_srd_pdf.py times it too)")
    ap.add_argument("--web-srd", action="store_true", help="also ingest the SRD PDF as a web dataset")
    args = ap.parse_args()
    manual = "An Introduction to R (R 4.2.2)"
    pdfs = {"SRD 5.1 (typeset, no outline)": Path(args.srd_pdf), manual: Path(args.manual)}
    for p in pdfs.values():
        if not p.exists():
            sys.exit(f"missing {p}: run bench/typeset_srd.py, and the apt-get commands of bench/bench_pdf_manuals.py")
    setup_django()
    t_all = time.perf_counter()
    read_rows, ingest_rows = [], []
    pages_of = {}
    for name, pdf in pdfs.items():
        pages, secs = read_alone(pdf=pdf, repeats=args.repeats)
        pages_of[name] = pages
        read_rows.append([name, pages, f"{pdf.stat().st_size / 1e6:.1f}", f"{secs:.1f}", f"{pages / secs:.1f}"])
    plan = [(manual, "rules", "r-intro-rules"), (manual, "web", "r-intro-web")]
    if args.srd_ingest:
        plan.append(("SRD 5.1 (typeset, no outline)", "rules", "srd-rules"))
    if args.web_srd:
        plan.append(("SRD 5.1 (typeset, no outline)", "web", "srd-web"))
    for name, kind, slug in plan:
        r = ingest_twice(slug=slug, kind=kind, pdf=pdfs[name])
        first, again = r["first"], r["again"]
        ingest_rows.append([name, kind, pages_of[name], first["chunks"], first["embedded"], f"{first['seconds']:.0f}",
                            f"{pages_of[name] / first['seconds']:.2f}",
                            f"{again['skipped']}/{again['files']} skipped, {again['chunks']} chunks, "
                            f"{again['embedded']} embedded", f"{again['seconds']:.1f}"])
        print(ingest_rows[-1], file=sys.stderr, flush=True)
    text = "\n\n".join([
        "# PDF speed: reading, first ingest, unchanged re-ingest",
        "## Reading alone (`read_pdf` on the bytes, best of "
        f"{args.repeats})",
        table(["PDF", "pages", "MB", "seconds", "pages/s"], read_rows),
        "## Ingest end to end (`start_ingest`, synchronous: read, chunk, embed on the CPU, write, apply)",
        table(["PDF", "dataset", "pages", "chunks", "embedded", "first ingest s", "pages/s",
               "re-ingest of the unchanged file (job counters)", "re-ingest s"], ingest_rows),
        "The re-ingest rows are asserted: every file skipped by its unchanged hash, no chunk written, nothing "
        "embedded.",
        f"Wall time {time.perf_counter() - t_all:.0f} s.", machine(),
        "Reproduce: `.venv/bin/python bench/bench_pdf_speed.py` (after bench/typeset_srd.py and the apt-get commands "
        "of bench/bench_pdf_manuals.py)."])
    write_result("pdf_speed", text)


if __name__ == "__main__":
    main()
