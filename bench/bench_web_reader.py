"""The web reader on a real documentation site: Python's own docs (Sphinx), from Debian's `python3-doc` package.

For every page, the heading paths the reader builds are compared with the page's real headings (its <h1>..<h6>):
how many headings carry a permalink mark (`¶`), how many are not headings of the page at all (a comment line in
a code sample read as a heading), and how many of the real headings the reader finds. The baseline, in the same
run, is the rule before the fix: every `#` line of trafilatura's Markdown of the raw page is a heading.

    apt-get install python3-doc
    .venv/bin/python bench/bench_web_reader.py [--root /usr/share/doc/python3-doc/html] [--limit 400]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default="/usr/share/doc/python3-doc/html")
    ap.add_argument("--limit", type=int, default=400)
    args = ap.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()  # settings only: no service is started
    import trafilatura
    from tqdm import tqdm

    from search.ingest.web import _HEADING, _without_permalinks, heading_key, heading_lines, html_to_markdown

    root = Path(args.root)
    if not root.is_dir():
        print(f"{root} is missing: apt-get install python3-doc", file=sys.stderr)
        return 2
    pages = sorted(p for p in root.rglob("*.html") if "_static" not in p.parts)[:args.limit]
    before = {"headings": 0, "pilcrow": 0, "fake": 0, "found": 0}
    after = dict.fromkeys(before, 0)
    real_total = 0
    t_before = t_after = 0.0
    for page in tqdm(pages, desc="pages", unit="page"):
        html = page.read_text(errors="replace")
        _, real = _without_permalinks(html)
        real_total += len(real)
        t0 = time.perf_counter()
        md = trafilatura.extract(html, output_format="markdown", include_formatting=True, include_links=False,
                                 include_tables=True, favor_recall=True) or ""
        old = {m.group(2).strip("# ").strip() for m in map(_HEADING.match, md.split("\n")) if m}
        t_before += time.perf_counter() - t0
        t0 = time.perf_counter()
        md_now, _, _, real_now = html_to_markdown(html)
        new = {text for _, text in heading_lines(md_now.split("\n"), real=real_now).values()}
        t_after += time.perf_counter() - t0
        for counts, heads in ((before, old), (after, new)):
            counts["headings"] += len(heads)
            counts["pilcrow"] += sum(1 for h in heads if h.endswith("¶"))
            keys = {heading_key(h) for h in heads}
            counts["fake"] += sum(1 for k in keys if k not in real)
            counts["found"] += len(keys & real)
    rows = [[name, c["headings"], c["pilcrow"], c["fake"], f"{c['found'] / max(1, real_total):.3f}",
             f"{t * 1000 / max(1, len(pages)):.0f}"]
            for name, c, t in (("before: every `#` line", before, t_before),
                               ("now: the page's real headings, permalinks removed", after, t_after))]
    text = "\n".join([
        "# The web reader on Python's documentation (Sphinx, `python3-doc`) — `bench/bench_web_reader.py`",
        "",
        f"{len(pages)} pages under `{root}`, {real_total:,} real headings (<h1>..<h6>). A heading path entry is "
        "*fake* when its text is no heading of the page (a code comment read as one); *found* is the share of the "
        "real headings the reader sees as headings (trafilatura drops some sections as boilerplate either way).",
        "",
        table(["rule", "heading entries", "ending in ¶", "fake", "real headings found", "ms / page"], rows),
        "",
        machine(),
    ])
    write_result("web_reader", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
