#!/usr/bin/env python
"""Does the bi-encoder rank a file's definitions better by their best short window than by their head?

EXPERIMENT ONLY (no app code imports it); it is the measurement the window look (search.engine.definition_windows)
was built on. Why the question: the dense model reads at most 256 wordpieces, about 25 lines of code, while a chunk
holds up to 80 lines, and the definitions a change touches are long, so the dense leg may never read the lines a
change is about.

Method, per repository, newest first:
- the qualifying commits (the product's rules, search/sources/git/history.py) from the `--from`-th to the `--to`-th
  newest (the development window, 16th to 30th, by default);
- for each commit, every function, method and class of its changed files at its parent, and the gold: those the
  change touched (changed_definitions, the benchmark's rule);
- scored by the cosine of the message with: the head (the path and the definition's first 80 lines, which the
  model cuts at 256 wordpieces, as it cuts a chunk), and the best window of `--window` lines (half overlapping,
  each headed by the path and the qualified name; a class read whole here, its methods included);
- recall@3 and @5 of the gold, and the reciprocal rank of the first gold, means over commits; the last row pools
  the repositories.

Usage: .venv/bin/python bench/definition_windows_probe.py --repo /work/.mirror/pallets+click/repo \
    --repo /work/.mirror/encode+httpx/repo --repo /work/.mirror/mwaskom+seaborn/repo [--from 30 --to 75]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import amx_line, machine, setup_django, table, write_result
from bench.history_cross_encoder_probe import commit_definitions, ranks

HEAD_LINES = 80
# The product's modules are imported inside the functions: they reach the Django models, so they load only after
# setup_django() (as in bench_code_commits.py); torch and sentence-transformers load there too, being slow to import.


def measure(tests: list[tuple[str, list[dict[str, Any]]]], score: Callable[..., list[float]]) -> list[float]:
    r3, r5, rr = [], [], []
    for q, defs in tests:
        at = ranks(score(q, defs))
        gold = [i for i, d in enumerate(defs) if d["gold"]]
        r3.append(sum(1 for i in gold if at[i] < 3) / len(gold))
        r5.append(sum(1 for i in gold if at[i] < 5) / len(gold))
        rr.append(1 / (1 + min(at[i] for i in gold)))
    return [statistics.fmean(r3), statistics.fmean(r5), statistics.fmean(rr)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", required=True, help="a local git directory (repeatable)")
    ap.add_argument("--from", dest="lo", type=int, default=15, help="leave out this many newest qualifying commits")
    ap.add_argument("--to", dest="hi", type=int, default=30, help="... and measure up to this many newest")
    ap.add_argument("--window", type=int, default=24, help="lines per window")
    ap.add_argument("--name", default="definition_windows_probe")
    opts = ap.parse_args()
    setup_django()
    from dulwich.repo import Repo
    from sentence_transformers import SentenceTransformer

    from inference.encoders import resolve_model
    from search.sources.git.history import Walk, history_pairs

    _, base = resolve_model()
    model = SentenceTransformer(base, device="cpu")
    cache: dict[str, Any] = {}

    def encode(texts: list[str]) -> list[Any]:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        cache.update(zip(missing, model.encode(missing, normalize_embeddings=True, batch_size=64), strict=True))
        return [cache[t] for t in texts]

    def head(q: str, defs: list[dict[str, Any]]) -> list[float]:
        e = encode([q] + [d["path"] + "\n" + "\n".join(d["body"][:HEAD_LINES]) for d in defs])
        return [float(x @ e[0]) for x in e[1:]]

    def windowed(q: str, defs: list[dict[str, Any]]) -> list[float]:
        qe, step, out = encode([q])[0], max(1, opts.window // 2), []
        for d in defs:
            b = d["body"]
            ws = [f"{d['path']} {d['qualname']}\n" + "\n".join(b[i:i + opts.window])
                  for i in range(0, max(1, len(b) - opts.window + step), step)]
            out.append(max(float(x @ qe) for x in encode(ws)))
        return out

    parts = [f"# The best {opts.window}-line window against the head, inside the changed files", "",
             f"Commits: the qualifying commits {opts.lo + 1} to {opts.hi}, newest first, of each repository. Ranked: "
             "every function, method and class of the commit's changed files at its parent, by the cosine of the "
             "message (all-MiniLM-L6-v2) with the head (the path and the first 80 lines, cut at 256 wordpieces) or "
             f"with the best window of {opts.window} lines; gold: the definitions the change touched. Means over "
             "commits. Method: the script's docstring.", ""]
    rows, pooled = [], []
    for path in opts.repo:
        repo = Repo(path)
        pairs = history_pairs(repo.object_store, repo.head(), max_pairs=opts.hi, walk=Walk(max_walk=20000))
        tests = [(p.query, commit_definitions(repo.object_store, p.sha, p.gold)) for p in pairs[opts.lo:opts.hi]]
        tests = [t for t in tests if any(d["gold"] for d in t[1])]
        pooled += tests
        name = Path(path).parent.name.replace("+", "/")
        rows += [[f"{name} ({len(tests)} commits), {label}", *(f"{x:.3f}" for x in measure(tests, fn))]
                 for label, fn in (("head", head), (f"best {opts.window}-line window", windowed))]
        print(rows[-2], rows[-1], flush=True)
    rows += [[f"pooled ({len(pooled)} commits), {label}", *(f"**{x:.3f}**" for x in measure(pooled, fn))]
             for label, fn in (("head", head), (f"best {opts.window}-line window", windowed))]
    parts += [table(["definitions ranked by", "recall@3", "recall@5", "MRR"], rows), "",
              machine() + " " + amx_line(), "", "Command: .venv/bin/python bench/definition_windows_probe.py "
              + " ".join(f"--repo {p}" for p in opts.repo) + f" --from {opts.lo} --to {opts.hi} --window {opts.window}"
              + f" --name {opts.name}"]
    write_result(opts.name, "\n".join(parts))


if __name__ == "__main__":
    main()
