"""The evaluation harness behind `manage.py evaluate`.

Why ablations in one run: a number for the default pipeline means little unless
the same queries, the same index and the same moment also score each leg alone,
each fusion, the reranker and the graph boost; then a regression (the default
below sparse-only, say) is visible in one table. Metrics come from ranx, never
hand-rolled, so they match what papers report.

Two kinds of collection:
* BEIR (`corpus.jsonl`, `queries.jsonl`, `qrels_test.tsv` or `qrels/test.tsv`): the corpus is
  ingested into its own dataset (one document per corpus id, embeddings from the shared cache);
  relevance is per corpus id, a document's score is its best chunk's.
* Rulebook queries (JSON: [{id, query, book_id, expected_sections | expected_chunk_ids, answer?}]):
  relevance is per chunk; expected section paths are resolved to chunk ids in the rules dataset.
"""
from __future__ import annotations

import csv
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from inference.encoders import embed_cached
from search.engine.graph_signal import graph_boost as code_graph_boost
from search.engine.pipeline import (
    STAGES,
    QueryRun,
    QuerySpec,
    Stage,
    build_filter,
    execute,
    path_prior,
    recheck,
    rerank_with,
    retrieval_over,
    run_query,
    with_stage,
)
from search.engine.rerank import get_reranker
from search.ingest.base import ChunkDraft, DocumentDraft
from search.models import Chunk, Dataset, EvaluationRun, GraphEdge
from search.quality.metrics import RANX_METRICS, RUN_DEPTH, compute_metrics, ranked_to_run
from search.quality.progress import bar as progress_bar
from search.rules.graph import apply_graph_boost

if TYPE_CHECKING:
    from projects.models import Project
    from search.engine.index import VectorIndex
    from search.models import EvaluationRun

PIPELINES = ("default", "default-fusion", "sparse", "dense", "fused", "fused+rerank", "fused+graph", "weighted", "trained-rerank",
             "default+code-graph", "default+graph-pack")
# rules-only and report-only columns, in table order; a column shows when any pipeline has it
EXTRA_METRICS = ("evaluability", "hit@1_evaluable", "mrr@10_evaluable", "hit@1_expanded", "mrr@10_expanded",
                 "ndcg@10_expanded", "recall@100_expanded", "cross_book_contamination", "answer_similarity",
                 "answer_cosine")


# ------------------------------------------------------------------------------------------------ BEIR

@dataclass
class BeirCollection:
    name: str
    path: Path
    corpus: dict[str, dict[str, str]]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    kind: str = "beir"  # "code" when collection.json says so: ingested as code chunks (code-aware sparse)


def _read_jsonl(path: Path, *, need: tuple[str, ...]) -> list[dict[str, Any]]:
    """Records of a JSON-lines file; a bad line is a ValueError naming the file and line, never a KeyError."""
    out = []
    with path.open() as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{n}: not valid JSON ({exc.msg})") from exc
            if not isinstance(rec, dict) or any(k not in rec for k in need):
                raise ValueError(f"{path}:{n}: expected a JSON object with {', '.join(need)}")
            out.append(rec)
    return out


BEIR_KINDS = ("beir", "code")


