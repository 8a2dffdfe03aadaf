"""Parity: the SRD read from its Markdown and the same SRD read from a printed PDF, on the 99 test questions.

Why: the PDF reader is good when a rulebook bought as a PDF answers as well as the same book in Markdown. Both
are ingested the way the product ingests a rulebook (`start_ingest`, kind rules, as `manage.py ingest --kind
rules`) into datasets of their own project, and scored the way `manage.py evaluate --rules` scores them
(`evaluate_rules`, the API default pipeline, over a snapshot of each project's chunks) on
search/rules/demo_rules/srd51_eval_queries.json (the 99 test questions; the dev sets are separate files). The PDFs
come from bench/typeset_srd.py (two columns, running headers and footers; one variant with bookmarks, one where
headings are known by their font size only).

Citations: for each question the extractive answer's citations (the top passages it quotes, as the streamed
answer cites them without an LLM) are checked against where the text was printed: a citation is right when its
page range lies inside the pages the typesetter printed its section on (srd51_pages.json, the section and the
sections below it) and the cited chunk's opening words are in the text of its cited pages (pypdfium2's text).

Diagnostics per PDF dataset: chunks, documents, gold evaluability, the share of chunks whose section path is one
the Markdown ingest also makes, and chunks holding a running header or a bare page number (furniture leaking).

    .venv/bin/python bench/typeset_srd.py            # once: var/bench/srd-pdf/*.pdf + srd51_pages.json
    .venv/bin/python bench/bench_srd_pdf.py [--sources markdown,pdf-outline,pdf-plain] [--var-dir DIR]
    # or in parallel processes: --sources markdown / --sources pdf-outline ... then --combine
"""
from __future__ import annotations

import argparse
import hashlib
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
from _common import ROOT, machine, setup_django, table, write_result

QUERIES = ROOT / "search" / "rules" / "demo_rules" / "srd51_eval_queries.json"
TARGET = 0.02
_WORD = re.compile(r"[a-z0-9]+")
_PAGES = re.compile(r"(\d+)(?:\D+(\d+))?")


def code_version() -> str:
    """A short hash of the reader's and the rules chunker's source: a re-run after either changed ingests into new
    datasets (an unchanged file is skipped by its hash, so the old dataset would keep the old reading)."""
    files = sorted((ROOT / "search" / "ingest" / "formats").glob("pdf*.py")) + [ROOT / "search" / "ingest" / "rules.py"]
    return hashlib.sha256(b"".join(f.read_bytes() for f in files)).hexdigest()[:8]


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def page_range(label: str) -> tuple[int, int]:
    """ "p. 12" -> (12, 12); "pp. 12–13" -> (12, 13); "" -> (0, 0)."""
    m = _PAGES.search(label or "")
    if not m:
        return (0, 0)
    return (int(m.group(1)), int(m.group(2) or m.group(1)))


def ingest(*, slug: str, source: Path) -> dict:
    """A rules dataset in a project of its own, ingested as the product ingests a rulebook; -> the job's figures."""
    from projects.models import Project
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=f"{slug}-rules", defaults={"kind": "rules"})
    t0 = time.perf_counter()
    job = start_ingest(job=IngestJob(dataset=dataset, source=str(source), kind="rules",
                                     options={"ruleset_id": "srd51", "book_id": "srd"}),
                       sync=True)
    return {"dataset": dataset, "job": job, "seconds": time.perf_counter() - t0}


def evaluate(*, slug: str) -> dict:
    from search.quality.runs import EvalOptions, evaluate_rules

    report = evaluate_rules(path=QUERIES, project_slug=slug, options=EvalOptions(pipelines=["default"], progress=False))
    d = report.as_dict()
    return {"overall": d["pipelines"]["default"], "by_category": d.get("extra", {}).get("by_category", {}).get(
        "default", {})}


