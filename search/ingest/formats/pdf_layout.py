"""A PDF page's text pieces put back in the order a person reads them, as Markdown (pure: no PDF library here).

Why geometry and not the file's own order: a PDF draws text in whatever order its producer chose (a two-column
page may draw both columns line by line, a sidebar last, the running header first), so the order is rebuilt
from where the text stands on the page:

- runs of text on one baseline with no wide gap are pieces (`Piece`); the reader that drives a PDF library
  (search.ingest.formats.pdf_child) makes them;
- lines that repeat at the same height on many pages (running headers and footers) and bare page numbers at
  the top or bottom are dropped;
- a page is cut into columns where a vertical gutter runs between pieces that stand side by side; a piece that
  crosses the gutter (a full-width title, a wide table) cuts the page into bands read top-down, each band column
  by column (recursively: a sidebar inside a band is a column of the band);
- a band whose columns hold short cells on shared baselines is a table, read row by row;
- lines become paragraphs (one Markdown line each), words hyphenated at a line end are joined, ligatures and
  odd spaces normalised; a line starts a new paragraph after more space than the page's line pitch, or when it
  opens with a bold label after a sentence's end; headings come from the outline where there is one, else from
  font size and weight;
- italic and bold words keep their emphasis as Markdown (`*...*`, `**...**`): a rulebook prints its structure
  in it (a spell's "*3rd-level evocation*", a stat block's "**Armor Class**", an item's "*Wondrous item, rare*"),
  and the rules chunker reads the same Markdown from a PDF as from a Markdown book.

Every step is linear or n log n in the pieces of a page, so a page of 100,000 tiny text objects costs a sort.
"""
from __future__ import annotations

import re
import statistics
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field

MAX_DEPTH = 12  # column/band recursion on one page; deeper layouts are read top-down
BOLD, ITALIC = 1, 2  # a word's style bits (Piece.styles)
# Emphasis travels inside a line's text as four Unicode noncharacters (never text of their own: any in a PDF's text
# are dropped), so joining lines, matching headings and the paragraph tests see words, and the Markdown is written
# last, when the runs are known whole.
B_OPEN, B_CLOSE, I_OPEN, I_CLOSE = "\ufdd0", "\ufdd1", "\ufdd2", "\ufdd3"
_NO_MARKS = str.maketrans("", "", B_OPEN + B_CLOSE + I_OPEN + I_CLOSE)
_CLOSE_TO_OPEN = str.maketrans(B_CLOSE + I_CLOSE, B_OPEN + I_OPEN)


def plain(text: str) -> str:
    """A line's text without its emphasis marks."""
    return text.translate(_NO_MARKS)


@dataclass
class Piece:
    """A run of text on one baseline: its box in top-down page coordinates (points), font size, boldness."""

    text: str
    x0: float
    x1: float
    top: float
    bottom: float
    size: float
    bold: bool = False
    mono: bool = False  # a monospaced font: code, kept line by line
    styles: tuple[int, ...] = ()  # each word's BOLD/ITALIC bits (words: text split on spaces); () when all plain

    @property
    def mid(self) -> float:
        return (self.top + self.bottom) / 2

    @property
    def height(self) -> float:
        return max(1.0, self.bottom - self.top)


@dataclass
class Page:
    number: int  # 1-based
    width: float
    height: float
    pieces: list[Piece] = field(default_factory=list)
    has_text: bool = False


@dataclass
class OutlineEntry:
    title: str
    level: int  # 0 = top
    page: int  # 1-based


@dataclass
class Line:
    text: str
    x0: float
    x1: float
    top: float
    bottom: float
    size: float
    bold: bool
    region: int  # which leaf column it was read from
    left: float  # that column's left and right edge
    right: float
    cells: list[str] | None = None  # a table row
    mono: bool = False


@dataclass
class Block:
    kind: str  # "p", "h", "row"
    text: str
    page: int
    level: int = 0
    cells: list[str] | None = None
    size: float = 0.0
    bold: bool = False


# Markdown's six heading levels: a rulebook's structure runs chapter > section > ... six deep (the SRD's does), and a
# lower cap folds sibling subsections into one another, so their chunks lose the path a question names.
MAX_LEVEL = 6

# --- text normalisation ----------------------------------------------------------------------------------------

_SAFE_TAGS = ("<compat>", "<noBreak>", "<wide>", "<narrow>", "<font>")
_ZERO_WIDTH = {"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\x00"}
_norm_cache: dict[str, str] = {}