def load_beir(path: str | Path, *, max_queries: int | None = None, kind: str | None = None,
              split: str = "test") -> BeirCollection:
    """Read a BEIR folder; only queries with judgements of `split` (test unless tuning) are kept.

    A split's queries are in queries.jsonl or, as SciFact ships its train claims, in `queries_<split>.jsonl`.

    The content kind is `kind`, else the folder's optional `collection.json` {"kind": "code"} (written by
    bench/build_code_collection.py), else "beir" (prose): a code collection must be indexed and queried with
    the code analyzer, or the measurement is of the wrong tokenizer.

    Bad input is a FileNotFoundError or a ValueError that names the file and line: a qrels row that is not
    `query-id<TAB>corpus-id<TAB>integer score` (a header is allowed on line 1 only), a qrels row naming a
    query that queries.jsonl lacks, a JSON line that does not parse or lacks `_id`/`text`.
    """
    root = Path(path)
    if kind is None and (root / "collection.json").exists():
        try:
            kind = json.loads((root / "collection.json").read_text()).get("kind")
        except (json.JSONDecodeError, AttributeError) as exc:
            raise ValueError(f"{root / 'collection.json'}: expected a JSON object") from exc
    kind = kind or "beir"
    if kind not in BEIR_KINDS:
        raise ValueError(f"content kind {kind!r} is not one of {', '.join(BEIR_KINDS)}")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (root / name).exists():
            raise FileNotFoundError(f"{root} has no {name} (a BEIR folder needs corpus.jsonl and queries.jsonl)")
    if not re.fullmatch(r"[a-z]+", split):
        raise ValueError(f"split {split!r} is not a split name (test, train, dev)")
    qrels_path = next((p for p in (root / f"qrels_{split}.tsv", root / "qrels" / f"{split}.tsv") if p.exists()), None)
    if qrels_path is None:
        raise FileNotFoundError(f"{root} has neither qrels_{split}.tsv nor qrels/{split}.tsv")
    query_files = [root / "queries.jsonl"] + [p for p in [root / f"queries_{split}.jsonl"] if p.exists()]
    all_queries = {str(rec["_id"]): str(rec["text"])
                   for qf in query_files for rec in _read_jsonl(qf, need=("_id", "text"))}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(newline="") as fh:
        for n, row in enumerate(csv.reader(fh, delimiter="\t"), start=1):
            if not row or not any(c.strip() for c in row):
                continue
            score = row[2].strip() if len(row) >= 3 else ""
            if not score.lstrip("-").isdigit():
                if n == 1 and len(row) >= 3:
                    continue  # header
                raw = "\t".join(row)
                raise ValueError(f"{qrels_path}:{n}: expected 'query-id<TAB>corpus-id<TAB>integer score', "
                                 f"got {raw!r}")
            qid = row[0].strip()
            if qid not in all_queries:
                raise ValueError(f"{qrels_path}:{n}: query {qid!r} is not in {root / 'queries.jsonl'}")
            qrels.setdefault(qid, {})[row[1].strip()] = int(score)
    queries = {q: t for q, t in all_queries.items() if q in qrels}
    if max_queries:
        queries = dict(list(queries.items())[:max_queries])
    qrels = {q: d for q, d in qrels.items() if q in queries}
    corpus = {}
    for rec in _read_jsonl(root / "corpus.jsonl", need=("_id",)):
        corpus[str(rec["_id"])] = {"title": rec.get("title") or "", "text": rec.get("text") or ""}
    return BeirCollection(name=root.name, path=root, corpus=corpus, queries=queries, qrels=qrels, kind=kind)


def beir_documents(collection: BeirCollection) -> list:
    """One DocumentDraft per corpus entry; title + abstract (or qualified name + source) as one chunk of the
    collection's kind (SciFact abstracts fit the model)."""
    docs = []
    for doc_id, rec in collection.corpus.items():
        text = f"{rec['title']}\n{rec['text']}".strip() if rec["title"] else rec["text"]
        if not text.strip():
            continue
        docs.append(DocumentDraft(
            path=doc_id, content_hash=hashlib.sha256(text.encode()).hexdigest(), title=rec["title"][:500],
            chunks=[ChunkDraft(text=text, start_line=1, end_line=max(1, text.count("\n") + 1),
                               kind=collection.kind,
                               symbol=rec["title"][:500])]))
    return docs


def evaluability(collection: BeirCollection) -> float:
    """Share of judged queries whose relevant documents are in the corpus at all (1.0 = every query can score)."""
    if not collection.qrels:
        return 0.0
    ok = sum(1 for docs in collection.qrels.values() if any(d in collection.corpus for d, r in docs.items() if r > 0))
    return round(ok / len(collection.qrels), 4)


# ------------------------------------------------------------------------------------------------ rulebook queries

@dataclass
class RulesQuery:
    id: str
    query: str
    book_id: str = ""
    ruleset_id: str = ""
    expected_sections: list[list[str]] = field(default_factory=list)
    expected_chunk_ids: list[int] = field(default_factory=list)
    answer: str = ""
    category: str = ""  # optional grouping for the report's breakdown (SRD: conditions, combat, spells, ...)