class Printed:
    """Where the typesetter printed each section, and the text of every page (for the cited-text check)."""

    def __init__(self, *, pdf: Path, side: dict) -> None:
        import pypdfium2 as pdfium  # a bench-only dependency, loaded once the PDF exists

        doc = pdfium.PdfDocument(str(pdf))
        self.page_words = [" ".join(words(doc[i].get_textpage().get_text_range())) for i in range(len(doc))]
        self.sections = {tuple(s["path"]): tuple(s["pages"]) for s in side["sections"]}

    def section_pages(self, path: list[str]) -> tuple[int, int]:
        """First and last page of the section and every section below it (a stat block's chunk holds them)."""
        key = tuple(path)
        spans = [p for k, p in self.sections.items() if k[:len(key)] == key]
        return (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)

    def printed_on(self, *, text: str, first: int, last: int) -> bool:
        """Whether the chunk's opening words are printed on pages first..last."""
        body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
        w = words(body) or words(text)
        if not w or not first:
            return False
        pages = " " + " ".join(self.page_words[first - 1:last]) + " "
        if " " + " ".join(w[:8]) + " " in pages:
            return True
        head = {x for x in w[:30] if len(x) >= 3}
        return bool(head) and sum(f" {x} " in pages for x in head) / len(head) >= 0.8  # table cells reorder


def citations(*, slug: str, printed: Printed | None) -> dict:
    """The extractive answer's citations for every question, checked against the printed pages."""
    from projects.models import Project
    from search.engine.access import accessible_dataset_ids
    from search.models import Chunk
    from search.quality.evaluation import load_rules_queries
    from search.quality.runs import RULES_FILTER, search_store
    from search.rules.answer import MAX_CONTEXT_CHUNKS, citation, extractive_answer
    from search.rules.search import RulesSpec, rules_search

    project = Project.objects.get(slug=slug)
    ids = sorted(accessible_dataset_ids(project))
    total = labelled = in_section = text_there = both = 0
    with search_store(dataset_ids=ids, kinds=RULES_FILTER["kind"]) as (index, _):
        for rq in load_rules_queries(QUERIES):
            found = rules_search(user=None, project=project, index=index, spec=RulesSpec(q=rq.query, log=False))
            top = found["results"][:MAX_CONTEXT_CHUNKS]
            if not top:
                continue
            _, cited = extractive_answer(q=rq.query, results=top)
            for n in cited or range(1, len(top) + 1):
                c = citation(n, top[n - 1])
                row = Chunk.objects.filter(id=c["chunk_id"]).values("text", "page", "section_path").first()
                total += 1
                labelled += bool(c["page"])  # the citation itself names the page
                first, last = page_range(c["page"] or (row or {}).get("page", ""))  # else the chunk's
                if not first or printed is None or row is None:
                    continue
                s0, s1 = printed.section_pages(list(row["section_path"]))
                ok_section = bool(s0) and s0 <= first and last <= s1
                ok_text = printed.printed_on(text=row["text"], first=first, last=last)
                in_section += ok_section
                text_there += ok_text
                both += ok_section and ok_text

    def share(k: int) -> float:
        return k / total if total else 0.0

    return {"citations": total, "with_page": share(labelled), "in_section": share(in_section),
            "text_there": share(text_there), "right": share(both)}


