"""The PDF reader's own process: PDF bytes on stdin, one JSON answer on stdout (search.ingest.formats.pdf).

Why a process of its own: PDFium is C, and a hostile PDF (a stream that inflates to gigabytes, a page of a
million objects, a cyclic page tree) can make one call allocate or loop where no Python check runs. Here the
process caps its own address space (RLIMIT_AS) and CPU time before it reads a byte, and the parent kills it at
its wall deadline, so the worst a document can do is fail alone. The answer is JSON, never pickle: the parent
trusts nothing this process says beyond its shape. This module imports no Django: it starts in milliseconds.

    python -m search.ingest.formats.pdf_child '{"max_pages": ..., ...}' < doc.pdf
"""
from __future__ import annotations

import ctypes
import json
import re
import resource
import sys
import time
from collections.abc import Iterator

from search.ingest.formats.pdf_layout import BOLD, ITALIC, Document, OutlineEntry, Page, Piece

SPLIT_GAP_EM = 1.0  # a gap wider than this many font sizes on one baseline ends a piece (a column, a cell)
MAX_OUTLINE_DEPTH = 8


class Stop(Exception):
    """A limit was reached: the document is refused with this reason."""


_FLAG_FIXED, _FLAG_ITALIC, _FLAG_FORCE_BOLD = 1, 64, 1 << 18  # the FontDescriptor's Flags


def _style(tp: object, j: int, name_buf: ctypes.Array, raw: object, fonts: dict) -> tuple[int, bool]:
    """(style bits, monospaced) of the font of character j: bold from its weight, its name's words or its
    ForceBold flag; italic from its name (Italic, Oblique) or its Italic flag. Why cached per font name and
    flags: a page has a handful of fonts and thousands of words, so the weight is asked once per font."""
    flags = ctypes.c_int()
    n = raw.FPDFText_GetFontInfo(tp, j, name_buf, len(name_buf), ctypes.byref(flags))
    key = (name_buf.raw[:max(0, min(n, len(name_buf)) - 1)], flags.value)
    hit = fonts.get(key)
    if hit is None:
        name = key[0].decode("latin-1").lower()
        bold = raw.FPDFText_GetFontWeight(tp, j) >= 600 or bool(flags.value & _FLAG_FORCE_BOLD) or any(
            w in name for w in ("bold", "black", "heavy", "semibold", "demi"))
        italic = bool(flags.value & _FLAG_ITALIC) or any(w in name for w in ("italic", "oblique", "slanted"))
        mono = bool(flags.value & _FLAG_FIXED) or any(
            w in name for w in ("courier", "mono", "cmtt", "typewriter", "consol"))
        hit = fonts[key] = ((BOLD if bold else 0) | (ITALIC if italic else 0), mono)
    return hit


_WORDS = re.compile(r"[^\s]+|[\r\n]+")
Word = tuple[str, int, int, float, float, float, float]


def _words(text: str, tp: object, raw: object, rect: ctypes.Structure, height: float) -> Iterator[Word]:
    """(text, first index, last index, x0, x1, top, bottom) of each word, a line break as "\\n"; a word PDFium
    joined across a line end (after a hyphen) is split where its characters change line."""
    rect_p = ctypes.byref(rect)
    loose_box = raw.FPDFText_GetLooseCharBox
    for m in _WORDS.finditer(text):
        a, b = m.start(), m.end() - 1
        word = m.group()
        if word[0] in "\r\n":
            yield word, a, b, 0.0, 0.0, 0.0, 0.0
            continue
        if not loose_box(tp, a, rect_p):
            continue
        l0, r0, t0, b0 = rect.left, rect.right, rect.top, rect.bottom
        if b == a or not loose_box(tp, b, rect_p):
            yield word, a, b, l0, r0, height - t0, height - b0
            continue
        if abs(rect.top + rect.bottom - t0 - b0) <= t0 - b0:  # the last character on the first's line
            yield word, a, b, l0, max(r0, rect.right), height - max(t0, rect.top), height - min(b0, rect.bottom)
            continue
        k, r1 = a + 1, r0
        while k < b and loose_box(tp, k, rect_p) and abs(rect.top + rect.bottom - t0 - b0) <= t0 - b0:
            r1 = max(r1, rect.right)
            k += 1
        yield text[a:k], a, k - 1, l0, r1, height - t0, height - b0
        yield "\n", k, k, 0.0, 0.0, 0.0, 0.0
        loose_box(tp, k, rect_p)
        l2, t2, b2 = rect.left, rect.top, rect.bottom
        loose_box(tp, b, rect_p)
        yield text[k:b + 1], k, b, l2, max(rect.right, l2), height - max(t2, rect.top), height - min(b2,
                                                                                                  rect.bottom)