def load_rules_queries(path: str | Path) -> list[RulesQuery]:
    data = json.loads(Path(path).read_text())
    items = data.get("queries", data) if isinstance(data, dict) else data
    out = []
    for n, rec in enumerate(items, start=1):
        out.append(RulesQuery(id=str(rec.get("id", n)), query=rec["query"], book_id=rec.get("book_id", ""),
                              ruleset_id=rec.get("ruleset_id", ""),
                              expected_sections=[list(p) for p in rec.get("expected_sections", [])],
                              expected_chunk_ids=[int(i) for i in rec.get("expected_chunk_ids", [])],
                              answer=rec.get("answer", ""), category=str(rec.get("category", ""))))
    return out


def metrics_by_category(*, queries: list[RulesQuery], qrels: dict[str, dict[str, int]],
                        run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The metrics of one pipeline over each category's questions -> {category: metrics}, sorted by name.

    Why: a mean over 99 questions hides where a pipeline fails (conditions and combat, worded far from their
    headings, sit well below classes and monsters); a change should be judged by the category it moves.
    Questions without a category, or whose gold resolved to nothing, are left out; a category with none
    left is absent."""
    groups: dict[str, list[str]] = {}
    for rq in queries:
        if rq.category and qrels.get(rq.id):
            groups.setdefault(rq.category, []).append(rq.id)
    out = {}
    for category in sorted(groups):
        ids = groups[category]
        metrics = compute_metrics(qrels={q: qrels[q] for q in ids}, run={q: run.get(q, {}) for q in ids})
        out[category] = {"queries": len(ids), **metrics}
    return out


def category_table(by_category: dict[str, dict[str, dict[str, float]]], *, metric: str = "ndcg@10") -> str:
    """Markdown: one row per pipeline, one column per category, `metric` in each cell (the report's breakdown)."""
    cats = sorted({c for per in by_category.values() for c in per})
    if not cats:
        return ""
    sizes = {c: next(per[c]["queries"] for per in by_category.values() if c in per) for c in cats}
    lines = [f"{metric} by category", "", "| pipeline | " + " | ".join(f"{c} ({sizes[c]})" for c in cats) + " |",
             "|---|" + "---:|" * len(cats)]
    for name, per in by_category.items():
        cells = ["" if per.get(c, {}).get(metric) is None else f"{per[c][metric]:.4f}" for c in cats]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def resolve_expected(query: RulesQuery, *, dataset_ids: list[int]) -> set[int]:
    """Chunk ids a rules query expects: explicit ids, or chunks whose section path ends with an expected path."""
    ids = set(query.expected_chunk_ids)
    if query.expected_sections:
        qs = Chunk.objects.filter(dataset_id__in=dataset_ids)
        if query.book_id:
            qs = qs.filter(book_id=query.book_id)
        lowered = [[s.lower() for s in p] for p in query.expected_sections]
        for cid, path in qs.values_list("id", "section_path"):
            low = [s.lower() for s in path]
            if any(low[-len(p):] == p for p in lowered if p and len(p) <= len(low)):
                ids.add(cid)
    return ids


def expand_gold(ids: set[int], *, dataset_ids: list[int]) -> set[int]:
    """The gold chunks plus their sections' children and the chunks that continue them (the "expanded gold").

    Children: chunks of the same book whose section path extends a gold chunk's path (the gold "Grappling"
    section's "Escaping a Grapple" subsection). Continuations: chunks a gold chunk's `next` edge leads to while
    they stay inside its section (a long section split in two chunks, when the gold names one chunk id)."""
    if not ids:
        return set()
    gold = list(Chunk.objects.filter(id__in=ids, dataset_id__in=dataset_ids).values_list("id", "book_id",
                                                                                        "section_path"))
    out = set(ids)
    paths = {(book, tuple(path)) for _, book, path in gold if path}
    for book in {b for b, _ in paths}:
        prefixes = [p for b, p in paths if b == book]
        for cid, path in Chunk.objects.filter(dataset_id__in=dataset_ids, book_id=book).values_list(
                "id", "section_path"):
            if any(len(path) > len(p) and tuple(path[:len(p)]) == p for p in prefixes):
                out.add(cid)
    section_of = {cid: tuple(path) for cid, _, path in gold}
    frontier = dict(section_of)
    while frontier:
        edges = GraphEdge.objects.filter(dataset_id__in=dataset_ids, relation="next",
                                         source_id__in=[f"chunk:{c}" for c in frontier]).values_list(
            "source_id", "target_id")
        targets = {int(t.split(":", 1)[1]): frontier[int(src.split(":", 1)[1])] for src, t in edges}
        rows = dict(Chunk.objects.filter(id__in=list(targets)).values_list("id", "section_path"))
        frontier = {}
        for cid, sect in targets.items():
            path = tuple(rows.get(cid, ()))
            if cid not in out and path[:len(sect)] == sect:
                out.add(cid)
                frontier[cid] = sect
    return out


def token_f1(a: str, b: str) -> float:
    """Answer similarity: SQuAD-style token F1 between a produced and an expected answer."""
    ta = re.findall(r"[a-z0-9]+", a.lower())
    tb = re.findall(r"[a-z0-9]+", b.lower())
    if not ta or not tb:
        return 0.0
    common = sum((Counter(ta) & Counter(tb)).values())
    if common == 0:
        return 0.0
    p, r = common / len(ta), common / len(tb)
    return 2 * p * r / (p + r)


def answer_cosine(pairs: list[tuple[str, str]]) -> list[float]:
    """Answer similarity: cosine of the embedded produced and gold answers (one per pair).

    Why beside token F1: an extractive answer quotes the book ("A pinned character's speed is 0") while the gold
    answer paraphrases it; token F1 punishes the paraphrase, the embedding does not. Vectors come from the
    embedding cache (inference.encoders.embed_cached), so a re-run embeds nothing twice. An empty side scores 0."""
    texts = sorted({t for pair in pairs for t in pair if t.strip()})
    if not texts:
        return [0.0 for _ in pairs]
    vectors = dict(zip(texts, embed_cached(texts), strict=True))
    out = []
    for produced, gold in pairs:
        if not produced.strip() or not gold.strip():
            out.append(0.0)
            continue
        a, b = vectors[produced], vectors[gold]
        out.append(float(np.dot(a, b) / ((np.linalg.norm(a) * np.linalg.norm(b)) or 1.0)))
    return out


def cross_book_contamination(*, book_id: str, top_books: list[str]) -> float | None:
    """Share of the top results that come from another book than the query's; None when it cannot be judged."""
    if not book_id or not top_books:
        return None
    return sum(1 for b in top_books if b != book_id) / len(top_books)


def mean_or_none(values: list[float], *, places: int = 4) -> float | None:
    """A rounded mean, or None for no values (a table cell left blank, never a misleading 0)."""
    return round(sum(values) / len(values), places) if values else None


# ------------------------------------------------------------------------------------------------ pipelines

Ranker = Callable[[str, dict[str, Any]], list[tuple[int, float]]]  # (query, ctx) -> [(chunk_id, score)] best first


def make_rankers(*, project: Project, dataset_ids: list[int], extra_filter: dict[str, Any] | None = None,
                 default: Ranker | None = None, index: VectorIndex | None = None,
                 dense_model: str | None = None, trained: Any = None) -> dict[str, Ranker]:
    """One callable per ablation, all over the same index and filter; `default` is what the API runs.

    Each row is the pipeline's stage list with stages removed or replaced (search.engine.pipeline): the leg and
    fusion rows stop after fusion, the rerank rows re-check and rerank the fused list, the graph row adds the
    graph boost after fusion, and `default` runs every stage as the API does.
    `index`: the store every row searches (a BEIR evaluation's throwaway store; default: the live index).
    `index` + `dense_model`: the legs search another model's throwaway index with queries embedded by that model
    (`evaluate --model-id`); the API `default` then runs the configured model, over the live index. `trained`: a cross-encoder
    (`evaluate --reranker`) for the `trained-rerank` row: the fused ranking, its top RERANK_DEPTH reordered."""
    flt = build_filter(dataset_ids=dataset_ids, extra_filter=extra_filter)
    retrieval = retrieval_over(flt)

    def spec(q: str) -> QuerySpec:  # the evaluated query; a row that ablates a field replaces it
        return QuerySpec(q=q, candidates=RUN_DEPTH, top_k=min(50, RUN_DEPTH), include_global=False, log=False,
                         kind="eval")

    def staged(stages: tuple[Stage, ...], *, rerank_scores: bool = False, **fields: Any) -> Ranker:
        def rank(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
            run = execute(spec=replace(spec(q), dense_model=dense_model, **fields), project=project, index=index,
                          stages=stages)
            if rerank_scores:
                return [(c.chunk_id, c.rerank_score or 0.0) for c in run.cands]
            return [(c.chunk_id, c.fused_score) for c in run.cands]
        return rank

    def leg(legs: str, fusion: str = "rrf") -> Ranker:
        return staged(retrieval, legs=legs, fusion=fusion)

    def reranked(reranker: Any) -> Ranker:
        return staged((*retrieval, recheck, rerank_with(reranker)), rerank_scores=True, fusion="rrf")

    def fused_rerank(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
        return reranked(get_reranker())(q, ctx)  # the configured reranker: RERANKER_MODEL, else the embedded one

    def graph_boost(run: QueryRun) -> None:
        run.cands = apply_graph_boost(run.cands, dataset_ids=dataset_ids)

    def api(stages: tuple[Stage, ...]) -> Ranker:
        def rank(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
            # every stage as the API runs them, over the evaluated datasets only (the API's own `filters.dataset`):
            # the project may hold other collections of the same kind, and searching them too would score another
            # corpus (and its term statistics) than the other rows
            res = run_query(user=None, project=project, index=None if dense_model else index, stages=stages,
                            spec=replace(spec(q), extra_filter=extra_filter,
                                         filters={"dataset": [str(i) for i in dataset_ids]}))
            return [(c.chunk_id, c.rerank_score if c.rerank_score is not None else c.fused_score)
                    for c in res.candidates]
        return rank

    def graph_pack(q: str, ctx: dict[str, Any]) -> list[tuple[int, float]]:
        # the API with `graph: true`, ranked as an agent reads the pack: each graph addition's chunks right after
        # the result they were added for (search.engine.graph_context), the rest in the default's order
        res = run_query(user=None, project=project, index=None if dense_model else index,
                        spec=replace(spec(q), extra_filter=extra_filter,
                                     filters={"dataset": [str(i) for i in dataset_ids]}, graph=True))
        added: dict[int, list[int]] = {}
        for span in sorted((s for f in res.pack["files"] for s in f["spans"] if s["source"] == "graph"),
                           key=lambda s: s["order"]):  # in the order the packer spent them
            added.setdefault(span["why"]["from_rank"], []).extend(span["chunk_ids"])
        order: list[int] = []
        for rank, c in enumerate(res.candidates, start=1):
            order += [c.chunk_id, *added.get(rank, [])]
        ids = list(dict.fromkeys(order))  # a chunk counts where it first appears
        return [(cid, float(len(ids) - i)) for i, cid in enumerate(ids)]

    # `default-fusion`: the fusion the default runs (the project's adopted setting, else the kinds' default), without
    # the stages after it; its `@<model>` row is what the default would rank with an adapted model before adoption
    out = {"default": default or api(STAGES), "default-fusion": staged(retrieval), "sparse": leg("sparse"), "dense": leg("dense"), "fused": leg("hybrid"),
           "fused+rerank": fused_rerank, "fused+graph": staged((*retrieval, graph_boost), fusion="rrf"),
           "weighted": leg("hybrid", "weighted")}
    if trained is not None:
        out["trained-rerank"] = reranked(trained)
    if default is None and Dataset.objects.filter(pk__in=dataset_ids, kind="code").exists():
        # the code graph: the callers and callees of the strongest candidates boosted (search.engine.graph_signal)
        out["default+code-graph"] = api(with_stage(STAGES, code_graph_boost, after=path_prior))
        out["default+graph-pack"] = graph_pack
    return out


@dataclass
class EvalReport:
    collection: str
    queries: int
    pipelines: dict[str, dict[str, float | None]]
    timings: dict[str, Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"collection": self.collection, "queries": self.queries, "pipelines": self.pipelines,
                "timings": self.timings, **({"extra": self.extra} if self.extra else {})}


def run_pipelines(*, queries: dict[str, str], qrels: dict[str, dict[str, int]], rankers: dict[str, Ranker],
                  to_doc: Callable[[list[int]], dict[int, str]] | None = None, pipelines: list[str] | None = None,
                  contexts: dict[str, dict[str, Any]] | None = None, progress: bool = True
                  ) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, list[tuple[str, float]]]], dict]:
    """Each pipeline over every query -> (metrics per pipeline, ranked doc lists, timings)."""
    names = [p for p in (pipelines or list(PIPELINES)) if p in rankers]
    metrics: dict[str, dict[str, float]] = {}
    ranked_all: dict[str, dict[str, list[tuple[str, float]]]] = {}
    timings: dict[str, Any] = {}
    for name in names:
        rank = rankers[name]
        runs: dict[str, dict[str, float]] = {}
        ranked_all[name] = {}
        t0 = time.perf_counter()
        for qid, text in progress_bar(list(queries.items()), desc=f"{name:>12}", unit="query", enabled=progress,
                                      leave=False):
            hits = rank(text, (contexts or {}).get(qid, {}))
            ids = [cid for cid, _ in hits]
            mapping = to_doc(ids) if to_doc else {cid: str(cid) for cid in ids}
            docs = [(mapping[cid], s) for cid, s in hits if cid in mapping]
            ranked_all[name][qid] = docs
            runs[qid] = ranked_to_run(docs)
        elapsed = time.perf_counter() - t0
        metrics[name] = compute_metrics(qrels=qrels, run=runs)
        timings[name] = {"total_s": round(elapsed, 2), "ms_per_query": round(1000 * elapsed / max(1, len(queries)), 2)}
    return metrics, ranked_all, timings


# ------------------------------------------------------------------------------------------------ reports

def markdown_table(report: EvalReport) -> str:
    keys = list(RANX_METRICS) + [k for k in EXTRA_METRICS
                                 if any(k in m for m in report.pipelines.values())]
    lines = [f"**{report.collection}** — {report.queries} queries", "",
             "| pipeline | " + " | ".join(keys) + " | ms/query |", "|---|" + "---:|" * (len(keys) + 1)]
    for name, m in report.pipelines.items():
        cells = ["" if m.get(k) is None else f"{m[k]:.4f}" for k in keys]
        ms = report.timings.get(name, {}).get("ms_per_query", "")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ms} |")
    by_category = report.extra.get("by_category")
    return "\n".join(lines) + "\n" + (f"\n{category_table(by_category)}" if by_category else "")


def report_slug(collection: str) -> str:
    """The file name (without suffix) a collection's report is written under."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", collection)


def write_report(report: EvalReport, *, report_dir: str | Path) -> dict[str, str]:
    """report.md (the table), report.json and report.png (nDCG@10 / MRR@10 / recall@100 per pipeline)."""
    import matplotlib  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415 - heavy: charts load only when a report is drawn

    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    slug = report_slug(report.collection)
    md = out / f"{slug}.md"
    md.write_text(markdown_table(report))
    js = out / f"{slug}.json"
    js.write_text(json.dumps(report.as_dict(), indent=2))
    names = list(report.pipelines)
    metrics = ["ndcg@10", "mrr@10", "recall@100", "hit@1"] + [
        m for m in ("mrr@10_expanded", "evaluability", "mrr@10_evaluable")
        if any(report.pipelines[n].get(m) is not None for n in names)]
    x = np.arange(len(names))
    width = 0.8 / len(metrics)
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(names)), 4.5))
    for i, m in enumerate(metrics):
        ax.bar(x + (i - (len(metrics) - 1) / 2) * width, [report.pipelines[n].get(m) or 0 for n in names], width,
               label=m)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title(f"{report.collection} ({report.queries} queries)")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    png = out / f"{slug}.png"
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return {"markdown": str(md), "json": str(js), "png": str(png)}


def save_run(report: EvalReport, *, report_dir: str = "") -> EvaluationRun:
    return EvaluationRun.objects.create(collection=report.collection[:300], queries=report.queries,
                                        results=report.pipelines, timings=report.timings, report_dir=report_dir)
