"""Real manuals: the PDF reader against the HTML of the same document (Debian's R and Debian Reference manuals).

Why these two: each Debian package pair ships one text both as a PDF and as HTML made from the same source, so
the HTML's headings are the truth the PDF reader's headings are checked against, and an HTML dataset is the
reference a PDF dataset of the same manual should retrieve like. "An Introduction to R" is Texinfo typeset by TeX
(one column, numbered sections, code examples); "Debian Reference" is DocBook typeset by dblatex (many tables,
long command listings).

1. Heading recall: the share of the HTML's headings (h1-h6, numbers such as "1.2.3." or "Chapter 4." dropped,
   case and punctuation folded; the HTML-only "Table of Contents", "Footnotes" and footnote numbers left out)
   that the PDF reader's Markdown has as a heading line; and its precision (PDF headings that are HTML headings).
2. Retrieval agreement: each manual ingested twice as a web dataset (the product's `start_ingest`, kind web),
   once from the PDF and once from the HTML, in projects of their own; 25 questions per manual written from its
   table of contents in a user's words (bench/pdf_manuals_questions.json, each with the section it was written
   for), each run through the API default pipeline (`make_rankers(...)["default"]`) and, as the baseline, the BM25
   leg alone (`["sparse"]`). Per question: top-1 agreement (the same section first), overlap@10 (sections shared
   by the two top 10s over those of the HTML's top 10), hit@3 and nDCG@10 of the section the question was
   written for, in each dataset. A PDF chunk's section is read by its heading path and, independently of the
   reader's headings, by its text (the HTML section holding most of its 4-word shingles).

Data (never fetched at run time; the benchmark reads what these commands left in /tmp):

    mkdir -p /tmp/pdfjudge/debs /tmp/pdfjudge/x && cd /tmp/pdfjudge/debs
    apt-get download r-doc-pdf r-doc-html debian-reference-en
    for d in *.deb; do mkdir -p ../x/${d%.deb}; dpkg -x $d ../x/${d%.deb}; done

    .venv/bin/python bench/bench_pdf_manuals.py [--root /tmp/pdfjudge/x] [--var-dir DIR]
"""
from __future__ import annotations

import argparse
import hashlib
import html
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

import django

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, setup_django, table, write_result

R_PDF = "r-doc-pdf_4.2.2.20221110-2_all/usr/share/R/doc/manual/R-intro.pdf"
R_HTML = "r-doc-html_4.2.2.20221110-2_all/usr/share/R/doc/manual/R-intro.html"
DR = "debian-reference-en_2.100_all/usr/share/debian-reference"

QUESTIONS = Path(__file__).resolve().parent / "pdf_manuals_questions.json"  # per manual: {"q", "section"}
PIPELINES = ("default", "sparse")  # the API default, and the BM25 leg alone as the baseline
K = 10
HTML_ONLY = {"table of contents", "footnotes", "short table of contents"}


def norm_heading(text: str) -> str:
    """A heading without its numbering, case or punctuation: "1.2.3. The root account" -> "the root account"."""
    t = html.unescape(re.sub(r"<[^>]+>", "", text)).replace("\xa0", " ")
    t = re.sub(r"^\s*#+\s*", "", t)
    t = re.sub(r"^\s*(chapter|appendix)\s+[0-9A-Z]+\s*[.:]?\s+", "", t, flags=re.IGNORECASE)
    t = re.sub(r"^\s*(?:\d+(?:\.\d+)*\.?|[A-Z](?:\.\d+)+\.?|[A-Z]\.|[A-Z](?=\s+[A-Z]))\s+(?=\S)", "", t)
    # an appendix letter goes ("B Invoking R", "A A sample session"); "A sample session" keeps its A
    return " ".join(re.findall(r"[a-z0-9]+", t.lower()))


def html_headings(files: list[Path]) -> list[str]:
    out = []
    for f in files:
        for _, text in re.findall(r"<h([1-6])[^>]*>(.*?)</h\1>", f.read_text(encoding="utf-8", errors="replace"),
                                  re.S):
            n = norm_heading(text)
            if n and n not in HTML_ONLY and not re.fullmatch(r"\d+", n):
                out.append(n)
    return out


