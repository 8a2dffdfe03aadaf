"""Which PDF library the reader is built on: pypdfium2 (PDFium), pdfminer.six and pypdf on the same PDFs.

Why: the reader (search/ingest/formats/pdf.py) must read a 300-page rulebook in seconds on two cores, put a
two-column page in reading order and find headings. Each library reads the same files in this one run:

- speed: pages per second on the first `--pages` pages of each PDF (a subset written by PDFium, so the slow
  libraries finish), each library's plain text extraction; for pypdfium2 also the whole reader (layout, headings,
  tables, Markdown) as it runs in production, in its child process;
- reading order: a two-column page typeset by reportlab and drawn line by line across the columns (right line
  first); the order is right when every left-column sentence comes before every right-column one;
- headings: how many of the typeset SRD's headings (bench/typeset_srd.py's side file, the plain variant with no
  bookmarks) appear as Markdown headings; the libraries without layout give plain text, so none.

pdfminer.six and pypdf are measured only where installed (they are not dependencies of the platform).

    .venv/bin/python bench/bench_pdf_readers.py [--pages 40] [--srd var/bench/srd-pdf]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

DEBIAN = [Path("/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf"),
          Path("/usr/share/doc/libtasn1-doc/libtasn1.pdf")]


def subset(path: Path, pages: int) -> bytes:
    import pypdfium2 as pdfium

    src = pdfium.PdfDocument(str(path))
    out = pdfium.PdfDocument.new()
    out.import_pages(src, list(range(min(pages, len(src)))))
    buf = io.BytesIO()
    out.save(buf)
    return buf.getvalue()


def two_columns() -> bytes:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    buf = io.BytesIO()
    c = canvas.Canvas(buf, pagesize=A4)
    c.setFont("Helvetica-Bold", 18)
    c.drawString(72, 780, "A title across both columns")
    c.setFont("Helvetica", 10)
    for i in range(40):
        y = 740 - i * 13
        c.drawString(310, y, f"Right column sentence {i:02d} about the rogue.")
        c.drawString(60, y, f"Left column sentence {i:02d} about the wizard.")
    c.showPage()
    c.save()
    return buf.getvalue()


def text_pdfium(data: bytes) -> str:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(data)
    return "\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))


def text_pdfminer(data: bytes) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(io.BytesIO(data))


def text_pypdf(data: bytes) -> str:
    from pypdf import PdfReader

    return "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(data)).pages)


def text_reader(data: bytes) -> str:
    from search.ingest.formats.pdf import read_pdf

    return read_pdf(data=data, name="bench.pdf").markdown


READERS = {"pypdfium2 (text only)": text_pdfium, "pdfminer.six (layout)": text_pdfminer,
           "pypdf": text_pypdf, "the reader (pypdfium2 + layout)": text_reader}


def available(name: str) -> bool:
    mod = {"pdfminer.six (layout)": "pdfminer", "pypdf": "pypdf"}.get(name)
    if mod is None:
        return True
    try:
        __import__(mod)
    except ImportError:
        return False
    return True


def in_order(text: str) -> str:
    marks = [f"Left column sentence {i:02d}" for i in range(40)] + [f"Right column sentence {i:02d}" for i in range(40)]
    pos = [text.find(m) for m in marks]
    if min(pos) < 0:
        return f"{sum(p < 0 for p in pos)} of 80 lines missing"
    inversions = sum(1 for a, b in zip(pos, pos[1:], strict=False) if b < a)
    return "columns in order" if inversions == 0 else f"interleaved ({inversions} jumps back)"


def srd_headings(text: str, pages_json: Path) -> str:
    try:
        sections = json.loads(pages_json.read_text())
    except (OSError, ValueError):
        return "n/a"
    entry = sections.get("srd51_plain.pdf", {}) if isinstance(sections, dict) else {}
    items = entry.get("sections", [])
    wanted = set()
    for s in items:
        path = s.get("path") or s.get("section") or []
        if path:
            wanted.add(str(path[-1]).strip().lower())
    got = {ln.lstrip("#").strip().lower() for ln in text.split("\n") if ln.startswith("#")}
    if not wanted:
        return "n/a"
    return f"{len(wanted & got)} of {len(wanted)}"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=40)
    ap.add_argument("--srd", default=str(ROOT / "var" / "bench" / "srd-pdf"))
    args = ap.parse_args()
    import django

    django.setup()  # before any timing: the reader's figures are its own, not the apps' first import
    srd = Path(args.srd)
    files = [p for p in [srd / "srd51_plain.pdf", *DEBIAN] if p.exists()]
    rows = []
    for path in files:
        data = subset(path, args.pages)
        import pypdfium2 as pdfium

        n = len(pdfium.PdfDocument(data))
        for name, fn in READERS.items():
            if not available(name):
                rows.append([path.name, n, name, "not installed", "", ""])
                continue
            started = time.perf_counter()
            fn(data)
            dt = time.perf_counter() - started
            rows.append([path.name, n, name, round(dt, 2), round(n / dt, 1), ""])
    whole = []
    if (srd / "srd51_plain.pdf").exists():
        data = (srd / "srd51_plain.pdf").read_bytes()
        started = time.perf_counter()
        text = text_reader(data)
        dt = time.perf_counter() - started
        pages = len(pdfium.PdfDocument(data))
        whole.append(["srd51_plain.pdf (whole)", pages, round(dt, 1), round(pages / dt, 1),
                      srd_headings(text, srd / "srd51_pages.json")])
    order = []
    cols = two_columns()
    for name, fn in READERS.items():
        order.append([name, in_order(fn(cols)) if available(name) else "not installed"])
    text = "\n\n".join([
        "# PDF libraries compared\n\nEach library reads the same PDFs in one run (bench/bench_pdf_readers.py). "
        f"Speed: the first {args.pages} pages of each PDF.",
        table(["PDF", "pages", "library", "s", "pages/s", ""], rows),
        "The whole typeset SRD (two columns, running heads, tables, no bookmarks) through the reader, and how many "
        "of its section headings come out as Markdown headings:",
        table(["PDF", "pages", "s", "pages/s", "headings found"], whole) if whole else "(SRD PDF not built)",
        "Reading order on a two-column page drawn line by line across the columns:",
        table(["library", "order"], order),
        machine(),
    ])
    write_result("pdf_readers", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
