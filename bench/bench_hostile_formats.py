"""What the DOCX and EPUB readers cost on the worst packages of at most 1 MB this script builds, and on large honest
ones: each case runs in a child process (so its peak memory is its own) through
search.ingest.formats.documents.read_document, the reader every entry point calls.

Before these readers a DOCX or an EPUB was not read at all (a walk skipped it by its name, an upload left it out
without a word), so the "before" column is that outcome; the bounds these cases hit are the upload archive's checks
(UPLOAD_MAX_*: ratio, declared sizes, counted inflation) and the web reader's element cap (WEB_READER_MAX_ELEMENTS;
BOOK_PAGES_OF_ELEMENTS of it for a whole book).

    .venv/bin/python bench/bench_hostile_formats.py [--timeout 120]
"""
from __future__ import annotations

import argparse
import io
import json
import os
import random
import resource
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
SENTENCE = "The ferryman asked for three silver coins before he would take anyone across the ford at dawn. "
_WORDS = SENTENCE.lower().replace(".", "").split() + ["river", "salt", "grain", "harbour", "tide", "rope", "lamp"]
_RANDOM = random.Random(7)


def words(n: int) -> str:
    """Varied text (real documents deflate about 3-5x, not 1000x as one repeated sentence does)."""
    return " ".join(_RANDOM.choice(_WORDS) + str(_RANDOM.randrange(1000)) for _ in range(n))


def _docx(document: str, *, extra: dict[str, bytes] | None = None) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", "<Types/>")
        zf.writestr("word/document.xml", document)
        for name, body in (extra or {}).items():
            zf.writestr(name, body)
    return out.getvalue()


def _body(paragraphs: str) -> str:
    return f'<w:document xmlns:w="{W}"><w:body>{paragraphs}</w:body></w:document>'


def _epub(chapters: list[str]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml", '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                    '<rootfiles><rootfile full-path="content.opf"/></rootfiles></container>')
        items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                        for i in range(len(chapters)))
        spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
        zf.writestr("content.opf", f'<package xmlns="http://www.idpf.org/2007/opf"><manifest>{items}</manifest>'
                    f"<spine>{spine}</spine></package>", zipfile.ZIP_DEFLATED)
        for i, body in enumerate(chapters):
            zf.writestr(f"c{i}.xhtml", f"<html><body>{body}</body></html>", zipfile.ZIP_DEFLATED)
    return out.getvalue()


def _liar() -> bytes:
    data = bytearray(_docx(_body("<w:p><w:r><w:t>word</w:t></w:r></w:p>" * 20_000)))
    name, lie = b"word/document.xml", (1000).to_bytes(4, "little")
    local, central = data.find(name) - 30, data.rfind(name) - 46
    data[local + 22:local + 26] = lie
    data[central + 24:central + 28] = lie
    return bytes(data)


def cases() -> dict[str, Callable[[], bytes]]:
    """Each case's builder (a child builds only its own, so its peak memory is the reader's)."""
    def para(n: int) -> str:
        return f"<w:p><w:r><w:t>{words(n)}</w:t></w:r></w:p>"

    laughs = ('<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
              + "".join(f'<!ENTITY {chr(98 + i)} "{("&" + chr(97 + i) + ";") * 10}">' for i in range(9))
              + f']><w:document xmlns:w="{W}"><w:body><w:p><w:r><w:t>&j;</w:t></w:r></w:p></w:body></w:document>')
    return {
        "DOCX deflate bomb (150 MB of markup)": lambda: _docx(_body("<w:p/>" * 25_000_000)),
        "DOCX part larger than it declares": _liar,
        "DOCX past the paragraph cap": lambda: _docx(_body("".join(para(3) for _ in range(60_000)))),
        "DOCX honest, 19,000 paragraphs": lambda: _docx(_body("".join(para(6) for _ in range(19_000)))),
        "DOCX entity expansion (billion laughs)": lambda: _docx(laughs),
        "EPUB 3,000 small chapters": lambda: _epub([f"<h1>Part {i}</h1><p>{words(30)}</p>" for i in range(3_000)]),
        "EPUB 1,000 small chapters (the most read)": lambda: _epub([f"<h1>Part {i}</h1><p>{words(30)}</p>"
                                                                     for i in range(1_000)]),
        "EPUB one chapter at the element cap": lambda: _epub(["<h1>Lists</h1>" + "".join(
            f"<p>{words(2)}</p>" for _ in range(19_900))]),
        "EPUB past the book's element budget": lambda: _epub(["".join(f"<p>{words(1)}</p>" for _ in range(19_000))]
                                                             * 11),
        "EPUB honest, 40 chapters": lambda: _epub([f"<h1>Chapter {i}</h1>" + "".join(f"<p>{words(40)}</p>"
                                                                                  for _ in range(60))
                                                   for i in range(40)]),
    }


def child(case: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from search.ingest.formats.documents import read_document

    data = cases()[case]()
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    draft, why = read_document(kind="web", data=data, name="case.bin")
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcome = f"read: {len(draft.chunks)} chunks" if draft else f"refused: {why[:90]}"
    print(json.dumps({"bytes": len(data), "seconds": seconds, "peak_mb": (peak_kb - base_kb) / 1024,
                      "outcome": outcome}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--child")
    parser.add_argument("--timeout", type=int, default=120)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    rows = []
    for case in cases():
        try:
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case], cwd=ROOT,
                                  capture_output=True, text=True, timeout=args.timeout, check=True)
            got = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append([case, f"{got['bytes']:,}", "not read (no reader)", f"{got['seconds']:.2f} s",
                         f"{got['peak_mb']:.0f} MB", got["outcome"]])
        except subprocess.TimeoutExpired:
            rows.append([case, "", "not read (no reader)", f"> {args.timeout} s (killed)", "", ""])
    text = (f"# Hostile documents: DOCX and EPUB (`bench/bench_hostile_formats.py`)\n\n{machine()}\n\n"
            + table(["case", "input bytes", "before", "after: time", "after: peak memory", "after: outcome"], rows))
    write_result("hostile_formats", text)


if __name__ == "__main__":
    main()
