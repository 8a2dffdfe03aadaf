"""Typeset the demo's PDF rulebook: a short Emberfall booklet, so `make run`'s rules Q&A shows page citations.

Why a committed PDF and this script beside it: the demo must show a PDF read into the rules lawyer without a
typesetter at run time (reportlab is a bench tool, not a platform dependency), and the bytes must be
reproducible (reportlab's invariant mode: no time stamps, fixed document id; the same text gives the same file).
Why its own topic (travel, rest, foraging): the core book and the GM guide stay the answers to their own
questions, and a question about resting or travel is answered from the booklet with its page.

The layout is the SRD bench's (bench/typeset_srd.py: headings set by size and weight only), one column on A5
pages, each chapter on a new page, the book's title as a running header and the page number in the footer.
Why no outline: many printed rulebooks have none, and the demo then shows the reader finding the headings by
their type alone.

    .venv/bin/python bench/typeset_demo_pdf.py [--out search/rules/demo_rules/roads-and-rest/Roads and Rest.pdf]
"""
from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

from reportlab import rl_config

rl_config.invariant = 1  # no creation date, fixed ids: the same input gives the same bytes
from reportlab.lib import colors  # noqa: E402
from reportlab.lib.pagesizes import A5  # noqa: E402
from reportlab.lib.units import inch  # noqa: E402
from reportlab.platypus import BaseDocTemplate, Frame, PageBreak, PageTemplate  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from typeset_srd import file_flowables  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "search" / "rules" / "demo_rules" / "roads-and-rest" / "Roads and Rest.pdf"
TITLE = "Emberfall: Roads and Rest"

# One chapter per entry, each typeset from its own page. Written for this project (like the rest of Emberfall).
CHAPTERS = {
    "Travel": """
Between the hearth cities the roads are long, and the ash plains between them are longer. This chapter covers
how far a company walks in a day and what slows it down.

## Travel Pace

A company chooses a travel pace for each day on the road. At a brisk pace it covers 24 miles a day, at a steady
pace 18 miles, and at a careful pace 12 miles. Only a careful pace lets the company move quietly and map the
land as it goes.

A company moves at the pace of its slowest member. A laden pack animal counts as a member.

## Forced March

A company can walk past its usual eight hours on the road. For each hour beyond eight, every traveller makes a
Grit check against DC 10, plus 1 for each hour past the first. On a failure the traveller gains one level of
weariness.

## Ash Roads

Old roads buried under drifting ash count as rough ground: a company on them covers half its usual distance for
the day. A guide who knows the road removes this penalty for the whole company.
""",
    "Resting": """
Travellers who push on without rest wear down. Emberfall has two kinds of rest, and a third that the road forces
on those who ignore the first two.

## Short Rest

A short rest is one hour of quiet: eating, binding wounds, sharpening blades. At the end of a short rest a
character may spend Vigor dice, rolling each and regaining that many Vigor points.

## Long Rest

A long rest is eight hours, at least six of them asleep. At its end a character regains all lost Vigor points
and half of its spent Vigor dice, and loses one level of weariness. A character can take only one long rest in
a day.

## Weariness

Weariness comes in six levels. Each level gives a cumulative penalty of 1 to every check and attack roll. A
character at the sixth level of weariness collapses and cannot walk until it finishes a long rest.
""",
    "Foraging and Weather": """
Food runs short on long roads, and the weather of the ash plains is its own enemy.

## Foraging

While travelling at a steady or careful pace, one member of the company can forage. The forager makes a Wits
check against DC 12 on the plains or DC 15 in the burnt forests. On a success the company finds food and water
for the day for a number of people equal to 1d6 plus the forager's Wits bonus.

## Ashfall

An ashfall darkens the sky for 1d4 days. During an ashfall the company sees only 60 feet, foraging checks are
made with disadvantage, and every traveller who walks more than four hours in it gains one level of weariness.

## Shelter

A tent, a cave or a waystation keeps a company out of the ashfall. A long rest taken without shelter during an
ashfall does not remove weariness.
""",
}


class Booklet(BaseDocTemplate):
    """One column on A5 pages, a running header (the book's title) and the page number in the footer."""

    def __init__(self, path: str) -> None:
        super().__init__(path, pagesize=A5, leftMargin=0.6 * inch, rightMargin=0.6 * inch, topMargin=0.8 * inch,
                         bottomMargin=0.75 * inch, title=TITLE, author="Emberfall demo",
                         subject="The demo's PDF rulebook", creator="typeset_demo_pdf.py", invariant=1)
        frame = Frame(self.leftMargin, self.bottomMargin, self.width, self.height, id="body", leftPadding=0,
                      rightPadding=0, topPadding=0, bottomPadding=0)
        self.addPageTemplates([PageTemplate(id="page", frames=[frame], onPageEnd=self._decorate)])

    def _decorate(self, canv, doc) -> None:
        canv.saveState()
        canv.setFont("Helvetica", 7)
        top = doc.pagesize[1] - 0.45 * inch
        canv.drawString(doc.leftMargin, top, TITLE)
        canv.setStrokeColor(colors.grey)
        canv.line(doc.leftMargin, top - 4, doc.pagesize[0] - doc.rightMargin, top - 4)
        canv.drawCentredString(doc.pagesize[0] / 2, 0.4 * inch, str(canv.getPageNumber()))
        canv.restoreState()


def build(*, out: Path) -> str:
    """Typeset the booklet to `out`; -> the file's sha256."""
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = Booklet(str(out))
    story: list = []
    for n, (chapter, text) in enumerate(CHAPTERS.items()):
        if n:
            story.append(PageBreak())
        story += file_flowables(text=f"# {chapter}\n{text}", stem=chapter, chapter="", outline=False,
                                width=doc.width)
    doc.build(story)
    return hashlib.sha256(out.read_bytes()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    digest = build(out=Path(args.out))
    print(f"written {args.out} ({Path(args.out).stat().st_size} bytes, sha256 {digest[:16]})", file=sys.stderr)


if __name__ == "__main__":
    main()