def reading(*, srd: Path, pdf_dir: Path, variants: list[str]) -> str:
    """Without services: each PDF read and chunked by the rules chunker beside the Markdown's chunks -> a table of
    chunk counts, content kinds, section paths shared with the Markdown and test questions whose gold no chunk
    path ends with (those questions cannot be answered from the PDF dataset, whatever the ranking)."""
    import bm25s  # the product's sparse library, here as a service-free lexical check

    from search.engine.sparse import tokenize
    from search.ingest.base import embed_input
    from search.ingest.formats.pdf import read_pdf
    from search.ingest.rules import chunk_rules_layer, read_rulebook
    from search.quality.evaluation import load_rules_queries
    from search.quality.metrics import ndcg

    def bm25s_ids(bm, terms: list[str], *, k: int) -> tuple:
        ids, scores = bm.retrieve([terms], k=k, show_progress=False, n_threads=1)
        return ids[0], scores[0]

    queries = load_rules_queries(QUERIES)

    def lost(paths: list[tuple[str, ...]]) -> list[str]:
        low = [tuple(s.lower() for s in p) for p in paths]
        return [q.id for q in queries if not any(
            len(g) <= len(p) and p[-len(g):] == tuple(s.lower() for s in g) for g in q.expected_sections
            for p in low)]

    def lexical(chunks: list) -> float:
        """nDCG@10 of plain BM25 over the chunks' dense input (headings above + text), product tokenizer."""
        corpus = [tokenize(embed_input(c), code=False) for c in chunks]
        bm = bm25s.BM25()
        bm.index(corpus, show_progress=False)
        low = [tuple(s.lower() for s in c.section_path) for c in chunks]
        total = 0.0
        for q in queries:  # a question whose gold no chunk has scores 0, as in the harness
            gold = [tuple(s.lower() for s in g) for g in q.expected_sections]
            rels = {i: 1 for i, p in enumerate(low) if any(len(g) <= len(p) and p[-len(g):] == g for g in gold)}
            ids, _ = bm25s_ids(bm, tokenize(q.query, code=False), k=min(10, len(chunks)))
            total += ndcg([int(i) for i in ids], rels) if rels else 0.0
        return total / len(queries)

    md = [c for d in read_rulebook(path=srd, ruleset_id="srd51", book_id="srd") for c in d.chunks]
    md_paths = {tuple(c.section_path) for c in md}
    kinds = ("spell", "monster", "item", "feat", "condition", "table", "rule", "narrative")
    rows = [["markdown", "", len(md)] + [sum(c.content_kind == k for c in md) for k in kinds]
            + ["1.000", 0, f"{lexical(md):.4f}", ""]]
    for v in variants:
        name = f"srd51_{v}.pdf"
        t0 = time.perf_counter()
        layer = read_pdf(data=(pdf_dir / name).read_bytes(), name=name)
        secs = time.perf_counter() - t0
        ch = chunk_rules_layer(layer=layer, source=name, ruleset_id="srd51", book_id="srd")
        gone = lost([tuple(c.section_path) for c in ch])
        rows.append([f"pdf-{v}", f"{secs:.0f}", len(ch)] + [sum(c.content_kind == k for c in ch) for k in kinds]
                    + [f"{sum(tuple(c.section_path) in md_paths for c in ch) / max(1, len(ch)):.3f}", len(gone),
                       f"{lexical(ch):.4f}", ", ".join(gone[:12]) + (" ..." if len(gone) > 12 else "")])
    return table(["source", "read s", "chunks", *kinds, "chunks with a Markdown section path",
                  "questions whose gold no chunk has", "BM25 nDCG@10 (no services)", "which (first 12)"], rows)


def diagnostics(*, dataset, md_paths: set[tuple[str, ...]]) -> dict:
    from search.models import Chunk, Document

    rows = list(Chunk.objects.filter(dataset=dataset).values_list("section_path", "text"))
    furniture = sum(1 for _, t in rows if "System Reference Document 5.1" in t
                    or any(re.fullmatch(r"\s*\d{1,3}\s*", line) for line in t.splitlines()))
    same_path = sum(1 for p, _ in rows if tuple(p) in md_paths)
    return {"chunks": len(rows), "documents": Document.objects.filter(dataset=dataset).count(),
            "same_path": same_path / max(1, len(rows)), "furniture": furniture}


