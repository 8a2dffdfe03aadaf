"""Sparse analyzers A/B, offline: the platform's own encoders scored by an in-memory BM25 with the platform's IDF.

Why offline: `manage.py evaluate` measures the real sparse leg but must ingest (and embed) the corpus first,
minutes of CPU per collection; the sparse leg itself is only `search.engine.sparse` weights times Qdrant's IDF
(ln(1 + (N - n + 0.5) / (n + 0.5))), which this script computes exactly over the same document text the index
gets (`sparse_document_text` of the BEIR chunk). So analyzer variants can be compared in seconds, each against
the baseline measured in the same run. Its figures track the platform's sparse-only row closely but are not that
row (no payload filters, no float32 rounding): report the evaluate figures as the result, these as the A/B.

    .venv/bin/python bench/sparse_analyzers.py --beir var/data/stdlib-code [--split train] [--beir ...]

Rows: documents analysed as the collection kind's documents (`beir` prose or `code`), queries as code or prose.
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import machine

DEPTH = 100


def _index(coll: object, *, doc_kind: str) -> tuple[dict[int, list[tuple[str, float]]], dict[int, float]]:
    from search.engine.sparse import encode_document, sparse_document_text

    postings: dict[int, list[tuple[str, float]]] = defaultdict(list)
    for doc_id, rec in coll.corpus.items():
        text = f"{rec['title']}\n{rec['text']}".strip() if rec["title"] else rec["text"]
        if not text.strip():
            continue
        vec = encode_document(sparse_document_text(text=text, path=doc_id, symbol=rec["title"][:500]), kind=doc_kind)
        for i, w in zip(vec.indices, vec.values, strict=True):
            postings[i].append((doc_id, w))
    n_docs = len({d for p in postings.values() for d, _ in p})
    idf = {i: math.log(1 + (n_docs - len(p) + 0.5) / (len(p) + 0.5)) for i, p in postings.items()}
    return postings, idf


def evaluate(coll: object, *, doc_kind: str, query_kinds: tuple[str, ...]) -> dict[str, float]:
    from search.engine.sparse import encode_query
    from search.quality.evaluation import compute_metrics, ranked_to_run

    postings, idf = _index(coll, doc_kind=doc_kind)
    run = {}
    for qid, text in coll.queries.items():
        scores: dict[str, float] = defaultdict(float)
        for i in encode_query(text, kinds=query_kinds).indices:
            for doc, w in postings.get(i, []):
                scores[doc] += w * idf[i]
        ranked = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:DEPTH]
        run[qid] = ranked_to_run(ranked)
    return compute_metrics(qrels=coll.qrels, run=run)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--beir", action="append", required=True)
    ap.add_argument("--split", default="test", help="qrels split to score (train for design decisions)")
    args = ap.parse_args()
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()  # settings only: no service is started
    from search.quality.evaluation import load_beir

    lines = ["# Sparse analyzers, offline BM25 replica (nDCG@10 / MRR@10 / hit@1)", "", machine(), ""]
    for path in args.beir:
        coll = load_beir(path, split=args.split)
        lines += [f"## {coll.name} ({coll.kind}), {args.split} split, {len(coll.queries)} queries", "",
                  "| documents | query analysed as | ndcg@10 | mrr@10 | hit@1 |", "|---|---|---:|---:|---:|"]
        doc_kinds = ["beir", "code"] if coll.kind == "code" else ["beir"]
        for doc_kind in doc_kinds:
            for label, qk in (("code", ("code",)), ("prose", ("web",)), ("union (mixed)", ("code", "web"))):
                m = evaluate(coll, doc_kind=doc_kind, query_kinds=qk)
                lines.append(f"| {doc_kind} | {label} | {m['ndcg@10']:.4f} | {m['mrr@10']:.4f} | {m['hit@1']:.4f} |")
        lines.append("")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
