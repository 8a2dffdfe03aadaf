"""Typeset the SRD 5.1 Markdown (CC-BY-4.0) into a rulebook-style PDF, with and without bookmarks.

Why: the PDF reader is judged on a book whose text is known line by line. The same SRD is ingested as Markdown
(the reference) and as this PDF, so any gap in retrieval quality is the reader's, and every page a citation names
can be checked against where the text was really printed (the side file).

The layout is a printed rulebook's: two columns, a running header (book title and chapter) and a footer with the
page number on every page, headings set by size and weight only (no markup survives into the PDF), sidebars
(Markdown block quotes) in shaded boxes, tables as real ruled tables. Each chapter (the SRD's first folder level)
opens on a new page with a chapter title. Inside a file, heading levels are renumbered from the file's shallowest
heading, so the printed hierarchy is chapter > file's top heading > ..., as the Markdown ingest sees it
(its section paths are [folder, heading chain]); text before a file's first heading gets the file name as its
heading, as the Markdown ingest names it.

Two variants: `srd51_outline.pdf` has a PDF outline (bookmarks) for every heading; `srd51_plain.pdf` has none,
so a reader must find the headings by font size. The output is deterministic (reportlab's invariant mode: no
time stamps, fixed document id): the same Markdown gives the same bytes.

The side file `srd51_pages.json` lists every section (its Markdown section path) with the pages it is printed on.

    .venv/bin/python bench/typeset_srd.py [--srd /work/shared/data/srd51] [--out var/bench/srd-pdf]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

from reportlab import rl_config

rl_config.invariant = 1  # no creation date, fixed ids: the same input gives the same bytes
from reportlab.lib import colors  # noqa: E402
from reportlab.lib.pagesizes import LETTER  # noqa: E402
from reportlab.lib.styles import ParagraphStyle  # noqa: E402
from reportlab.lib.units import inch  # noqa: E402
from reportlab.platypus import (  # noqa: E402
    BaseDocTemplate,
    CondPageBreak,
    Frame,
    NextPageTemplate,
    PageBreak,
    PageTemplate,
    Paragraph,
    Spacer,
    Table,
    TableStyle,
)

BOOK = "System Reference Document 5.1"
SKIP_FILES = {"readme.md", "source.md", "changelog.md"}  # as search.ingest.rules.read_rulebook
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
_RULE_ROW = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(.*)$")

BODY = ParagraphStyle("body", fontName="Times-Roman", fontSize=9, leading=11, spaceAfter=4)
# one size per level, all above the body's 9 pt: the outline-free variant is read by size alone
HEADING_STYLES = {
    1: ParagraphStyle("h1", fontName="Helvetica-Bold", fontSize=22, leading=26, spaceBefore=0, spaceAfter=12),
    2: ParagraphStyle("h2", fontName="Helvetica-Bold", fontSize=16, leading=19, spaceBefore=10, spaceAfter=6),
    3: ParagraphStyle("h3", fontName="Helvetica-Bold", fontSize=13.5, leading=16, spaceBefore=8, spaceAfter=4),
    4: ParagraphStyle("h4", fontName="Helvetica-Bold", fontSize=12, leading=14, spaceBefore=7, spaceAfter=3),
    5: ParagraphStyle("h5", fontName="Helvetica-Bold", fontSize=11, leading=13, spaceBefore=6, spaceAfter=3),
    6: ParagraphStyle("h6", fontName="Helvetica-Bold", fontSize=10.25, leading=12, spaceBefore=5, spaceAfter=2),
    7: ParagraphStyle("h7", fontName="Helvetica-BoldOblique", fontSize=9.75, leading=12, spaceBefore=4,
                      spaceAfter=2),
}
for _s in HEADING_STYLES.values():
    _s.keepWithNext = 1
CELL = ParagraphStyle("cell", fontName="Times-Roman", fontSize=7.5, leading=9)
CELL_HEAD = ParagraphStyle("cellhead", parent=CELL, fontName="Times-Bold")
SIDEBAR = ParagraphStyle("sidebar", parent=BODY, fontName="Helvetica", fontSize=8.25, leading=10)
LIST = ParagraphStyle("list", parent=BODY, leftIndent=10, bulletIndent=2, spaceAfter=2)


def inline(text: str) -> str:
    """Markdown inline markup -> reportlab's paragraph markup (bold, italic), links and wiki links to their text."""
    text = re.sub(r"!\[[^\]]*\]\([^)]*\)", "", text)
    text = re.sub(r"\[\[([^\]|]+)\|([^\]]+)\]\]", r"\2", text)
    text = re.sub(r"\[\[([^\]]+)\]\]", r"\1", text)
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"<[^>]+>", "", text)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = re.sub(r"\*\*\*(.+?)\*\*\*", r"<b><i>\1</i></b>", text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"__(.+?)__", r"<b>\1</b>", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<i>\1</i>", text)
    text = re.sub(r"(?<![\w_])_(?!\s)(.+?)(?<!\s)_(?![\w_])", r"<i>\1</i>", text)
    return text.replace("*", "").replace("`", "")


def clean_title(title: str) -> str:
    """A heading's printed title, as search.ingest.rules._clean_title names the section."""
    title = re.sub(r"[*_`]", "", title).strip()
    title = re.sub(r"\[\[([^\]|]+)\|([^\]]+)\]\]", r"\2", title)
    title = re.sub(r"\[\[([^\]]+)\]\]", r"\1", title)
    title = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", title)
    return re.sub(r"\.md$", "", title)


class Heading(Paragraph):
    """A heading that knows its section path and outline level (its place in the book's tree)."""

    def __init__(self, text: str, *, level: int, path: list[str], outline: bool) -> None:
        super().__init__(inline(text), HEADING_STYLES[level])
        self.section_path, self.with_outline, self.title = path, outline, text

    def draw(self) -> None:
        if self.with_outline:
            key = "s" + hashlib.sha1("/".join(self.section_path).encode()).hexdigest()[:16]
            self.canv.bookmarkPage(key)
            self.canv.addOutlineEntry(self.title, key, level=len(self.section_path) - 1, closed=True)
        super().draw()


class Book(BaseDocTemplate):
    """Two columns, running header and footer; records the pages every section lands on."""

    def __init__(self, path: str, *, outline: bool) -> None:
        super().__init__(path, pagesize=LETTER, leftMargin=0.7 * inch, rightMargin=0.7 * inch,
                         topMargin=0.85 * inch, bottomMargin=0.8 * inch, title=BOOK, author="Wizards of the Coast",
                         subject="SRD 5.1 (CC-BY-4.0), typeset for the PDF reader bench", creator="typeset_srd.py",
                         invariant=1)
        gap = 0.25 * inch
        colw = (self.width - gap) / 2
        frames = [Frame(self.leftMargin, self.bottomMargin, colw, self.height, id="left", leftPadding=0,
                        rightPadding=0, topPadding=0, bottomPadding=0),
                  Frame(self.leftMargin + colw + gap, self.bottomMargin, colw, self.height, id="right",
                        leftPadding=0, rightPadding=0, topPadding=0, bottomPadding=0)]
        self.column_width = colw
        self.addPageTemplates([PageTemplate(id="book", frames=frames, onPageEnd=self._decorate)])
        self.chapter = ""
        self.current: tuple[str, ...] = ()
        self.pages: dict[tuple[str, ...], list[int]] = {}
        self.order: list[tuple[str, ...]] = []
        self.outline = outline

    def _decorate(self, canv, doc) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 7.5)
        top = doc.pagesize[1] - 0.5 * inch
        canv.drawString(doc.leftMargin, top, BOOK)
        canv.drawRightString(doc.pagesize[0] - doc.rightMargin, top, self.chapter)
        canv.setStrokeColor(colors.grey)
        canv.line(doc.leftMargin, top - 4, doc.pagesize[0] - doc.rightMargin, top - 4)
        canv.drawCentredString(doc.pagesize[0] / 2, 0.45 * inch, str(canv.getPageNumber()))
        canv.restoreState()

    def afterFlowable(self, flowable) -> None:  # noqa: N802 - reportlab's hook name
        page = self.canv.getPageNumber()
        if isinstance(flowable, Heading):
            self.current = tuple(flowable.section_path)
            if self.current not in self.pages:
                self.order.append(self.current)
            if len(self.current) == 1 and flowable.style.name == "h1":
                self.chapter = self.current[0]
        if self.current and isinstance(flowable, (Paragraph, Table)):  # page breaks and spacers print nothing
            got = self.pages.setdefault(self.current, [page, page])
            got[0], got[1] = min(got[0], page), max(got[1], page)


