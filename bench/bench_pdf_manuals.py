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
   once from the PDF and once from the HTML, in projects of their own; 20 questions per manual written from its
   table of contents, each run through the API default pipeline (`make_rankers(...)["default"]`). Per question:
   top-1 agreement (the same section heading first), overlap@10 (shared section headings among the top 10 over
   those of the HTML's top 10), and hit@3 of the section the question was written for, in each dataset.

Data (never fetched at run time; the benchmark reads what these commands left in /tmp):

    mkdir -p /tmp/pdfjudge/debs /tmp/pdfjudge/x && cd /tmp/pdfjudge/debs
    apt-get download r-doc-pdf r-doc-html debian-reference-en
    for d in *.deb; do mkdir -p ../x/${d%.deb}; dpkg -x $d ../x/${d%.deb}; done

    .venv/bin/python bench/bench_pdf_manuals.py [--root /tmp/pdfjudge/x] [--var-dir DIR]
"""
from __future__ import annotations

import argparse
import html
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

# (question, the heading of the section it was written for), from each manual's table of contents
QUESTIONS = {
    "R-intro": [
        ("how do I assign a vector of numbers to a variable", "Vectors and assignment"),
        ("how are missing values represented and tested", "Missing values"),
        ("generate a regular sequence of numbers with seq and the colon operator", "Generating regular sequences"),
        ("how to make an object longer or shorter", "Changing the length of an object"),
        ("apply a function to groups of a vector defined by a factor with tapply", "The function tapply() and ragged arrays"),
        ("multiply two matrices element by element and as a matrix product", "Matrix multiplication"),
        ("solve a system of linear equations and invert a matrix", "Linear equations and inversion"),
        ("compute the eigenvalues of a symmetric matrix", "Eigenvalues and eigenvectors"),
        ("bind matrices together by columns or rows", "Forming partitioned matrices, cbind() and rbind()"),
        ("create a data frame from vectors", "Making data frames"),
        ("read a table of data with a header line from a file", "The read.table() function"),
        ("compare two samples with a t test or a Wilcoxon test", "One- and two-sample tests"),
        ("write a for loop or a while loop", "Repetitive execution: for loops, repeat and while"),
        ("define my own infix operator such as %!%", "Defining new binary operators"),
        ("give function arguments default values and call them by name", "Named arguments and defaults"),
        ("fit an ordinary multiple regression model with lm", "Linear models"),
        ("fit a logistic regression with glm and the binomial family", "The binomial family"),
        ("change graphics settings for the rest of the session with par", "Permanent changes: The par() function"),
        ("run a file of R commands as a script from the shell", "Scripting with R"),
        ("install additional packages from CRAN", "Contributed packages and CRAN"),
    ],
    "Debian Reference": [
        ("what is the root account and why is it dangerous", "The root account"),
        ("how do I give a user the right to run commands as root with sudo", "sudo configuration"),
        ("what do the file permission bits rwx mean", "Filesystem permissions"),
        ("set the default permissions of newly created files", "Control of permissions for newly created files: umask"),
        ("what is the difference between hard links and symbolic links", "Links"),
        ("apt versus apt-get versus aptitude which should I use", "apt vs. apt-get / apt-cache vs. aptitude"),
        ("upgrade the whole system to a new release", "System wide upgrade"),
        ("remove packages together with their configuration files", "Purging removed packages for good"),
        ("how does the boot loader start the kernel", "Stage 2: the boot loader"),
        ("how to read the kernel messages with dmesg", "The kernel message"),
        ("choose a good password", "Good password"),
        ("log in to a remote host with ssh without typing a password", "Connecting without remote passwords"),
        ("how is the host name resolved to an address", "The hostname resolution"),
        ("find the best MTU for my network", "Finding optimal MTU"),
        ("change the locale to UTF-8", "The reconfiguration of the locale"),
        ("run a command at a regular time every day with cron", "Scheduling tasks regularly"),
        ("kill a process that does not respond", "Killing a process"),
        ("make a backup of my home directory", "Personal backup"),
        ("sign and encrypt a file with GnuPG", "Using GnuPG on files"),
        ("debug a crashing program and get a backtrace with gdb", "Obtaining backtrace"),
    ],
}
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
    from search.models import Dataset

    folder = Path(tempfile.mkdtemp(prefix=f"{slug}-"))
    for f in files:
        shutil.copy(f, folder / f.name)
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=f"{slug}-web", defaults={"kind": "web"})
    t0 = time.perf_counter()
    job = start_ingest(dataset=dataset, source=str(folder), kind="web", options={}, sync=True)
    return {"project": project, "dataset": dataset, "job": job, "seconds": time.perf_counter() - t0}


def ranked_sections(*, project, questions: list[str]) -> list[list[str]]:
    """The normalised section heading of each of the top 10 chunks, per question (the API default pipeline)."""
    from search.engine.access import accessible_dataset_ids
    from search.models import Chunk
    from search.quality.evaluation import make_rankers
    from search.quality.runs import search_store

    ids = sorted(accessible_dataset_ids(project))
    out = []
    with search_store(dataset_ids=ids, kinds=["web"]) as (index, _):
        default = make_rankers(project=project, dataset_ids=ids, index=index)["default"]
        for q in questions:
            top = [cid for cid, _ in default(q, {})[:10]]
            rows = dict(Chunk.objects.filter(id__in=top).values_list("id", "heading_path"))
            out.append([norm_heading((rows.get(cid) or [""])[-1]) for cid in top])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="/tmp/pdfjudge/x")
    ap.add_argument("--var-dir", default="")
    ap.add_argument("--skip-retrieval", action="store_true")
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
    heads, agree = [], []
    notes = []
    for name, (pdf, htmls) in manuals.items():
        h = heading_recall(pdf=pdf, html_files=htmls)
        heads.append([name, h["pages"], h["html"], h["pdf"], f"{h['recall']:.3f}", f"{h['precision']:.3f}",
                      f"{h['seconds']:.1f}", f"{h['pages'] / max(h['seconds'], 1e-9):.1f}"])
        notes.append(f"- {name}: HTML headings the PDF missed (first 12): {', '.join(h['missed']) or 'none'}; "
                     f"PDF headings not in the HTML (first 12): {', '.join(h['extra']) or 'none'}")
        if args.skip_retrieval:
            continue
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower())
        runs = {"pdf": ingest(slug=f"{slug}-pdf", files=[pdf]), "html": ingest(slug=f"{slug}-html", files=htmls)}
        qs = [q for q, _ in QUESTIONS[name]]
        want = [norm_heading(w) for _, w in QUESTIONS[name]]
        got = {k: ranked_sections(project=r["project"], questions=qs) for k, r in runs.items()}
        pairs = list(zip(got["pdf"], got["html"], strict=True))
        top1 = sum(bool(p and t and p[0] == t[0]) for p, t in pairs) / len(qs)
        overlap = sum(len(set(p) & set(t)) / max(1, len(set(t))) for p, t in pairs) / len(qs)
        hit3 = {k: sum(w in v[i][:3] for i, w in enumerate(want)) / len(qs) for k, v in got.items()}
        agree.append([name, len(qs), f"{top1:.2f}", f"{overlap:.2f}", f"{hit3['pdf']:.2f}", f"{hit3['html']:.2f}",
                      f"{runs['pdf']['job'].chunks_written} / {runs['html']['job'].chunks_written}",
                      f"{runs['pdf']['seconds']:.0f} / {runs['html']['seconds']:.0f}"])
    parts = ["# Real manuals: the PDF reader against the HTML of the same text",
             "Debian packages r-doc-pdf + r-doc-html 4.2.2 (\"An Introduction to R\", Texinfo/TeX) and "
             "debian-reference-en 2.100 (DocBook/dblatex PDF and HTML chapters).",
             "## Heading recall (HTML headings found as PDF heading lines, numbering and case folded)",
             table(["manual", "pages", "HTML headings", "PDF headings", "recall", "precision", "read s",
                    "pages/s"], heads),
             "\n".join(notes)]
    if agree:
        parts += ["## Retrieval agreement (web datasets from the PDF and from the HTML, API default pipeline)",
                  table(["manual", "questions", "top-1 same section", "overlap@10 of sections",
                         "hit@3 PDF", "hit@3 HTML", "chunks PDF / HTML", "ingest s PDF / HTML"], agree)]
    parts += [f"Wall time {time.perf_counter() - t_all:.0f} s.", machine(),
              "Reproduce: `.venv/bin/python bench/bench_pdf_manuals.py` (data: the apt-get commands in its docstring)."]
    write_result("pdf_manuals", "\n\n".join(parts))


if __name__ == "__main__":
    main()
