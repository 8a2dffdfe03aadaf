#!/usr/bin/env python
"""Would a cross-encoder trained on a repository's own history rank the definitions a change touches better than
the bi-encoder does, inside the files the change touched?

EXPERIMENT ONLY (no app code imports it). Why this question: `locate` finds the right file far more often than the
right function (docs/benchmarks/code-localisation.md), and inside a large file every definition looks alike to a
bi-encoder that embeds the task and the code apart. A cross-encoder reads the two together; the repository's history
pairs each commit message with the definitions it changed, which is exactly the training signal such a ranker needs.

Method, per repository, in time order:
- the qualifying commits (the product's rules, search/sources/git/history.py), newest first;
- test: the development window (the 16th to 30th newest by default), where `locate`'s constants were chosen, so
  no reported commit is used; train: the `--train` commits before it;
- for each commit, the definitions (function, method, class) of the changed files at its parent, each as
  `path + its first 80 lines`, and the gold: the definitions the change touched (changed_definitions, the
  benchmark's rule);
- training: one group per gold definition (at most 3 per commit): the message, the gold, and 4 negatives from the
  same files (other commits' definitions where a file has fewer); softmax over the group, one epoch, AdamW 3e-5,
  from all-MiniLM-L6-v2's weights with a new one-logit head (nothing downloaded);
- scored: every definition of the test commit's changed files, ranked by the bi-encoder's cosine (the baseline),
  by the cross-encoder, and by both (reciprocal ranks); recall@3 of the gold and the reciprocal rank of the first.

Usage: .venv/bin/python bench/history_cross_encoder_probe.py --repo /work/.mirror/pallets+click/repo \
    --repo /work/.mirror/encode+httpx/repo --repo /work/.mirror/mwaskom+seaborn/repo
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import amx_line, machine, setup_django, table, write_result

NEGATIVES = 4
GOLD_PER_COMMIT = 3
BATCH = 4
LINES = 80
# The product's modules are imported inside the functions: they reach the Django models, so they load only after
# setup_django() (as in bench_code_commits.py); torch and sentence-transformers load there too, being slow to import.


def commit_definitions(store: Any, sha: str, files: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every definition of the changed files at the parent: its path, qualified name, lines and whether the change
    touched it (bench/definition_windows_probe.py reads them too)."""
    from search.ingest.code import detect_lang
    from search.ingest.symbols import extract
    from search.sources.git.history import GOLD_DEFINITION_KINDS, blob_text, changed_definitions

    commit = store[sha.encode()]
    parent = store[commit.parents[0]]
    out = []
    for path in files:
        old = blob_text(store, parent.tree, path)
        if old is None:
            continue
        gold = set(changed_definitions(path=path, old=old, new=blob_text(store, commit.tree, path) or ""))
        lines = old.split("\n")
        for d in extract(path=path, text=old, lang=detect_lang(path) or "").definitions:
            if d.kind in GOLD_DEFINITION_KINDS:
                out.append({"path": path, "qualname": d.qualname, "body": lines[d.start_line - 1:d.end_line],
                            "gold": d.qualname in gold})
    return out


def commit_definitions_text(store: Any, sha: str, files: tuple[str, ...]) -> list[dict[str, Any]]:
    """Every definition of the changed files at the parent as `path + its first LINES lines`, with whether the
    change touched it."""
    return [{"text": d["path"] + "\n" + "\n".join(d["body"][:LINES]), "gold": d["gold"]}
            for d in commit_definitions(store, sha, files)]


def ranks(scores: list[float]) -> dict[int, int]:
    return {i: r for r, i in enumerate(sorted(range(len(scores)), key=lambda i: -scores[i]))}


def measure(test: list[tuple[str, list[dict[str, Any]]]], score: Any) -> tuple[float, float]:
    r3, rr = [], []
    for q, defs in test:
        at = ranks(score(q, defs))
        gold = [i for i, d in enumerate(defs) if d["gold"]]
        r3.append(sum(1 for i in gold if at[i] < 3) / len(gold))
        rr.append(1 / (1 + min(at[i] for i in gold)))
    return statistics.fmean(r3), statistics.fmean(rr)