def run_source(*, key: str, srd: Path, pdf_dir: Path, side_all: dict, version: str) -> dict:
    """Ingest one source (markdown, pdf-outline, pdf-plain), evaluate it, check its citations -> its figures."""
    from search.ingest.rules import read_rulebook

    if key == "markdown":
        run = ingest(slug=f"srd-md-{version}", source=srd)
        printed = None
    else:
        name = f"srd51_{key.split('-', 1)[1]}.pdf"
        folder = Path(tempfile.mkdtemp(prefix=f"srd-{key}-"))  # a rulebook folder holding the one PDF
        shutil.copy(pdf_dir / name, folder / name)
        run = ingest(slug=f"srd-{key}-{version}", source=folder)
        printed = Printed(pdf=pdf_dir / name, side=side_all[name])
    job = run["job"]
    print(f"{key}: {job.status} {job.files_total} files, {job.chunks_written} chunks, {run['seconds']:.0f} s "
          f"{job.error or ''}", file=sys.stderr, flush=True)
    slug = run["dataset"].project.slug
    md_paths = {tuple(c.section_path) for d in read_rulebook(path=srd, ruleset_id="srd51", book_id="srd")
                for c in d.chunks}
    return {"key": key, "version": version, "seconds": run["seconds"], "embedded": job.embeddings_computed,
            "eval": evaluate(slug=slug), "cites": citations(slug=slug, printed=printed),
            "diag": diagnostics(dataset=run["dataset"], md_paths=md_paths), "machine": machine()}