def _page_pieces(*, raw: object, tp: object, height: float, count: int, deadline: float,
                 number: int) -> list[Piece]:
    """The page's words as pieces. Why by word: PDFium already puts a space (or a line break) where it sees a
    gap, so a word's first and last character boxes place it; two calls per word, not one per character, is
    what makes a 300-page book seconds. The font size is read where the glyph height changes, the style (bold,
    italic) at each word's first character: a piece carries its words' styles, so the page's Markdown can keep
    the emphasis a rulebook's structure is printed in. Locals, not attributes, in the loop."""
    buf = ctypes.create_string_buffer((count + 1) * 2)
    got = raw.FPDFText_GetText(tp, 0, count, ctypes.cast(buf, ctypes.POINTER(ctypes.c_ushort)))
    text = buf.raw[:max(0, got - 1) * 2].decode("utf-16-le", "replace")
    if len(text) != count:  # characters outside the BMP: read them one by one
        text = "".join(chr(raw.FPDFText_GetUnicode(tp, j) or 32) for j in range(count))
    rect = raw.FS_RECTF()
    font_size = raw.FPDFText_GetFontSize
    name_buf = ctypes.create_string_buffer(128)
    fonts: dict = {}
    monotonic = time.monotonic
    pieces: list[Piece] = []
    words: list[str] = []
    styles: list[int] = []
    open_ = False
    x0 = x1 = top = bottom = mid0 = h0 = size = 0.0
    mono0 = False

    def close() -> None:
        if words:
            bold = bool(styles[0] & BOLD) and bool(styles[-1] & BOLD)  # a run-in bold heading is not a bold line
            pieces.append(Piece(text=" ".join(words), x0=x0, x1=x1, top=top, bottom=bottom, size=round(size, 1),
                                bold=bold, mono=mono0, styles=tuple(styles) if any(styles) else ()))
        words.clear()
        styles.clear()

    for n, (word, a, _b, w_x0, w_x1, w_top, w_bottom) in enumerate(_words(text, tp, raw, rect, height)):
        if not n & 1023 and monotonic() > deadline:
            raise Stop(f"reading page {number} ran past the time limit")
        if word[0] in "\r\n":
            close()
            open_ = False
            continue
        w_h = w_bottom - w_top
        if open_:
            gap = w_x0 - x1
            if abs((w_top + w_bottom) / 2 - mid0) <= 0.5 * min(h0, w_h if w_h > 1.0 else 1.0) \
                    and gap <= SPLIT_GAP_EM * size and w_x0 >= x0 - 1 \
                    and (abs(w_h - h0) <= 0.12 * h0 or abs((font_size(tp, a) or w_h) - size) <= 0.15 * size):
                words.append(word)
                styles.append(_style(tp, a, name_buf, raw, fonts)[0])
                if w_x1 > x1:
                    x1 = w_x1
                if w_top < top:
                    top = w_top
                if w_bottom > bottom:
                    bottom = w_bottom
                continue
            close()
        open_ = True
        x0, x1, top, bottom = w_x0, w_x1, w_top, w_bottom
        mid0, h0 = (w_top + w_bottom) / 2, (w_h if w_h > 1.0 else 1.0)
        size = font_size(tp, a) or h0
        style, mono0 = _style(tp, a, name_buf, raw, fonts)
        words.append(word)
        styles.append(style)
    close()
    return pieces