def probe(*, path: str, test: tuple[int, int], n_train: int, max_length: int, seed: int) -> dict[str, Any]:
    import torch
    from dulwich.repo import Repo
    from sentence_transformers import CrossEncoder, SentenceTransformer

    from inference.encoders import resolve_model
    from search.sources.git.history import Walk, history_pairs

    rng = random.Random(seed)
    torch.manual_seed(seed)
    repo = Repo(path)
    pairs = history_pairs(repo.object_store, repo.head(), max_pairs=test[1] + n_train, walk=Walk(max_walk=20000))
    data = [(p.query, commit_definitions_text(repo.object_store, p.sha, p.gold)) for p in pairs]
    train = [x for x in data[test[1]:] if any(d["gold"] for d in x[1])]
    tested = [x for x in data[test[0]:test[1]] if any(d["gold"] for d in x[1])]
    groups = []
    for q, defs in train:
        golds = [d for d in defs if d["gold"]]
        others = [d for d in defs if not d["gold"]]
        for g in rng.sample(golds, min(GOLD_PER_COMMIT, len(golds))):
            negs = rng.sample(others, min(NEGATIVES, len(others)))
            while len(negs) < NEGATIVES:
                negs.append(rng.choice(rng.choice(train)[1]))
            groups.append((q, g["text"], [n["text"] for n in negs]))
    _, base = resolve_model()
    bi = SentenceTransformer(base, device="cpu")

    def bi_score(q: str, defs: list[dict[str, Any]]) -> list[float]:
        e = bi.encode([q] + [d["text"] for d in defs], normalize_embeddings=True, convert_to_tensor=True)
        return (e[1:] @ e[0]).tolist()

    ce = CrossEncoder(base, num_labels=1, max_length=max_length, device="cpu")

    def ce_score(q: str, defs: list[dict[str, Any]]) -> list[float]:
        ce.model.eval()
        with torch.no_grad():
            return [float(x) for x in ce.predict([(q, d["text"]) for d in defs], batch_size=32)]

    def both(q: str, defs: list[dict[str, Any]]) -> list[float]:
        a, b = ranks(bi_score(q, defs)), ranks(ce_score(q, defs))
        return [1 / (10 + a[i]) + 1 / (10 + b[i]) for i in range(len(defs))]

    rows = [("bi-encoder (the dense leg's model)", *measure(tested, bi_score)),
            ("cross-encoder, untrained head", *measure(tested, ce_score))]
    opt = torch.optim.AdamW(ce.model.parameters(), lr=3e-5, weight_decay=0.01)
    rng.shuffle(groups)
    steps = (len(groups) + BATCH - 1) // BATCH
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / max(1, steps // 10)) * max(0.0, 1 - s / steps))
    t0 = time.perf_counter()
    for step in range(steps):
        batch = groups[step * BATCH:(step + 1) * BATCH]
        ce.model.train()
        texts = [(q, t) for q, pos, negs in batch for t in (pos, *negs)]
        enc = ce.tokenizer([a for a, _ in texts], [b for _, b in texts], padding=True, truncation="longest_first",
                           max_length=max_length, return_tensors="pt")
        logits = ce.model(**enc).logits.view(len(batch), -1).float()
        loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ce.model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 25 == 0:
            print(f"{path}: step {step}/{steps} loss {float(loss.detach()):.3f} "
                  f"{time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    train_s = time.perf_counter() - t0
    rows += [("cross-encoder, trained on the history", *measure(tested, ce_score)),
             ("bi-encoder + trained cross-encoder (reciprocal ranks)", *measure(tested, both))]
    return {"repo": path, "train_commits": len(train), "groups": len(groups), "steps": steps,
            "train_s": train_s, "test_commits": len(tested),
            "defs": statistics.fmean(len(d) for _, d in tested), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", required=True, help="a local git directory (repeatable)")
    ap.add_argument("--test-from", type=int, default=15, help="the test window starts after this many newest")
    ap.add_argument("--test-to", type=int, default=30, help="... and ends at this many newest")
    ap.add_argument("--train", type=int, default=300, help="qualifying commits before the test window to train on")
    ap.add_argument("--max-length", type=int, default=192, help="tokens per (message, definition) pair")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--name", default="history_cross_encoder_probe")
    opts = ap.parse_args()
    setup_django()
    import torch

    torch.set_num_threads(2)
    parts = ["# A cross-encoder trained on the repository's history, inside the changed files", "",
             f"Test: the qualifying commits {opts.test_from + 1} to {opts.test_to}, newest first, of each repository "
             f"(the development window by default); train: up to {opts.train} qualifying commits before them. Ranked: every "
             f"function, method and class of the commit's changed files at its parent; gold: those the change "
             f"touched. Recall@3 and the reciprocal rank of the first gold, means over commits. Method: the "
             f"script's docstring.", ""]
    for path in opts.repo:
        r = probe(path=path, test=(opts.test_from, opts.test_to), n_train=opts.train, max_length=opts.max_length,
                  seed=opts.seed)
        parts += [f"## {Path(path).parent.name.replace('+', '/')}", "",
                  f"{r['train_commits']} training commits, {r['groups']} groups, {r['steps']} steps in "
                  f"{r['train_s']:.0f} s; {r['test_commits']} test commits, {r['defs']:.0f} definitions each on "
                  f"average.", "",
                  table(["ranking", "recall@3", "MRR"], [[n, f"{a:.3f}", f"{b:.3f}"] for n, a, b in r["rows"]]), ""]
        print("\n".join(parts[-4:]), flush=True)
    parts += ["", machine() + " " + amx_line(), "", "Command: .venv/bin/python bench/history_cross_encoder_probe.py "
              + " ".join(f"--repo {p}" for p in opts.repo)]
    write_result(opts.name, "\n".join(parts))


if __name__ == "__main__":
    main()