def report(*, runs: dict[str, dict], side_all: dict, reading_table: str) -> str:
    base = runs["markdown"]["eval"]
    cats = sorted(base["by_category"])
    rows = []
    for key, run in runs.items():
        ov, bc = run["eval"]["overall"], run["eval"]["by_category"]
        # the harness scores the questions whose gold resolves; over all 99 an unfindable one scores 0
        full = ov["ndcg@10"] * ov["evaluability"]
        diff = full - base["overall"]["ndcg@10"] * base["overall"]["evaluability"]
        rows.append([key, f"{full:.4f}", "" if key == "markdown" else f"{diff:+.4f}", f"{ov['ndcg@10']:.4f}",
                     f"{ov['hit@1']:.4f}", f"{ov['evaluability']:.2f}"]
                    + [f"{bc.get(c, {}).get('ndcg@10', 0.0):.4f}" for c in cats])
    quality = table(["source", "nDCG@10 (all 99)", "Δ vs Markdown", "nDCG@10 (findable only, as evaluate)",
                     "hit@1", "evaluability"]
                    + [f"{c} ({base['by_category'][c]['queries']})" for c in cats], rows)
    cite_rows = [[k, r["cites"]["citations"], f"{r['cites']['with_page']:.3f}", f"{r['cites']['in_section']:.3f}",
                  f"{r['cites']['text_there']:.3f}", f"{r['cites']['right']:.3f}"]
                 for k, r in runs.items() if k != "markdown"]
    cites = table(["source", "citations", "citation names a page", "page inside its section's pages",
                   "cited text printed there", "right (both)"], cite_rows)
    diag = table(["source", "documents", "chunks", "chunks with a Markdown section path",
                  "chunks holding a running header or page number", "embedded", "first ingest s"],
                 [[k, r["diag"]["documents"], r["diag"]["chunks"], f"{r['diag']['same_path']:.3f}",
                   r["diag"]["furniture"], r["embedded"], f"{r['seconds']:.0f}"] for k, r in runs.items()])
    worst = max((abs(float(r[2])) for r in rows[1:] if r[2]), default=None)
    verdict = ("No PDF dataset has product figures in this file yet (its ingest and evaluation did not finish); "
               "the reading table below bounds the gap." if worst is None else
               f"Largest gap to Markdown: {worst:.4f} nDCG@10 — "
               + ("within" if worst <= TARGET else "**outside**") + f" the {TARGET} target.")
    versions = ", ".join(sorted({f"{k} {r['version']}" for k, r in runs.items()}))
    return "\n\n".join([
        "# The SRD as a printed PDF vs the SRD in Markdown",
        f"`bench/bench_srd_pdf.py`: 99 test questions ({QUERIES.relative_to(ROOT)}), the API default rules "
        "pipeline (`evaluate_rules`), "
        "each source in a rules dataset of its own project. PDFs from `bench/typeset_srd.py` "
        f"({side_all['srd51_outline.pdf']['pages']} pages, two columns, running headers and footers); "
        "`outline` has bookmarks, `plain` has headings by font size only. Source hash of the reader and the rules "
        f"chunker (search/ingest/formats/pdf*.py, search/ingest/rules.py) per source: {versions}.",
        "## Retrieval", quality, verdict,
        "## Citations (extractive answers' cited passages, checked against where the typesetter printed them)",
        cites, "## Reading",
        "Each PDF read and chunked by the rules chunker, beside the Markdown (content kinds come from the "
        "Markdown's emphasis: an italic \"*3rd-level evocation*\" line makes a spell, \"**Armor Class**\" a "
        "monster).", reading_table,
        "The datasets as ingested:", diag,
        *(f"{k}: {r['machine']}" for k, r in runs.items()),
        "Reproduce: `.venv/bin/python bench/typeset_srd.py && .venv/bin/python bench/bench_srd_pdf.py`."])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srd", default="/work/shared/data/srd51")
    ap.add_argument("--pdf-dir", default=str(ROOT / "var" / "bench" / "srd-pdf"))
    ap.add_argument("--sources", default="markdown,pdf-outline,pdf-plain",
                    help="which to ingest and evaluate in this process (each saves its figures beside the PDFs, "
                         "so sources can run in parallel processes and --combine writes the table)")
    ap.add_argument("--version", default="", help="dataset suffix (default: the reader's and chunker's source hash; "
                    "`latest`: the datasets an interrupted run of each source left)")
    ap.add_argument("--var-dir", default="", help="keep services/data here (a re-run re-reads only what changed)")
    ap.add_argument("--reading-only", action="store_true",
                    help="no ingest: read and chunk the PDFs, save and print the reading table (a few minutes)")
    ap.add_argument("--combine", action="store_true", help="only write the report from the saved figures")
    args = ap.parse_args()
    pdf_dir = Path(args.pdf_dir)
    side_all = json.loads((pdf_dir / "srd51_pages.json").read_text())
    saved = pdf_dir / "parity"
    saved.mkdir(exist_ok=True)
    sources = [v.strip() for v in args.sources.split(",") if v.strip()]
    variants = [k.split("-", 1)[1] for k in sources if k.startswith("pdf-")]
    if args.reading_only:  # reads no database: Django's settings and apps only, no services
        sys.path.insert(0, str(ROOT))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
        django.setup()
        text = reading(srd=Path(args.srd), pdf_dir=pdf_dir, variants=variants)
        (saved / "reading.md").write_text(text + "\n\nRead " + time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                                          + f", source hash {code_version()}. " + machine() + "\n")
        print(text)
        return
    if not args.combine:
        setup_django(var_dir=args.var_dir or None)
        from projects.models import Project

        for key in sources:
            version = args.version or code_version()
            if version == "latest":  # the datasets an interrupted run of this source already ingested
                slug = Project.objects.filter(slug__startswith=f"srd-{'md' if key == 'markdown' else key}-") \
                    .order_by("-id").values_list("slug", flat=True).first() or ""
                version = slug.rsplit("-", 1)[-1] or code_version()
            fig = run_source(key=key, srd=Path(args.srd), pdf_dir=pdf_dir, side_all=side_all, version=version)
            (saved / f"{key}.json").write_text(json.dumps(fig, indent=1))
    runs = {k: json.loads((saved / f"{k}.json").read_text()) for k in ("markdown", "pdf-outline", "pdf-plain")
            if (saved / f"{k}.json").exists()}
    if "markdown" not in runs:
        print("no markdown figures yet: run with --sources markdown", file=sys.stderr)
        return
    reading_table = (saved / "reading.md").read_text() if (saved / "reading.md").exists() else \
        "(run --reading-only for the reading table)"
    write_result("srd_pdf", report(runs=runs, side_all=side_all, reading_table=reading_table))


if __name__ == "__main__":
    main()
