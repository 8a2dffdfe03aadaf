"""What the dense model should read of a rules section: the dense leg alone, exact cosine over every section of the
project's rules datasets, on a question file (issue 29 §4; README, "Rules questions: SRD", third pass).

Run: VAR_DIR=... .venv/bin/python manage.py shell -c "exec(open('bench/results/srd_dense_headings.py').read())"
with SRD_QUERIES (a question file; the dev questions choose) and SRD_OUT (a markdown path, optional).
Why exact cosine, not the store: the variants are texts no store holds; each is embedded here (MiniLM, the
configured model) and every section is scored, so no approximate search or leg cut-off blurs the comparison.
"""
import os
import statistics
import time

import numpy as np

from bench._common import machine
from inference.encoders import describe_configuration, embed_texts
from projects.models import Project
from search.engine.access import accessible_dataset_ids
from search.ingest.summaries import heading_micro
from search.models import Chunk
from search.quality.evaluation import load_rules_queries, resolve_expected

path = os.environ.get("SRD_QUERIES", "search/rules/demo_rules/srd51_dev_queries.json")
project = Project.objects.get(slug=os.environ.get("SRD_PROJECT", "srd"))
dataset_ids = sorted(accessible_dataset_ids(project))
chunks = list(Chunk.objects.filter(dataset_id__in=dataset_ids, kind="rules").order_by("pk"))
ids = [c.pk for c in chunks]


def lead(c, heads):
    return (" > ".join(heads) + "\n" + c.text) if heads else c.text


def windows(c, width=100, stride=50):
    words = c.text.split()
    if len(words) <= width:
        return [c.text]
    return [" ".join(words[i:i + width]) for i in range(0, len(words) - width + stride, stride)]


variants = {
    "the text (before)": [c.text for c in chunks],
    "the whole section path, then the text": [lead(c, c.section_path) for c in chunks],
    "the path without the section's own title": [lead(c, c.section_path[:-1]) for c in chunks],
    "the path without the chapter (shipped: heading_path)": [lead(c, c.heading_path) for c in chunks],
    "headings and first sentence, as web chunks (heading_micro)":
        [heading_micro(list(c.heading_path), c.text) + "\n" + c.text for c in chunks],
}
queries = [q for q in load_rules_queries(path)]
gold = {q.id: resolve_expected(q, dataset_ids=dataset_ids) for q in queries}
queries = [q for q in queries if gold[q.id]]
qv = embed_texts([q.query for q in queries])


def ndcg10(ranked, rel):
    dcg = sum(1 / np.log2(r + 2) for r, c in enumerate(ranked[:10]) if c in rel)
    return dcg / sum(1 / np.log2(r + 2) for r in range(min(10, len(rel))))


def score(matrix, owner=None):
    out, firsts = [], []
    for q, v in zip(queries, qv, strict=True):
        s = matrix @ v
        if owner is not None:  # a section scores its best window
            best = np.full(len(chunks), -9.0)
            np.maximum.at(best, owner, s)
            s = best
        ranked = [ids[i] for i in np.argsort(-s)]
        out.append(ndcg10(ranked, gold[q.id]))
        firsts.append(next(i + 1 for i, c in enumerate(ranked) if c in gold[q.id]))
    return statistics.mean(out), sum(r <= 100 for r in firsts), statistics.median(firsts)


rows = []
for name, texts in variants.items():
    t0 = time.perf_counter()
    m = embed_texts(texts)
    rows.append((name, *score(m), time.perf_counter() - t0))
    print(rows[-1], flush=True)
wins, owner = [], []
for i, c in enumerate(chunks):
    for w in windows(c):
        wins.append(w)
        owner.append(i)
t0 = time.perf_counter()
rows.append(("overlapping 100-word windows of the text, best window", *score(embed_texts(wins), np.array(owner)),
             time.perf_counter() - t0))
lines = [f"Dense leg alone on {path} ({len(queries)} questions), {len(chunks)} rules sections of project "
         f"{project.slug}; {describe_configuration()}", "", machine(), "",
         "| what the dense model reads | nDCG@10 | gold in top 100 | median first gold rank | embed s |",
         "|---|---:|---:|---:|---:|"]
lines += [f"| {n} | {v:.4f} | {k} / {len(queries)} | {med} | {s:.0f} |" for n, v, k, med, s in rows]
print("\n".join(lines))
if os.environ.get("SRD_OUT"):
    with open(os.environ["SRD_OUT"], "w") as fh:
        fh.write("\n".join(lines) + "\n")
