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
import resource
import sys
import time

from search.ingest.formats.pdf_layout import Document, OutlineEntry, Page, Piece

CHECK_EVERY = 4096  # characters read between two looks at the clock
SPLIT_GAP_EM = 1.0  # a gap wider than this many font sizes on one baseline ends a piece (a column, a cell)
MAX_OUTLINE_DEPTH = 8


class Stop(Exception):
    """A limit was reached: the document is refused with this reason."""


def _style(tp: object, j: int, name_buf: ctypes.Array, raw: object) -> tuple[bool, bool]:
    """(bold, monospaced) of the font of character j: its weight, else words in its name, and its flags."""
    flags = ctypes.c_int()
    n = raw.FPDFText_GetFontInfo(tp, j, name_buf, len(name_buf), ctypes.byref(flags))
    name = name_buf.raw[:max(0, min(n, len(name_buf)) - 1)].decode("latin-1").lower()
    bold = raw.FPDFText_GetFontWeight(tp, j) >= 600 or any(
        w in name for w in ("bold", "black", "heavy", "semibold", "demi"))
    mono = bool(flags.value & 1) or any(w in name for w in ("courier", "mono", "cmtt", "typewriter", "consol"))
    return bold, mono


def _page_pieces(*, raw: object, tp: object, height: float, count: int, deadline: float,
                 number: int) -> list[Piece]:
    buf = ctypes.create_string_buffer((count + 1) * 2)
    got = raw.FPDFText_GetText(tp, 0, count, ctypes.cast(buf, ctypes.POINTER(ctypes.c_ushort)))
    text = buf.raw[:max(0, got - 1) * 2].decode("utf-16-le", "replace")
    if len(text) != count:  # characters outside the BMP: read them one by one
        text = "".join(chr(raw.FPDFText_GetUnicode(tp, j) or 32) for j in range(count))
    rect = raw.FS_RECTF()
    rect_p = ctypes.byref(rect)
    name_buf = ctypes.create_string_buffer(128)
    pieces: list[Piece] = []
    cur: Piece | None = None
    chars: list[str] = []
    space = False

    def close() -> None:
        nonlocal cur
        if cur is not None and chars:
            cur.text = "".join(chars).strip()
            if cur.text:
                pieces.append(cur)
        cur = None
        chars.clear()

    for j, c in enumerate(text):
        if j % CHECK_EVERY == 0 and time.monotonic() > deadline:
            raise Stop(f"reading page {number} ran past the time limit")
        if c in "\r\n":
            close()
            continue
        if c.isspace():
            space = True
            continue
        if not raw.FPDFText_GetLooseCharBox(tp, j, rect_p):
            continue
        size = raw.FPDFText_GetFontSize(tp, j) or (rect.top - rect.bottom)
        x0, x1, top, bottom = rect.left, rect.right, height - rect.top, height - rect.bottom
        if cur is not None:
            mid = (top + bottom) / 2
            h = min(cur.height, max(1.0, bottom - top))
            gap = x0 - cur.x1
            if abs(mid - cur.mid) > 0.5 * h or gap > SPLIT_GAP_EM * max(size, cur.size) or x0 < cur.x0 - 1:
                close()
            else:
                if space or gap > 0.25 * size:
                    chars.append(" ")
                chars.append(c)
                cur.x1 = max(cur.x1, x1)
                cur.top, cur.bottom = min(cur.top, top), max(cur.bottom, bottom)
                space = False
                continue
        bold, mono = _style(tp, j, name_buf, raw)
        cur = Piece(text="", x0=x0, x1=x1, top=top, bottom=bottom, size=round(size, 1), bold=bold, mono=mono)
        chars.append(c)
        space = False
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
            outline.append(OutlineEntry(title=bm.get_title() or "", level=bm.level, page=index + 1))
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
        pieces = _page_pieces(raw=raw, tp=tp, height=height, count=n, deadline=deadline, number=i + 1) \
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