def reader_hash(*, side: str = "") -> str:
    """A short hash of the readers' source (side "pdf": search/ingest/formats/*.py; "html": search/ingest/web.py;
    "": both). An unchanged file is skipped by its hash on re-ingest, so datasets are named for the reader that
    made them, and a kept --var-dir re-reads only the side whose reader changed."""
    root = Path(__file__).resolve().parents[1] / "search" / "ingest"
    files = (sorted((root / "formats").glob("*.py")) if side in ("", "pdf") else []) + (
        [root / "web.py"] if side in ("", "html") else [])
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:8]


def heading_recall(*, pdf: Path, html_files: list[Path]) -> dict:
    from search.ingest.formats.pdf import read_pdf  # the reader under test: absent until it lands

    data = pdf.read_bytes()
    t0 = time.perf_counter()
    layer = read_pdf(data=data, name=pdf.name)
    seconds = time.perf_counter() - t0
    pdf_heads = {norm_heading(line) for line in layer.markdown.split("\n") if re.match(r"^#{1,6}\s", line)}
    pdf_heads.discard("")
    truth = html_headings(html_files)
    want = set(truth)
    found = want & pdf_heads
    return {"pages": layer.pages, "seconds": seconds, "html": len(want), "pdf": len(pdf_heads),
            "recall": len(found) / max(1, len(want)), "precision": len(found) / max(1, len(pdf_heads)),
            "missed": sorted(want - pdf_heads)[:12], "extra": sorted(pdf_heads - want)[:12]}


def ingest(*, slug: str, files: list[Path]) -> dict:
    from projects.models import Project
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    folder = Path(tempfile.mkdtemp(prefix=f"{slug}-"))
    for f in files:
        shutil.copy(f, folder / f.name)
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=f"{slug}-web", defaults={"kind": "web"})
    t0 = time.perf_counter()
    job = start_ingest(job=IngestJob(dataset=dataset, source=str(folder), kind="web", options={}), sync=True)
    return {"project": project, "dataset": dataset, "job": job, "seconds": time.perf_counter() - t0}


def ranked(*, project, questions: list[str]) -> dict[str, list[list[int]]]:
    """The top K chunk ids of each question, per pipeline (PIPELINES), over the project's one web dataset."""
    from search.engine.access import accessible_dataset_ids
    from search.quality.evaluation import make_rankers
    from search.quality.runs import search_store

    ids = sorted(accessible_dataset_ids(project))
    with search_store(dataset_ids=ids, kinds=["web"]) as (index, _):
        rankers = make_rankers(project=project, dataset_ids=ids, index=index)
        return {name: [[cid for cid, _ in rankers[name](q, {})[:K]] for q in questions] for name in PIPELINES}


_SHINGLE = 4  # words: long enough to place a passage, short enough to survive the PDF's line breaks and hyphens


def shingles(text: str) -> set[tuple[str, ...]]:
    w = re.findall(r"[a-z0-9]+", text.lower())
    return {tuple(w[i:i + _SHINGLE]) for i in range(max(0, len(w) - _SHINGLE + 1))}


class Truth:
    """The manual's sections as its HTML files print them: each heading's path (folded as norm_heading folds) and
    the 4-word shingles of the text under it, to place any chunk, from either dataset, in the section its text
    comes from, whatever headings its reader gave it. Footnote-number headings ("(3)") start no section."""

    def __init__(self, *, html_files: list[Path]) -> None:
        self.owner: dict[tuple[str, ...], set[tuple[str, ...]]] = {}
        for f in html_files:
            raw = f.read_text(encoding="utf-8", errors="replace")
            raw = re.sub(r"<(script|style)\b.*?</\1>", " ", raw, flags=re.S | re.I)
            stack: list[tuple[int, str]] = []
            path: tuple[str, ...] = ()
            pos = 0
            for m in re.finditer(r"<h([1-6])[^>]*>(.*?)</h\1>", raw, re.S):
                self._add(path, raw[pos:m.start()])
                pos = m.end()
                name = norm_heading(m.group(2))
                if not name or re.fullmatch(r"\d+", name):
                    continue
                level = int(m.group(1))
                stack = [(lv, t) for lv, t in stack if lv < level] + [(level, name)]
                path = tuple(t for _, t in stack)
            self._add(path, raw[pos:])

    def _add(self, path: tuple[str, ...], markup: str) -> None:
        for sh in shingles(html.unescape(re.sub(r"<[^>]+>", " ", markup))):
            self.owner.setdefault(sh, set()).add(path)

    def shares(self, text: str) -> dict[tuple[str, ...], float]:
        """The share of the text's shingles each section holds (a shingle many sections share counts less)."""
        votes: dict[tuple[str, ...], float] = {}
        for sh in shingles(text):
            paths = self.owner.get(sh, ())
            for p in paths:
                votes[p] = votes.get(p, 0) + 1 / len(paths)
        total = sum(votes.values())
        return {p: v / total for p, v in votes.items()} if total else {}