def _norm_char(c: str) -> str:
    """NFKC for ligatures, full/half-width forms, no-break and odd spaces and styled letters; not for
    superscripts, fractions or circled numbers, whose compatibility form changes what the text says."""
    hit = _norm_cache.get(c)
    if hit is not None:
        return hit
    out = c
    if c in _ZERO_WIDTH:
        out = ""
    elif c in "\t\r\n" or unicodedata.category(c) == "Zs":
        out = " "
    elif ord(c) < 32 and c != "\x02":
        out = ""
    else:
        dec = unicodedata.decomposition(c)
        if dec.startswith(_SAFE_TAGS) and not ("\u00b2" <= c <= "\u00b3" or c in "\u00b9\u00bc\u00bd\u00be"):
            out = unicodedata.normalize("NFKC", c)
    _norm_cache[c] = out
    return out


def normalise(text: str) -> str:
    if text.isascii() and text.isprintable():
        return text
    return "".join(_norm_char(c) for c in text)


_SPACES = re.compile(r"\s+")


def tidy(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


# --- running headers, footers and page numbers ------------------------------------------------------------------

_PAGE_NUMBER = re.compile(r"^\W*(?:page\s*)?(?:\d{1,5}|[ivxlcdm]{1,7})(?:\s*(?:/|of)\s*\d{1,5})?\W*$", re.I)
_DIGITS = re.compile(r"\d+")
MARGIN_BAND = 0.12  # the top and bottom 12 % of a page is where running heads and folios stand


def _margin_key(p: Piece, page: Page) -> tuple[str, int] | None:
    if p.bottom > page.height * MARGIN_BAND and p.top < page.height * (1 - MARGIN_BAND):
        return None
    text = tidy(p.text).lower()
    # digits aside ("Chapter 3 - Combat 45" repeats), unless digits are all it has: "1.1.4" on many pages
    # are many sections, not a running head
    return (_DIGITS.sub("#", text) if any(c.isalpha() for c in text) else text, round(p.mid / 4))


def drop_running_lines(pages: list[Page], *, titles: frozenset[str] = frozenset()) -> None:
    """Remove running heads and feet: a piece in the top or bottom band whose text (digits aside) repeats at the
    same height on many pages, or repeats there at least twice where many pages put a line at that height
    (a head that names each chapter) or names a chapter of the outline there; and bare page numbers in those
    bands."""
    seen: Counter[tuple[str, int]] = Counter()
    slot_pages: Counter[int] = Counter()
    slot_texts: dict[int, set[str]] = defaultdict(set)
    for page in pages:
        keys = {k for p in page.pieces if (k := _margin_key(p, page)) is not None}
        seen.update(keys)
        for text, slot in keys:
            slot_texts[slot].add(text)
        slot_pages.update({slot for _, slot in keys})
    text_pages = sum(1 for page in pages if page.pieces)
    need = max(2, min(4, (text_pages + 1) // 2)) if text_pages < 8 else max(3, int(text_pages * 0.2))
    head_slots = {slot for slot, n in slot_pages.items()
                  if text_pages >= 8 and n >= 0.3 * text_pages and len(slot_texts[slot]) <= 0.5 * n}
    for page in pages:
        keep = []
        for p in page.pieces:
            k = _margin_key(p, page)
            if k is not None and (seen[k] >= need or _PAGE_NUMBER.match(tidy(p.text)) or k[1] in head_slots and (
                    seen[k] >= 2 or any(t in _key(p.text) for t in titles))):
                continue
            keep.append(p)
        page.pieces = keep


# --- reading order ----------------------------------------------------------------------------------------------

@dataclass
class _Table:
    rows: list[list[str]]
    x0: float
    x1: float
    top: float
    bottom: float


def _gaps(items: list[Piece], *, lo: float, hi: float, min_gap: float) -> list[tuple[float, float]]:
    """X intervals at least `min_gap` wide that at most a few pieces cross (a title over two columns, a wide
    caption), inside the region; a sweep over the pieces' edges."""
    allowed = min(3, len(items) // 20)
    events = sorted([(p.x0, 1) for p in items] + [(p.x1, -1) for p in items])
    out = []
    depth = 0
    start = None
    for x, step in events:
        depth += step
        if depth <= allowed and start is None:
            start = x
        elif depth > allowed and start is not None:
            if x - start >= min_gap:
                out.append((start, x))
            start = None
    return [g for g in out if lo < g[0] and g[1] < hi]


def _side_by_side(left: list[Piece], right: list[Piece]) -> bool:
    """Both sides hold text at the same heights (columns), not one above the other (a centred title)."""
    if len(left) < 2 or len(right) < 1:
        return False
    lt, lb = min(p.top for p in left), max(p.bottom for p in left)
    rt, rb = min(p.top for p in right), max(p.bottom for p in right)
    overlap = min(lb, rb) - max(lt, rt)
    return overlap > 0.5 * min(lb - lt, rb - rt)


def _table_strip(left: list[Piece], right: list[Piece]) -> tuple[float, float] | None:
    """The top and bottom of a table's rows when the gap's right side is a few short cells on the left side's
    baselines, over less than half the left side's height (a six-column table inside a text column: its last
    columns stand apart from the text above and below it, which is no column of their own); else None."""
    if len(right) < 2 or statistics.median(len(p.text) for p in right) > 12:
        return None
    top, bottom = min(p.top for p in right), max(p.bottom for p in right)
    if bottom - top >= 0.5 * (max(p.bottom for p in left) - min(p.top for p in left)):
        return None
    mids = [p.mid for p in left if top <= p.mid <= bottom]
    if sum(1 for p in right if any(abs(p.mid - m) < 0.3 * p.height for m in mids)) < 0.8 * len(right):
        return None
    return top - 0.5, bottom + 0.5


def _rows(items: list[Piece]) -> list[list[Piece]]:
    """Pieces grouped by baseline, top-down, each row left to right."""
    rows: list[list[Piece]] = []
    for p in sorted(items, key=lambda q: (q.mid, q.x0)):
        if rows and abs(p.mid - rows[-1][0].mid) < 0.45 * min(p.height, rows[-1][0].height):
            rows[-1].append(p)
        else:
            rows.append([p])
    for row in rows:
        row.sort(key=lambda q: q.x0)
    return rows


def _prose(column: list[Piece], *, width: float) -> bool:
    """A column of running text (a page column beside a table, not a table's column): wide, long lines."""
    if len(column) < 3:
        return False
    span = max(p.x1 for p in column) - min(p.x0 for p in column)
    return span >= 0.3 * width and statistics.median(len(p.text) for p in column) > 30


def _as_table(items: list[Piece], cuts: list[float], *, prose: bool = False) -> _Table | None:
    """The band read as a table when its columns hold short cells on shared baselines; None when it reads as
    columns of prose (`prose`: a column of it reads as running text)."""
    ncol = len(cuts) + 1
    rows = _rows(items)
    if len(rows) < 2:
        return None

    def col(p: Piece) -> int:
        return sum(1 for c in cuts if (p.x0 + p.x1) / 2 > c)

    grid: list[list[str]] = []
    aligned = 0
    lengths = []
    for row in rows:
        cells = [""] * ncol
        for p in row:
            i = col(p)
            cells[i] = (cells[i] + " " + p.text).strip()
            lengths.append(len(p.text))
        filled = sum(1 for c in cells if c)
        aligned += filled >= 2
        if grid and not cells[0] and filled < ncol:  # a wrapped cell: the row goes on
            grid[-1] = [(a + " " + b).strip() for a, b in zip(grid[-1], cells, strict=True)]
        else:
            grid.append(cells)
    limit = 40 if ncol >= 3 else 25
    # a table whose header row is bold and whose first column is short keys (d8 | Personality Trait, 1 | ...)
    # may hold long, wrapped text in its other columns
    keyed = len(grid) >= 3 and all(p.bold for p in rows[0]) and len(rows[0]) == ncol \
        and all(len(r[0]) <= 12 for r in grid)
    if aligned < 2 or aligned < 0.5 * len(rows) or (
            (prose or statistics.median(lengths) > limit) and not keyed):
        return None
    if ncol == 2 and len(grid) < 3:
        return None
    return _Table(rows=grid, x0=min(p.x0 for p in items), x1=max(p.x1 for p in items),
                  top=min(p.top for p in items), bottom=max(p.bottom for p in items))


def _side_gaps(items: list[Piece], *, body: float) -> list[tuple[float, float, list[Piece], list[Piece]]]:
    """Vertical gaps with text standing side by side across them: (gap start, end, pieces left, pieces right)."""
    lo, hi = min(p.x0 for p in items), max(p.x1 for p in items)
    width = max(1.0, hi - lo)
    narrow = [p for p in items if p.x1 - p.x0 < 0.55 * width]
    out = []
    for a, b in _gaps(narrow, lo=lo, hi=hi, min_gap=max(4.0, 0.6 * body)):
        left = [p for p in narrow if p.x1 <= a + 0.5]
        right = [p for p in narrow if p.x0 >= b - 0.5]
        if _side_by_side(left, right):
            out.append((a, b, left, right))
    return out


def page_gutters(pages: list[Page], *, body: float) -> list[float]:
    """Where the book's column gutters stand: a gap between text standing side by side at the same place on at
    least a third of the pages with text. Why: a book set on a baseline grid puts both columns' lines on the same
    baselines, and two columns of short lines (a stat block beside another) look like a two-column table; a cut
    at the book's own gutter is a column break, never a table's column."""
    seen: Counter[int] = Counter()
    text_pages = 0
    for page in pages:
        if len(page.pieces) < 3:
            continue
        text_pages += 1
        seen.update({round((a + b) / 2 / 6) for a, b, _, _ in _side_gaps(page.pieces, body=body)})
    if text_pages < 3:
        return []
    return [slot * 6.0 for slot, n in seen.items() if n >= max(3, text_pages / 3)]


class _Reader:
    def __init__(self, *, body_size: float, gutters: list[float] | None = None) -> None:
        self.body = body_size
        self.gutters = gutters or []
        self.lines: list[Line] = []
        self.regions = 0

    def read(self, items: list[Piece], depth: int = 0) -> None:
        if not items:
            return
        lo, hi = min(p.x0 for p in items), max(p.x1 for p in items)
        width = max(1.0, hi - lo)
        if len(items) > 2 and depth < MAX_DEPTH:
            cuts = []
            for a, b, left, right in _side_gaps(items, body=self.body):
                strip = _table_strip(left, right)
                if strip is not None:
                    self._strips(items, strip, depth)
                    return
                cuts.append((a + b) / 2)
            if cuts:
                crossing = [p for p in items if any(p.x0 < c - 1 and p.x1 > c + 1 for c in cuts)]
                if crossing:
                    self._bands(items, crossing, depth)
                    return
                columns: list[list[Piece]] = [[] for _ in range(len(cuts) + 1)]
                for p in items:
                    columns[sum(1 for c in cuts if (p.x0 + p.x1) / 2 > c)].append(p)
                at_gutter = len(cuts) == 1 and any(abs(cuts[0] - g) <= 6.0 for g in self.gutters)
                table = None if at_gutter else _as_table(
                    items, cuts, prose=any(_prose(c, width=width) for c in columns))
                if table is not None:
                    self._table(table)
                    return
                if sum(1 for c in columns if c) > 1:
                    for column in columns:
                        self.read(column, depth + 1)
                    return
        self._leaf(items)

    def _strips(self, items: list[Piece], strip: tuple[float, float], depth: int) -> None:
        """The region above a table's rows, the rows, the region below, each read on its own."""
        top, bottom = strip
        above = [p for p in items if p.mid < top]
        inside = [p for p in items if top <= p.mid <= bottom]
        below = [p for p in items if p.mid > bottom]
        for part in (above, inside, below):
            self.read(part, depth + 1)

    def _bands(self, items: list[Piece], crossing: list[Piece], depth: int) -> None:
        marked = {id(p) for p in crossing}
        band: list[Piece] = []
        for p in sorted(items, key=lambda q: (q.top, q.x0)):
            if id(p) in marked:
                if band:
                    self.read(band, depth + 1)
                    band = []
                self._leaf([p])
            else:
                band.append(p)
        if band:
            self.read(band, depth + 1)

    def _table(self, table: _Table) -> None:
        self.regions += 1
        for cells in table.rows:
            self.lines.append(Line(text=" ".join(c for c in cells if c), x0=table.x0, x1=table.x1, top=table.top,
                                   bottom=table.bottom, size=self.body, bold=False, region=self.regions,
                                   left=table.x0, right=table.x1, cells=cells))

    def _leaf(self, items: list[Piece]) -> None:
        self.regions += 1
        left, right = min(p.x0 for p in items), max(p.x1 for p in items)
        for row in _rows(items):
            text = ""
            last_x1 = None
            style = 0
            for p in row:
                sep = ""
                if last_x1 is not None and not text.endswith(" ") and not p.text.startswith(" "):
                    sep = " " if p.x0 - last_x1 > 0.1 * p.size or text[-1:].isalnum() and p.text[:1].isalnum() \
                        else ""
                words = p.text.translate(_NO_MARKS).split(" ")
                styles = p.styles if len(p.styles) == len(words) else (0,) * len(words)
                for i, (word, st) in enumerate(zip(words, styles, strict=True)):
                    if i:
                        sep = " "
                    if st != style:
                        text += _closing(style) + sep + _opening(st)
                        style = st
                    else:
                        text += sep
                    text += word
                last_x1 = p.x1
            text += _closing(style)
            sizes = Counter()
            for p in row:
                sizes[round(p.size * 2) / 2] += len(p.text)
            size = max(sizes.items(), key=lambda kv: (kv[1], kv[0]))[0]
            bold = sum(len(p.text) for p in row if p.bold) > 0.6 * sum(len(p.text) for p in row)
            self.lines.append(Line(text=tidy(text), x0=row[0].x0, x1=max(p.x1 for p in row),
                                   top=min(p.top for p in row), bottom=max(p.bottom for p in row), size=size,
                                   bold=bold, region=self.regions, left=left, right=right,
                                   mono=all(p.mono for p in row)))


def _opening(style: int) -> str:
    return (B_OPEN if style & BOLD else "") + (I_OPEN if style & ITALIC else "")


def _closing(style: int) -> str:
    return (I_CLOSE if style & ITALIC else "") + (B_CLOSE if style & BOLD else "")


# --- lines to paragraphs ----------------------------------------------------------------------------------------

_LIST_MARK = re.compile(r"^(?:[\u2022\u25cf\u25aa\u25e6\u2023\u2043\-\u2013*\u00b7]\s|\(?\d{1,3}[.)]\s|\(?[a-z][.)]\s)")
_HYPHENS = ("-", "\u00ad", "\x02", "\u2010", "\ufffe")  # PDFium marks a line-end hyphen \x02 or U+FFFE
_LEADERS = re.compile(r"(?:\. ?){3,}\s*\S{1,6}$")  # a contents line: dot leaders, then a page
_END = (".", "!", "?", ":", ";")


def join_lines(a: str, b: str) -> str:
    """Two lines of one paragraph: a word hyphenated at the end of `a` is joined, else a space between."""
    if not a:
        return b
    if not b:
        return a
    tail = len(a) - len(a.rstrip(B_CLOSE + I_CLOSE))
    head = len(b) - len(b.lstrip(B_OPEN + I_OPEN))
    if tail and head and a[-tail:][::-1].translate(_CLOSE_TO_OPEN) == b[:head]:  # one emphasis run goes on
        a, b = a[:-tail], b[head:]
    if a.endswith(_HYPHENS) and len(a) > 1 and a[-2].isalpha():
        if b[0].islower():
            return a[:-1] + b
        return a[:-1] + "-" + b
    return a + " " + b


def _clean_hyphen(text: str) -> str:
    """A soft hyphen left inside a line is not printed; one kept at the end stays a hyphen."""
    text = text.replace("\x02", "-").replace("\ufffe", "-")
    return text.replace("\u00ad", "")


class Document:
    """Pages of pieces, an optional outline, the body size: `markdown()` gives the text and its line pages."""

    def __init__(self, *, pages: list[Page], outline: list[OutlineEntry]) -> None:
        self.pages = pages
        self.outline = [e for e in outline if 1 <= e.page <= len(pages) and tidy(e.title)]
        sizes: Counter[float] = Counter()
        for page in pages:
            for p in page.pieces:
                sizes[round(p.size * 2) / 2] += len(p.text)
        self.body = max(sizes.items(), key=lambda kv: (kv[1], -kv[0]))[0] if sizes else 10.0
        self.size_chars = sizes
        self.pitch: dict[float, float] = {}  # line pitch per font size, set when the pages are read

    def blocks(self) -> list[Block]:
        top = min((e.level for e in self.outline), default=0)
        if sum(1 for e in self.outline if e.level == top) == 1:
            top += 1  # one root (the book's title): the chapters are one level down
        titles = frozenset(k for e in self.outline if e.level <= top and len(k := _key(e.title)) >= 8)  # chapters
        drop_running_lines(self.pages, titles=titles)
        read: list[tuple[int, list[Line]]] = []
        gutters = page_gutters(self.pages, body=self.body)
        for page in self.pages:
            reader = _Reader(body_size=self.body, gutters=gutters)
            reader.read(page.pieces)
            read.append((page.number, reader.lines))
        self.pitch = _line_pitch(lines for _, lines in read)
        out: list[Block] = []
        for number, lines in read:
            out.extend(self._paragraphs(lines, page=number))
        return out

    def _paragraphs(self, lines: list[Line], *, page: int) -> list[Block]:
        blocks: list[Block] = []
        prev: Line | None = None
        in_list = False
        for ln in lines:
            if not ln.text and ln.cells is None:
                continue
            if ln.cells is not None:
                blocks.append(Block(kind="row", text=ln.text, page=page, cells=ln.cells))
                prev = ln
                continue
            if prev is not None and prev.cells is None and blocks and blocks[-1].kind == "p" \
                    and self._continues(prev, ln, in_list=in_list):
                blocks[-1].text = join_lines(blocks[-1].text, ln.text)
            else:
                blocks.append(Block(kind="p", text=ln.text, page=page, size=ln.size, bold=ln.bold))
                in_list = bool(_LIST_MARK.match(plain(ln.text)))
            prev = ln
        return blocks

    def _continues(self, a: Line, b: Line, *, in_list: bool) -> bool:
        if abs(a.size - b.size) > 0.6 or a.bold != b.bold:
            return False
        a_text, b_text = plain(a.text), plain(b.text)
        if _LIST_MARK.match(b_text) or a.mono or b.mono or _LEADERS.search(a_text):
            return False
        if a.region != b.region:
            return not a_text.endswith(_END) and b_text[:1].islower()
        gap = b.top - a.bottom
        if gap > 0.8 * max(a.size, b.size) or gap < -0.5 * a.size:
            return False
        pitch = self.pitch.get(a.size)
        if pitch and b.top - a.top > pitch + max(2.0, 0.2 * a.size):
            return False  # more space than between the lines of a paragraph: paragraphs set apart
        width = max(1.0, a.right - a.left)
        if not in_list and b.x0 - a.left > 0.8 * b.size and b.x0 - a.x0 > 0.8 * b.size \
                and b.x0 - a.left < 0.3 * width:
            return False  # a first-line indent starts a paragraph
        short = a.x1 < a.right - 0.15 * width
        if b.text.startswith(B_OPEN) and not b.bold and (a_text.endswith(_END) or short):
            return False  # a bold run-in label ("Armor Class 17", "Heavy Armor. ...") opens a paragraph
        return not (a_text.endswith(_END) and short)

    # --- headings ---

    def _heading_levels(self, blocks: list[Block]) -> dict[tuple[float, bool], int]:
        body_chars = self.size_chars.get(self.body, 1)
        candidates: Counter[float] = Counter()
        bold_body = False
        for b in blocks:
            if b.kind != "p" or not _heading_text(plain(b.text)):
                continue
            if b.size >= self.body * 1.15:
                candidates[b.size] += 1
            elif b.bold and abs(b.size - self.body) <= 1.0:
                bold_body = True
        sizes = sorted((s for s in candidates if self.size_chars.get(s, 0) < 0.3 * body_chars), reverse=True)
        levels: dict[tuple[float, bool], int] = {}
        for i, s in enumerate(sizes[:MAX_LEVEL]):
            levels[(s, True)] = levels[(s, False)] = i + 1
        for s in sizes[MAX_LEVEL:]:
            levels[(s, True)] = levels[(s, False)] = MAX_LEVEL
        if bold_body:
            levels[(-1.0, True)] = min(MAX_LEVEL, len(sizes[:MAX_LEVEL]) + 1)
        return levels

    def _font_heading(self, b: Block, levels: dict[tuple[float, bool], int]) -> int:
        text = plain(b.text)
        if b.kind != "p" or not _heading_text(text):
            return 0
        if b.size >= self.body * 1.15:
            return levels.get((b.size, b.bold), 0)
        if b.bold and abs(b.size - self.body) <= 1.0 and len(text) <= 80 and not text.endswith((".", ",")):
            return levels.get((-1.0, True), 0)
        return 0

    def _apply_outline(self, blocks: list[Block]) -> list[Block]:
        """Each outline entry becomes a heading: the printed line that names it on its page (or the next: many
        producers aim a bookmark a little above its heading), else a heading inserted where its page starts."""
        top = min(e.level for e in self.outline)
        roots = sum(1 for e in self.outline if e.level == top)
        shift = top + (1 if roots == 1 and len(self.outline) > 1 else 0)
        first_of_page: dict[int, int] = {}
        for i, b in enumerate(blocks):
            first_of_page.setdefault(b.page, i)
        heads: dict[int, list[Block]] = defaultdict(list)
        taken: set[int] = set()
        keys: dict[int, str] = {}  # each block's key, made once: thousands of entries look at the same blocks
        cursor = 0
        for e in self.outline:
            level = min(MAX_LEVEL, max(1, e.level - shift + 1))
            want = _key(e.title)
            start = next((first_of_page[p] for p in range(e.page, len(self.pages) + 1) if p in first_of_page),
                         len(blocks))
            if blocks[cursor:cursor + 1] and blocks[cursor].page <= e.page:
                start = max(start, cursor)
            found = None
            printed = ""
            for j in range(start, min(len(blocks), start + 80)):
                b = blocks[j]
                if b.page > e.page + 1:
                    break
                k = keys.get(j)
                if k is None:
                    k = keys[j] = _key(b.text)
                if j in taken or b.kind != "p" or not k:
                    continue
                if k == want or (len(k) <= len(want) + 8 and k.startswith(want)) or (
                        len(k) >= 4 and want.startswith(k)):
                    found, printed = j, b.text
                    taken.add(j)
                    while k != want and j + 1 < len(blocks) and j + 1 not in taken and blocks[j + 1].kind == "p":
                        k += _key(blocks[j + 1].text)  # a heading wrapped over lines: its next lines are its own
                        if not want.startswith(k):
                            break
                        j += 1
                        printed += " " + blocks[j].text
                        taken.add(j)
                    break
                if k.startswith(want) and want:
                    head, rest = _split_heading(b.text, want)
                    if head and (b.text[:1] in (B_OPEN, I_OPEN) or not plain(head).endswith((",", ";"))):
                        # a run-in heading (set in bold or italic, or ending where its sentence does, not in a
                        # list's comma: "Spellcasting, Bardic Inspiration" in a table is no heading): its words
                        # start the paragraph
                        found, printed = j, head
                        b.text = rest
                        keys.pop(j, None)
                        break
            if found is None:
                heads[start].append(Block(kind="h", text=tidy(normalise(e.title)), page=e.page, level=level))
                cursor = start
            else:
                heads[found].append(Block(kind="h", text=tidy(printed), page=blocks[found].page, level=level))
                cursor = found + (1 if found in taken else 0)
        out: list[Block] = []
        for j in range(len(blocks) + 1):
            out.extend(heads.get(j, []))
            if j < len(blocks) and j not in taken:
                out.append(blocks[j])
        return out

    def markdown(self) -> tuple[list[str], list[int]]:
        blocks = self.blocks()
        _join_across_pages(blocks)
        if len(self.outline) >= 2:
            blocks = self._apply_outline(blocks)
        else:
            levels = self._heading_levels(blocks)
            merged: list[Block] = []
            for b in blocks:
                level = self._font_heading(b, levels)
                if level:
                    if merged and merged[-1].kind == "h" and merged[-1].level == level \
                            and merged[-1].page == b.page and len(merged[-1].text) + len(b.text) < 150 \
                            and b.size == merged[-1].size and b.size > self.body * 1.15:
                        merged[-1].text += " " + b.text  # a heading wrapped over two lines
                        continue
                    merged.append(Block(kind="h", text=b.text, page=b.page, level=level, size=b.size))
                else:
                    merged.append(b)
            blocks = merged
        return _render(blocks)


def _line_pitch(pages: object) -> dict[float, float]:
    """The usual distance from one line's top to the next's in a paragraph, per font size: the most common one
    between neighbouring lines of a column (only sizes with enough such pairs, and a clear most common one)."""
    seen: dict[float, Counter[float]] = defaultdict(Counter)
    for lines in pages:
        for a, b in zip(lines, lines[1:], strict=False):
            if a.region == b.region and a.cells is None and b.cells is None and a.size == b.size \
                    and 0 < b.top - a.top < 3 * a.size:
                seen[a.size][round((b.top - a.top) * 2) / 2] += 1
    out: dict[float, float] = {}
    for size, pitches in seen.items():
        total = sum(pitches.values())
        pitch, n = pitches.most_common(1)[0]
        if total >= 20 and n >= 0.3 * total:
            out[size] = pitch
    return out


def _join_across_pages(blocks: list[Block]) -> None:
    """A word hyphenated at the foot of one page and finished at the head of the next is one word."""
    for a, b in zip(blocks, blocks[1:], strict=False):
        if a.kind == "p" and b.kind == "p" and a.page != b.page and a.text.endswith(_HYPHENS) \
                and len(a.text) > 1 and a.text[-2].isalpha() and b.text[:1].islower():
            word, _, rest = b.text.partition(" ")
            a.text = a.text[:-1] + word
            b.text = rest


def _split_heading(text: str, want: str) -> tuple[str, str]:
    """The first words of `text` that spell the heading `want`, and the rest; ("", text) if none do."""
    words = text.split(" ")
    for n in range(1, min(len(words), 24)):
        k = _key(" ".join(words[:n]))
        if k == want:
            return " ".join(words[:n]), " ".join(words[n:])
        if len(k) > len(want) + 12:
            break
    return "", text


def _heading_text(text: str) -> bool:
    return 0 < len(text) <= 150 and any(c.isalpha() for c in text) and not _LIST_MARK.match(text)


_NUMBERING = re.compile(r"^\s*(?:(?:chapter|part|section|appendix)\s+)?(?:[0-9]{1,3}|(?:[A-Z]|[IVXLC]{1,5})(?=[.:)]))"
                        r"(?:\.[0-9]{1,3})*[.:)]?\s+", re.I)


def _key(text: str) -> str:
    """A heading's words without its numbering: the outline says "Combat", the page "3.2 Combat" (or, set in
    bold, "**3.2 Combat**": the emphasis marks go first, so the numbering is found)."""
    text = normalise(plain(text))
    text = _NUMBERING.sub("", text, count=1) or text
    return "".join(c for c in text.lower() if c.isalnum())


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_EMPTY_RUN = re.compile(f"{B_OPEN}(\\s*){B_CLOSE}|{I_OPEN}(\\s*){I_CLOSE}")
_GOES_ON = (re.compile(f"{B_CLOSE}(\\s*){B_OPEN}"), re.compile(f"{I_CLOSE}(\\s*){I_OPEN}"))
_MARKS = re.compile(f"([{B_OPEN}{B_CLOSE}{I_OPEN}{I_CLOSE}])")
_DELIMITER = {B_OPEN: ("**", True), B_CLOSE: ("**", False), I_OPEN: ("*", True), I_CLOSE: ("*", False)}


def _emphasis(text: str) -> str:
    """The marks as Markdown: a run closed and reopened across a space is one run, an empty run none, and a
    mark left unpaired (a run-in heading taken off the line's start) is dropped or closed at the end."""
    if not _MARKS.search(text):
        return text
    text = _EMPTY_RUN.sub(lambda m: m.group(1) or m.group(2) or "", text)
    for pattern in _GOES_ON:
        text = pattern.sub(r"\1", text)
    out: list[str] = []
    state = {"**": False, "*": False}
    for part in _MARKS.split(text):
        if part in _DELIMITER:
            delim, opens = _DELIMITER[part]
            if state[delim] != opens:
                state[delim] = opens
                out.append(delim)
        else:
            out.append(part)
    out.append(("*" if state["*"] else "") + ("**" if state["**"] else ""))
    return "".join(out)


def _render(blocks: list[Block]) -> tuple[list[str], list[int]]:
    lines: list[str] = []
    pages: list[int] = []

    def emit(text: str, page: int) -> None:
        lines.append(text)
        pages.append(page)

    prev_kind = ""
    last_page = 0
    for b in blocks:
        text = _clean_hyphen(b.text)
        if b.kind != "row":
            text = tidy(plain(text) if b.kind == "h" else _emphasis(text))
            if not text:
                continue
        if lines and not (b.kind == "row" and prev_kind == "row"):
            emit("", last_page)
        if b.kind == "h":
            emit("#" * b.level + " " + text, b.page)
        elif b.kind == "row":
            cells = [_cell(tidy(_clean_hyphen(c))) for c in b.cells or []]
            emit("| " + " | ".join(cells) + " |", b.page)
            if prev_kind != "row":
                emit("|" + "|".join(" --- " for _ in cells) + "|", b.page)
        else:
            if text.startswith(("#", ">", "|")) or re.match(r"^[-=]{3,}$", text):
                text = "\\" + text
            emit(text, b.page)
        prev_kind = b.kind
        last_page = b.page
    return lines, pages