def _table(rows: list[list[str]], *, width: float) -> Table:
    ncols = max(len(r) for r in rows)
    rows = [r + [""] * (ncols - len(r)) for r in rows]
    weights = [max(3, max(len(r[c]) for r in rows)) for c in range(ncols)]
    weights = [min(w, 60) for w in weights]
    total = sum(weights)
    widths = [width * w / total for w in weights]
    data = [[Paragraph(inline(c), CELL_HEAD if i == 0 else CELL) for c in r] for i, r in enumerate(rows)]
    t = Table(data, colWidths=widths, repeatRows=1, hAlign="LEFT")
    t.setStyle(TableStyle([("LINEBELOW", (0, 0), (-1, 0), 0.6, colors.black),
                           ("ROWBACKGROUNDS", (0, 1), (-1, -1), [colors.white, colors.Color(0.93, 0.93, 0.88)]),
                           ("VALIGN", (0, 0), (-1, -1), "TOP"), ("LEFTPADDING", (0, 0), (-1, -1), 2),
                           ("RIGHTPADDING", (0, 0), (-1, -1), 2), ("TOPPADDING", (0, 0), (-1, -1), 1),
                           ("BOTTOMPADDING", (0, 0), (-1, -1), 1)]))
    return t


def _sidebar(paras: list[str], *, width: float) -> Table:
    cells = [[Paragraph(inline(p), SIDEBAR)] for p in paras]
    t = Table(cells, colWidths=[width], hAlign="LEFT")
    t.setStyle(TableStyle([("BACKGROUND", (0, 0), (-1, -1), colors.Color(0.9, 0.92, 0.86)),
                           ("LEFTPADDING", (0, 0), (-1, -1), 5), ("RIGHTPADDING", (0, 0), (-1, -1), 5)]))
    return t