class Sections:
    """A dataset's chunks with two section labels each: by heading (the heading path its reader gave it) and by
    text (Truth.place). Two rankings that agree by text retrieve the same passages even where a reader named
    their section wrongly or not at all."""

    def __init__(self, *, rows: list[tuple[int, list[str], str]], truth: Truth) -> None:
        self.path = {cid: tuple(n for n in (norm_heading(h) for h in hp) if n) for cid, hp, _ in rows}
        self.shares = {cid: truth.shares(text) for cid, _, text in rows}
        self.text_path = {cid: max(sh, key=lambda p: (sh[p], p)) if sh else () for cid, sh in self.shares.items()}
        self.label = {cid: (p[-1] if p else "") for cid, p in self.path.items()}
        self.by_text = {cid: (p[-1] if p else "") for cid, p in self.text_path.items()}

    def relevant(self, gold: str, *, by_text: bool = False) -> dict[int, int]:
        """Chunks of the section the question was written for (or of a section below it): by heading, on their
        heading path; by text, a third or more of their text from there (a chunk may straddle sections)."""
        if by_text:
            return {cid: 1 for cid, sh in self.shares.items()
                    if sum(v for p, v in sh.items() if gold in p) >= 1 / 3}
        return {cid: 1 for cid, p in self.path.items() if gold in p}

    def labelled(self) -> float:
        """Share of the chunks whose heading is the section their text comes from."""
        placed = [cid for cid, lab in self.by_text.items() if lab]
        return sum(self.label[c] == self.by_text[c] for c in placed) / max(1, len(placed))


def dataset_rows(dataset) -> list[tuple[int, list[str], str]]:
    from search.models import Chunk

    return list(Chunk.objects.filter(dataset=dataset).values_list("id", "heading_path", "text"))


def read_rows(files: list[Path]) -> list[tuple[int, list[str], str]]:
    """The chunks the product's reader makes of the files, without services (`read_document`, as a web dataset's
    ingest reads them), numbered in order."""
    from search.ingest.formats.documents import read_document

    rows = []
    for f in files:
        draft, _ = read_document(kind="web", data=f.read_bytes(), name=f.name)
        rows += [(len(rows) + i, c.heading_path, c.text) for i, c in enumerate(draft.chunks if draft else [])]
    return rows