def read(data: bytes, *, max_pages: int, max_page_chars: int, max_chars: int, max_outline: int,
         deadline: float) -> dict[str, object]:
    # Why here: pypdfium2 loads PDFium (a few MB of C) at import; the parent never loads it.
    import pypdfium2 as pdfium  # noqa: PLC0415
    import pypdfium2.raw as raw  # noqa: PLC0415

    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as exc:
        code = getattr(exc, "err_code", None)
        if code in (raw.FPDF_ERR_PASSWORD, raw.FPDF_ERR_SECURITY):
            raise Stop("it is encrypted (a password is needed to read it)") from None
        raise Stop("it is not a readable PDF (damaged beyond repair)") from None
    count = len(doc)
    if count > max_pages:
        raise Stop(f"it declares {count} pages, more than the {max_pages} a PDF may have here")
    outline: list[OutlineEntry] = []
    for bm in doc.get_toc(max_depth=MAX_OUTLINE_DEPTH):
        if len(outline) >= max_outline or time.monotonic() > deadline:
            break
        dest = bm.get_dest()
        index = dest.get_index() if dest is not None else None
        if index is not None:
            outline.append(OutlineEntry(title=(bm.get_title() or "")[:300], level=bm.level, page=index + 1))
    pages: list[Page] = []
    total = 0
    without_text = 0
    for i in range(count):
        if time.monotonic() > deadline:
            raise Stop(f"reading page {i + 1} of {count} ran past the time limit")
        try:
            page = doc[i]
        except pdfium.PdfiumError:
            pages.append(Page(number=i + 1, width=612, height=792))
            without_text += 1
            continue
        width, height = page.get_size()
        tp = page.get_textpage()
        n = raw.FPDFText_CountChars(tp)
        if n > max_page_chars:
            raise Stop(f"page {i + 1} holds {n} characters, more than the {max_page_chars} a page may hold here")
        total += max(0, n)
        if total > max_chars:
            raise Stop(f"its text passes {max_chars} characters, the most a PDF may hold here")
        pieces = _page_pieces(raw=raw, tp=tp.raw, height=height, count=n, deadline=deadline, number=i + 1) \
            if n > 0 else []
        tp.close()
        page.close()
        if not pieces:
            without_text += 1
        pages.append(Page(number=i + 1, width=width, height=height, pieces=pieces, has_text=bool(pieces)))
    title = (doc.get_metadata_value("Title") or "").strip()
    doc.close()
    lines, line_pages = Document(pages=pages, outline=outline).markdown()
    if time.monotonic() > deadline:
        raise Stop("laying out its pages ran past the time limit")
    return {"ok": True, "markdown": "\n".join(lines), "line_pages": line_pages, "pages": count,
            "pages_without_text": without_text, "title": title[:300],
            "meta": {"outline_entries": len(outline), "headings_from": "outline" if len(outline) >= 2 else "fonts"}}


def main() -> None:
    limits = json.loads(sys.argv[1])
    deadline = time.monotonic() + float(limits["max_seconds"])
    mem = int(limits["max_memory_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    cpu = int(limits["max_seconds"]) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    data = sys.stdin.buffer.read()
    try:
        answer = read(data, max_pages=int(limits["max_pages"]), max_page_chars=int(limits["max_page_chars"]),
                      max_chars=int(limits["max_chars"]), max_outline=int(limits["max_outline"]),
                      deadline=deadline)
    except Stop as exc:
        answer = {"ok": False, "reason": str(exc)}
    except MemoryError:
        answer = {"ok": False, "reason": f"reading it needed more than {limits['max_memory_mb']} MB"}
    except RecursionError:
        answer = {"ok": False, "reason": "its structure nests too deep to read"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