def file_flowables(*, text: str, stem: str, chapter: str, outline: bool, width: float) -> list:
    """One Markdown file -> flowables. Levels are renumbered from the file's shallowest heading (see the docstring)."""
    lines = text.splitlines()
    levels = [len(m.group(1)) for m in map(_HEADING.match, lines) if m]
    shallowest = min(levels) if levels else 1
    base = [chapter] if chapter else []
    top = 2 if chapter else 1  # a file outside every chapter (Legal.md) is a chapter of its own
    out: list = []
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    quote: list[str] = []
    table: list[list[str]] = []

    def heading(level: int, title: str) -> None:
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        out.append(Heading(title, level=min(7, level), path=base + [t for _, t in stack], outline=outline))

    def flush() -> None:
        if para:
            out.append(Paragraph(inline(" ".join(para)), BODY))
            para.clear()
        if quote:
            paras = " ".join(q if q else "\n" for q in quote).split("\n")
            out.append(_sidebar([p.strip() for p in paras if p.strip()], width=width))
            out.append(Spacer(1, 4))
            quote.clear()
        if table:
            out.append(_table(table, width=width))
            out.append(Spacer(1, 5))
            table.clear()

    seen_text = False
    for line in lines:
        m = _HEADING.match(line)
        if m:
            flush()
            seen_text = True
            heading(top + len(m.group(1)) - shallowest, clean_title(m.group(2)))
            continue
        stripped = line.strip()
        if not stripped or stripped in ("---", "***", "___"):
            flush()
            continue
        if not seen_text:  # text before any heading: the Markdown ingest names this section after the file
            seen_text = True
            heading(top, clean_title(stem))
        if stripped.startswith(">"):
            if para or table:
                flush()
            quote.append(stripped.lstrip(">").strip())
            continue
        if _TABLE_LINE.match(line):
            if para or quote:
                flush()
            if not _RULE_ROW.match(line):
                table.append([c.strip() for c in stripped.strip("|").split("|")])
            continue
        lm = _LIST.match(line)
        if lm:
            flush()
            out.append(Paragraph(inline(lm.group(1)), LIST, bulletText="•"))
            continue
        if table or quote:
            flush()
        para.append(stripped)
    flush()
    return out


def build(*, srd: Path, out: Path, outline: bool) -> dict:
    """Typeset the whole SRD into one PDF; returns the side file's content."""
    files = sorted(p for p in srd.rglob("*.md") if p.name.lower() not in SKIP_FILES)
    doc = Book(str(out), outline=outline)
    story: list = [NextPageTemplate("book")]
    width = doc.column_width
    chapter = None
    for f in sorted(files, key=lambda p: (p.parent != srd, p.relative_to(srd).as_posix())):
        rel = f.relative_to(srd).as_posix()
        ch = rel.split("/")[0] if "/" in rel else ""
        if ch != chapter:
            if chapter is not None:
                story.append(PageBreak())
            chapter = ch
            if ch:
                story.append(Heading(ch, level=1, path=[ch], outline=outline))
        else:
            story.append(CondPageBreak(1.2 * inch))
        story += file_flowables(text=f.read_text(encoding="utf-8"), stem=f.stem, chapter=ch, outline=outline,
                                width=width)
    doc.build(story)
    sections = [{"path": list(p), "pages": doc.pages[p]} for p in doc.order]
    return {"pdf": out.name, "pages": doc.page, "outline": outline, "sections": sections,
            "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srd", default="/work/shared/data/srd51")
    ap.add_argument("--out", default="var/bench/srd-pdf")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    side = {}
    for name, outline in (("srd51_outline.pdf", True), ("srd51_plain.pdf", False)):
        t0 = time.perf_counter()
        side[name] = build(srd=Path(args.srd), out=out / name, outline=outline)
        print(f"{name}: {side[name]['pages']} pages, {len(side[name]['sections'])} sections, "
              f"{(out / name).stat().st_size / 1e6:.1f} MB, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    (out / "srd51_pages.json").write_text(json.dumps(side, indent=1))
    print(f"written {out}/srd51_pages.json", file=sys.stderr)


if __name__ == "__main__":
    main()
