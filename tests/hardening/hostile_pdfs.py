"""The worst PDFs of at most 1 MB we can build, for the hostile-PDF tests and bench/bench_hostile_pdfs.py.

Each is written object by object with a correct cross-reference table (unless broken on purpose), so PDFium
reaches the hostile part instead of stopping at a malformed header.
"""
from __future__ import annotations

import functools
import io
import zlib

from reportlab.lib import pdfencrypt
from reportlab.pdfgen import canvas

MB = 1024 * 1024


def build(objects: list[bytes], *, root: int = 1, xref: bool = True, trailer: bytes = b"") -> bytes:
    """A PDF of these objects (numbered from 1), a cross-reference table and a trailer naming the root."""
    out = bytearray(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for i, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    start = len(out)
    if xref:
        out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
        out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root %d 0 R %s>>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, root, trailer,
                                                                                   start)
    return bytes(out)


def _stream(data: bytes, *, raw_length: bool = True) -> bytes:
    return b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(data) + data + b"\nendstream"


FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _one_page(content: bytes, *, count: int = 1) -> bytes:
    return build([b"<< /Type /Catalog /Pages 2 0 R >>",
                  b"<< /Type /Pages /Kids [3 0 R] /Count %d >>" % count,
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                  b"/Resources << /Font << /F1 5 0 R >> >> >>",
                  _stream(zlib.compress(content, 9)), FONT])


def good(text: str = "A good page that is read.") -> bytes:
    return _one_page(b"BT /F1 12 Tf 72 700 Td (" + text.encode() + b") Tj ET")


def nested_arrays(depth: int = 400_000) -> bytes:
    """A page whose resources hold an array nested `depth` deep (the parser recurses per level)."""
    deep = b"[" * depth + b"]" * depth
    return build([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Deep " + deep + b" >>",
                  _stream(zlib.compress(b"BT /F1 12 Tf 72 700 Td (deep) Tj ET"))])


def nested_dicts(depth: int = 100_000) -> bytes:
    deep = b"<< /A " * depth + b"1" + b" >>" * depth
    return build([b"<< /Type /Catalog /Pages 2 0 R /Deep " + deep + b" >>",
                  b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>"])


def huge_page_count() -> bytes:
    """A page tree that declares a billion pages and holds one."""
    return _one_page(b"BT /F1 12 Tf 72 700 Td (one page of a billion) Tj ET", count=1_000_000_000)


def many_kids(n: int = 60_000) -> bytes:
    """A page tree of `n` kids all pointing at one page object (a tree that is a fan of aliases)."""
    kids = b" ".join(b"3 0 R" for _ in range(n))
    return build([b"<< /Type /Catalog /Pages 2 0 R >>",
                  b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % n,
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                  b"/Resources << /Font << /F1 5 0 R >> >> >>",
                  _stream(zlib.compress(b"BT /F1 12 Tf 72 700 Td (alias) Tj ET")), FONT])


def cyclic_page_tree() -> bytes:
    """Pages whose kids include itself and its parent."""
    return build([b"<< /Type /Catalog /Pages 2 0 R >>",
                  b"<< /Type /Pages /Kids [2 0 R 3 0 R] /Count 2 >>",
                  b"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 3 0 R] /Count 5 >>"])


def _deflate_chunks(chunk: bytes, total: int) -> bytes:
    comp = zlib.compressobj(9)
    parts = []
    done = 0
    while done < total:
        parts.append(comp.compress(chunk))
        done += len(chunk)
    parts.append(comp.flush())
    return b"".join(parts)


@functools.lru_cache(maxsize=4)
def flate_bomb(inflated: int = 1024 * MB) -> bytes:
    """A page content stream that inflates from about 1 MB to `inflated` bytes of whitespace."""
    body = _deflate_chunks(b" " * MB, inflated)
    return build([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                  b"/Resources << /Font << /F1 5 0 R >> >> >>", _stream(body), FONT])


def text_bomb(inflated: int = 256 * MB) -> bytes:
    """A content stream that inflates to millions of one-character text objects."""
    op = b"BT /F1 1 Tf 10 10 Td (a) Tj ET\n" * 32768
    body = _deflate_chunks(op, inflated)
    return build([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                  b"/Resources << /Font << /F1 5 0 R >> >> >>", _stream(body), FONT])


def broken_xref() -> bytes:
    """A good document whose cross-reference table points everywhere but at its objects, cut short."""
    data = bytearray(good("Repaired from a broken table."))
    at = data.index(b"xref\n")
    data[at:] = b"xref\n0 9\n" + b"0000099999 00000 n \n" * 9 + b"trailer\n<< /Size 9 /Root 7 0 R >>\nstartxref\n1"
    return bytes(data)


def garbage() -> bytes:
    """A header and then noise: nothing to repair."""
    return b"%PDF-1.7\n" + bytes((i * 7919) % 251 for i in range(200_000))


def encrypted() -> bytes:
    out = io.BytesIO()
    c = canvas.Canvas(out, encrypt=pdfencrypt.StandardEncryption("user-secret", "owner-secret", strength=128))
    c.drawString(72, 700, "A secret page.")
    c.showPage()
    c.save()
    return out.getvalue()


def tiny_text_objects(n: int = 100_000) -> bytes:
    """One page drawing `n` separate one-character text objects, each at its own place."""
    ops = b"".join(b"BT /F1 2 Tf %d %d Td (%s) Tj ET\n" % (10 + (i % 290) * 2, 10 + (i // 290) * 2, b"abcdefgh"[i % 8:i % 8 + 1])
                   for i in range(n))
    return _one_page(ops)


def cyclic_outline() -> bytes:
    """A good page and an outline whose items point at each other in a ring."""
    return build([b"<< /Type /Catalog /Pages 2 0 R /Outlines 6 0 R >>",
                  b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                  b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                  b"/Resources << /Font << /F1 5 0 R >> >> >>",
                  _stream(zlib.compress(b"BT /F1 12 Tf 72 700 Td (ring) Tj ET")), FONT,
                  b"<< /Type /Outlines /First 7 0 R /Last 8 0 R /Count 2 >>",
                  b"<< /Title (One) /Parent 6 0 R /Next 8 0 R /First 8 0 R /Dest [3 0 R /Fit] >>",
                  b"<< /Title (Two) /Parent 6 0 R /Next 7 0 R /First 7 0 R /Dest [3 0 R /Fit] >>"])


CASES = {  # name -> (builder, what a reader must do: "refuse" or "read")
    "nested arrays (400k deep)": (nested_arrays, "either"),
    "nested dictionaries (100k deep)": (nested_dicts, "either"),
    "declared page count 10^9": (huge_page_count, "either"),
    "page tree of 60k aliased kids": (many_kids, "either"),
    "cyclic page tree": (cyclic_page_tree, "either"),
    "Flate bomb (1 GiB of whitespace)": (flate_bomb, "either"),
    "text bomb (256 MiB of text objects)": (text_bomb, "refuse"),
    "broken xref": (broken_xref, "either"),
    "garbage after the header": (garbage, "refuse"),
    "encrypted (user password)": (encrypted, "refuse"),
    "page of 100k tiny text objects": (tiny_text_objects, "either"),
    "cyclic outline": (cyclic_outline, "read"),
}
