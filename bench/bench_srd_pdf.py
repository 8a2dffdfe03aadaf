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
    .venv/bin/python bench/bench_srd_pdf.py [--variants outline,plain] [--var-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, setup_django, table, write_result

QUERIES = ROOT / "search" / "rules" / "demo_rules" / "srd51_eval_queries.json"
TARGET = 0.02
_WORD = re.compile(r"[a-z0-9]+")
_PAGES = re.compile(r"(\d+)(?:\D+(\d+))?")


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
    from search.models import Dataset

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=f"{slug}-rules", defaults={"kind": "rules"})
    t0 = time.perf_counter()
    job = start_ingest(dataset=dataset, source=str(source), kind="rules",
                       options={"ruleset_id": "srd51", "book_id": "srd"}, sync=True)
    return {"dataset": dataset, "job": job, "seconds": time.perf_counter() - t0}


def evaluate(*, slug: str) -> dict:
    from search.quality.runs import evaluate_rules

    report = evaluate_rules(path=QUERIES, project_slug=slug, pipelines=["default"], progress=False)
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
                first, last = page_range(c["page"] or (row or {}).get("page", ""))
                if not first or printed is None or row is None:
                    continue
                labelled += 1
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


def diagnostics(*, dataset, md_paths: set[tuple[str, ...]]) -> dict:
    from search.models import Chunk, Document

    rows = list(Chunk.objects.filter(dataset=dataset).values_list("section_path", "text"))
    furniture = sum(1 for _, t in rows if "System Reference Document 5.1" in t
                    or any(re.fullmatch(r"\s*\d{1,3}\s*", line) for line in t.splitlines()))
    same_path = sum(1 for p, _ in rows if tuple(p) in md_paths)
    return {"chunks": len(rows), "documents": Document.objects.filter(dataset=dataset).count(),
            "same_path": same_path / max(1, len(rows)), "furniture": furniture}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--srd", default="/work/shared/data/srd51")
    ap.add_argument("--pdf-dir", default=str(ROOT / "var" / "bench" / "srd-pdf"))
    ap.add_argument("--variants", default="outline,plain")
    ap.add_argument("--var-dir", default="", help="keep services/data here (a re-run re-reads only what changed)")
    args = ap.parse_args()
    pdf_dir = Path(args.pdf_dir)
    side_all = json.loads((pdf_dir / "srd51_pages.json").read_text())
    setup_django(var_dir=args.var_dir or None)
    from search.models import Chunk

    runs: dict[str, dict] = {}
    t0 = time.perf_counter()
    runs["markdown"] = ingest(slug="srd-md", source=Path(args.srd))
    md_paths = {tuple(p) for p in Chunk.objects.filter(dataset=runs["markdown"]["dataset"]).values_list(
        "section_path", flat=True)}
    printed: dict[str, Printed] = {}
    for variant in [v.strip() for v in args.variants.split(",") if v.strip()]:
        name = f"srd51_{variant}.pdf"
        folder = Path(tempfile.mkdtemp(prefix=f"srd-{variant}-"))  # a rulebook folder holding the one PDF
        shutil.copy(pdf_dir / name, folder / name)
        runs[f"pdf-{variant}"] = ingest(slug=f"srd-pdf-{variant}", source=folder)
        printed[f"pdf-{variant}"] = Printed(pdf=pdf_dir / name, side=side_all[name])
    for key, run in runs.items():
        job = run["job"]
        print(f"{key}: {job.status} {job.files_total} files, {job.chunks_written} chunks, "
              f"{run['seconds']:.0f} s {job.error or ''}", file=sys.stderr)
        slug = "srd-md" if key == "markdown" else f"srd-pdf-{key.split('-', 1)[1]}"
        run["eval"] = evaluate(slug=slug)
        run["cites"] = citations(slug=slug, printed=printed.get(key))
        run["diag"] = diagnostics(dataset=run["dataset"], md_paths=md_paths)

    base = runs["markdown"]["eval"]
    cats = sorted(base["by_category"])
    rows = []
    for key, run in runs.items():
        ov, bc = run["eval"]["overall"], run["eval"]["by_category"]
        diff = ov["ndcg@10"] - base["overall"]["ndcg@10"]
        rows.append([key, f"{ov['ndcg@10']:.4f}", "" if key == "markdown" else f"{diff:+.4f}",
                     f"{ov['hit@1']:.4f}", f"{ov['evaluability']:.2f}"]
                    + [f"{bc.get(c, {}).get('ndcg@10', 0.0):.4f}" for c in cats])
    quality = table(["source", "nDCG@10", "Δ vs Markdown", "hit@1", "evaluability"]
                    + [f"{c} ({base['by_category'][c]['queries']})" for c in cats], rows)
    cite_rows = [[k, r["cites"]["citations"], f"{r['cites']['with_page']:.3f}", f"{r['cites']['in_section']:.3f}",
                  f"{r['cites']['text_there']:.3f}", f"{r['cites']['right']:.3f}"]
                 for k, r in runs.items() if k != "markdown"]
    cites = table(["source", "citations", "with a page", "page inside its section's pages",
                   "cited text printed there", "right (both)"], cite_rows)
    diag = table(["source", "documents", "chunks", "chunks with a Markdown section path",
                  "chunks holding a running header or page number", "ingest s"],
                 [[k, r["diag"]["documents"], r["diag"]["chunks"], f"{r['diag']['same_path']:.3f}",
                   r["diag"]["furniture"], f"{r['seconds']:.0f}"] for k, r in runs.items()])
    worst = max((abs(float(r[2])) for r in rows[1:] if r[2]), default=0.0)
    verdict = (f"Largest gap to Markdown: {worst:.4f} nDCG@10 — "
               + ("within" if worst <= TARGET else "**outside**") + f" the {TARGET} target.")
    text = "\n\n".join([
        "# The SRD as a printed PDF vs the SRD in Markdown",
        f"99 test questions ({QUERIES.relative_to(ROOT)}), the API default rules pipeline (`evaluate_rules`), "
        "each source in a rules dataset of its own. PDFs from `bench/typeset_srd.py` "
        f"({side_all['srd51_outline.pdf']['pages']} pages, two columns, running headers and footers); "
        "`outline` has bookmarks, `plain` has headings by font size only.",
        "## Retrieval", quality, verdict,
        "## Citations (extractive answers' cited passages, checked against where the typesetter printed them)",
        cites, "## Reading", diag,
        f"Wall time {time.perf_counter() - t0:.0f} s.", machine()])
    write_result("srd_pdf", text)


if __name__ == "__main__":
    main()