def agreement(*, pdf_top: list[list[int]], html_top: list[list[int]], pdf: Sections, html: Sections,
              gold: list[str]) -> dict:
    """Per question, then averaged: do the two datasets' rankings point at the same sections (by text and by
    heading; an empty label agrees with nothing), and at the one the question was written for?"""
    from search.quality.metrics import ndcg

    def same(x: str, y: str) -> bool:
        return bool(x) and x == y

    def overlap(xs: list[str], ys: list[str]) -> float:
        want = set(ys) - {""}
        return len((set(xs) - {""}) & want) / len(want) if want else 0.0

    sums: dict[str, float] = {}
    rows = []
    for p, h, g in zip(pdf_top, html_top, gold, strict=True):
        rel_p, rel_h = pdf.relevant(g, by_text=True), html.relevant(g, by_text=True)
        pt, ht = [pdf.by_text[c] for c in p], [html.by_text[c] for c in h]
        ph, hh = [pdf.label[c] for c in p], [html.label[c] for c in h]
        one = {"top1_text": same(pt[0], ht[0]) if p and h else False,
               "top1_heading": same(ph[0], hh[0]) if p and h else False,
               "overlap_text": overlap(pt, ht), "overlap_heading": overlap(ph, hh),
               "ndcg_pdf_text": ndcg(p, rel_p, k=K), "ndcg_html_text": ndcg(h, rel_h, k=K),
               "ndcg_pdf_heading": ndcg(p, pdf.relevant(g), k=K), "ndcg_html_heading": ndcg(h, html.relevant(g), k=K),
               "hit3_pdf": bool(set(p[:3]) & set(rel_p)), "hit3_html": bool(set(h[:3]) & set(rel_h))}
        for k, v in one.items():
            sums[k] = sums.get(k, 0.0) + float(v)
        first = {side: next((i + 1 for i, c in enumerate(top) if c in rel), None)
                 for side, top, rel in (("pdf", p, rel_p), ("html", h, rel_h))}
        rows.append({"gold": g, "html1": ht[0] if ht else "", "pdf1": pt[0] if pt else "",
                     "pdf1_heading": ph[0] if ph else "", **first})
    return {**{k: v / max(1, len(gold)) for k, v in sums.items()}, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="/tmp/pdfjudge/x")
    ap.add_argument("--var-dir", default="")
    ap.add_argument("--skip-retrieval", action="store_true")
    ap.add_argument("--version", default="", help="dataset suffix (default: a hash of the reader's source per "
                    "side, so a kept --var-dir re-reads after a reader changed; `none`: no suffix)")
    args = ap.parse_args()
    root = Path(args.root)
    dr = root / DR
    manuals = {
        "R-intro": (root / R_PDF, [root / R_HTML]),
        "Debian Reference": (dr / "debian-reference.en.pdf", sorted(dr.glob("*.en.html"))),
    }
    missing = [str(p) for pdf, htmls in manuals.values() for p in [pdf, *htmls] if not p.exists()]
    if missing:
        sys.exit(f"missing {missing[:3]}: run the apt-get/dpkg commands in this script's docstring first")
    if args.skip_retrieval:  # heading recall reads no database: Django's settings and apps only, no services
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        django.setup()
    else:
        setup_django(var_dir=args.var_dir or None)
    t_all = time.perf_counter()
    heads, agree, labels, details, notes = [], [], [], [], []
    for name, (pdf, htmls) in manuals.items():
        h = heading_recall(pdf=pdf, html_files=htmls)
        heads.append([name, h["pages"], h["html"], h["pdf"], f"{h['recall']:.3f}", f"{h['precision']:.3f}",
                      f"{h['seconds']:.1f}", f"{h['pages'] / max(h['seconds'], 1e-9):.1f}"])
        notes.append(f"- {name}: HTML headings the PDF missed (first 12): {', '.join(h['missed']) or 'none'}; "
                     f"PDF headings not in the HTML (first 12): {', '.join(h['extra']) or 'none'}")
        truth = Truth(html_files=htmls)
        pdf_read, html_read = Sections(rows=read_rows([pdf]), truth=truth), Sections(rows=read_rows(htmls), truth=truth)
        labels.append([name, "read without services", f"{len(pdf_read.label)} / {len(html_read.label)}",
                       f"{sum(not p for p in pdf_read.path.values())} / {sum(not p for p in html_read.path.values())}",
                       f"{pdf_read.labelled():.3f} / {html_read.labelled():.3f}", ""])
        if args.skip_retrieval:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
        runs = {side: ingest(slug=f"{slug}-{side}" + ("" if args.version == "none" else
                                                      "-" + (args.version or reader_hash(side=side))), files=files)
                for side, files in (("pdf", [pdf]), ("html", htmls))}
        for side, r in runs.items():
            print(f"{name} {side}: {r['job'].status} {r['job'].chunks_written} chunks, {r['seconds']:.0f} s "
                  f"{r['job'].error or ''}", file=sys.stderr, flush=True)
        asked = json.loads(QUESTIONS.read_text())[name]
        qs = [a["q"] for a in asked]
        gold = [norm_heading(a["section"]) for a in asked]
        html_sec = Sections(rows=dataset_rows(runs["html"]["dataset"]), truth=truth)
        pdf_sec = Sections(rows=dataset_rows(runs["pdf"]["dataset"]), truth=truth)
        labels.append([name, "datasets as ingested", f"{len(pdf_sec.label)} / {len(html_sec.label)}",
                       f"{sum(not p for p in pdf_sec.path.values())} / {sum(not p for p in html_sec.path.values())}",
                       f"{pdf_sec.labelled():.3f} / {html_sec.labelled():.3f}",
                       f"{runs['pdf']['seconds']:.0f} / {runs['html']['seconds']:.0f}"])
        t0 = time.perf_counter()
        top = {side: ranked(project=r["project"], questions=qs) for side, r in runs.items()}
        secs = time.perf_counter() - t0
        for pipe in PIPELINES:
            a = agreement(pdf_top=top["pdf"][pipe], html_top=top["html"][pipe], pdf=pdf_sec, html=html_sec,
                          gold=gold)
            agree.append([name, pipe + ("" if pipe == "default" else " (baseline: BM25 leg)"), len(qs)]
                         + [f"{a[k]:.2f}" for k in ("top1_text", "overlap_text", "top1_heading", "overlap_heading")]
                         + [f"{a[k]:.3f}" for k in ("ndcg_pdf_text", "ndcg_html_text", "ndcg_pdf_heading",
                                                    "ndcg_html_heading")]
                         + [f"{a[k]:.2f}" for k in ("hit3_pdf", "hit3_html")])
            if pipe == "default":
                differ = [f"\"{q}\" ({r['gold']}: rank HTML {r['html'] or '>10'}, PDF {r['pdf'] or '>10'}; "
                          f"first results from HTML \"{r['html1']}\", PDF \"{r['pdf1']}\""
                          + (f" headed \"{r['pdf1_heading']}\"" if r["pdf1_heading"] != r["pdf1"] else "") + ")"
                          for q, r in zip(qs, a["rows"], strict=True) if r["html1"] != r["pdf1"]]
                details.append(f"- {name}, default pipeline, {len(differ)} of {len(qs)} questions whose first "
                               "results come from different sections (by text): " + ("; ".join(differ) or "none"))
        details.append(f"- {name}: {2 * len(qs) * len(PIPELINES)} rankings in {secs:.0f} s.")
    parts = ["# Real manuals: the PDF reader against the HTML of the same text",
             "Debian packages r-doc-pdf + r-doc-html 4.2.2 (\"An Introduction to R\", Texinfo/TeX) and "
             "debian-reference-en 2.100 (DocBook/dblatex PDF and HTML chapters).",
             "## Heading recall (HTML headings found as PDF heading lines, numbering and case folded)",
             table(["manual", "pages", "HTML headings", "PDF headings", "recall", "precision", "read s",
                    "pages/s"], heads),
             "\n".join(notes),
             "## Chunk labels (is a chunk's heading the section its text comes from?)",
             table(["manual", "chunks", "chunks PDF / HTML", "chunks without a heading PDF / HTML",
                    "chunks whose heading is their text's section PDF / HTML", "ingest s PDF / HTML"], labels),
             f"Readers' source hashes: PDF {reader_hash(side='pdf')} (search/ingest/formats/*.py), web "
             f"{reader_hash(side='html')} (search/ingest/web.py)."]
    if agree:
        parts += ["## Retrieval agreement (the same manual as two web datasets: from the PDF, from the HTML)",
                  f"Questions: `bench/{QUESTIONS.name}` (written from each table of contents in a user's words, "
                  "each with the section it was written for). Each dataset in a project of its own, ingested by "
                  "`start_ingest` (kind web) and searched by the API default pipeline; the BM25 leg alone is the "
                  "baseline. A chunk's section is read two ways: by text (the section of the HTML files holding "
                  "most of its 4-word shingles, the same rule for both datasets) and by heading (the heading "
                  "path its reader gave it), so a disagreement by heading but not by text is a reader's "
                  "labelling, not a different passage.",
                  table(["manual", "pipeline", "questions", "top-1 same section (text)",
                         f"overlap@{K} sections (text)", "top-1 same section (heading)",
                         f"overlap@{K} sections (heading)", f"nDCG@{K} PDF (text)", f"nDCG@{K} HTML (text)",
                         f"nDCG@{K} PDF (heading)", f"nDCG@{K} HTML (heading)", "hit@3 PDF (text)",
                         "hit@3 HTML (text)"], agree),
                  f"overlap@{K}: sections shared by the two top {K}s over the HTML top {K}'s sections. nDCG@{K} "
                  "and hit@3 count a chunk as relevant by text when a third or more of its text comes from the "
                  "question's section (or one below it), by heading when that section is on the heading path "
                  "its reader gave it.",
                  "\n".join(details)]
    parts += [f"Wall time {time.perf_counter() - t_all:.0f} s.", machine(),
              "Reproduce: `.venv/bin/python bench/bench_pdf_manuals.py` (data: the apt-get commands in its docstring)."]
    write_result("pdf_manuals", "\n\n".join(parts))


if __name__ == "__main__":
    main()
