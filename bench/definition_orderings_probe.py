#!/usr/bin/env python
"""Can another order over the definitions `locate` already ranks find more of the gold in its top 10?

EXPERIMENT ONLY (no app code imports it). Why the question: on the commit benchmark most of the function loss is gold
definitions `locate` does rank, in a file it ranks in its top 5, but at places 11 to 50
(docs/benchmarks/code-localisation.md). An order over those 50 is cheap to study offline: `bench_code_commits.py
--row locate --dump-definitions FILE` writes, per commit, the ranked files and the top 50 definitions with what
speaks for each, and the gold; this script re-orders them and scores recall without running a window again.

Orders (each over the same 50):
- hand-made: the file's rank added to the definition's (`file vote`, the weight w), a method's class listed
  before it when m of its methods are in the first n (`class lift`), at most c definitions of one file in the
  first 10 (`file cap`);
- learned: a logistic regression over each definition's features (its rank, how many of the similar past commits
  changed it, its file's rank and whether that file is first, its length, its kind, whether the task named it, its
  chunks' ranks), trained on the development windows' definitions (gold or not), its score the new order.

Reported, function recall@10 and @5 over the commits with gold definitions:
- each development window scored by an order trained on the other (the learned rows): does it carry across
  windows at all;
- the test windows, pooled, by orders chosen or trained on the development windows, with the paired difference
  from `locate`'s own order and its 95 % interval.

Usage: .venv/bin/python bench/definition_orderings_probe.py --dev DEV1.jsonl --dev DEV2.jsonl \
    --test T1.jsonl [--test T2.jsonl ...]
scikit-learn comes with sentence-transformers (a requirement); the script needs nothing else.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import machine, table, write_result
from bench.bench_code_commits import paired_ci

Commit = dict[str, Any]
FEATURES = ("rank", "changed by a similar past commit", "similar past commits that changed it", "first file",
            "file rank", "length", "class", "method", "named by the task", "chunks", "best chunk rank")
SUBSETS = {"learned, every feature": list(range(len(FEATURES))), "learned, rank and history": [0, 1, 2],
           "learned, rank and length": [0, 5]}


def load(path: str) -> list[Commit]:
    """The locate row's commits that have gold definitions."""
    out = []
    for line in Path(path).read_text().splitlines():
        c = json.loads(line)
        if c["row"] == "locate" and c["gold_fns"]:
            out.append(c)
    return out


def key(d: dict[str, Any]) -> tuple[str, int, int]:
    return d["path"], d["start"], d["end"]


def recall(c: Commit, order: list[dict[str, Any]], k: int) -> float:
    gold = {key(g) for g in c["gold_fns"]}
    return len(gold & {key(d) for d in order[:k]}) / len(gold)


def file_vote(c: Commit, *, w: float, k: int = 10) -> list[dict[str, Any]]:
    file_rank = {f["path"]: i for i, f in enumerate(c["files"])}
    scored = sorted(enumerate(c["defs"]), key=lambda t: (-(1 / (k + t[0] + 1)
                                                            + w / (k + file_rank.get(t[1]["path"], 99) + 1)), t[0]))
    return [d for _, d in scored]


def class_lift(c: Commit, *, m: int, n: int) -> list[dict[str, Any]]:
    defs = c["defs"]
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for d in defs[:n]:
        if d["owner"] and d["owner_span"]:
            counts[(d["path"], d["owner"])] += 1
    out, seen = [], set()
    for d in defs:
        owner = (d["path"], d["owner"])
        if counts.get(owner, 0) >= m:
            cls = {"path": d["path"], "start": d["owner_span"][0], "end": d["owner_span"][1]}
            if key(cls) not in seen:
                seen.add(key(cls))
                out.append(cls)
        if key(d) not in seen:
            seen.add(key(d))
            out.append(d)
    return out


def file_cap(c: Commit, *, cap: int) -> list[dict[str, Any]]:
    first, rest, per = [], [], defaultdict(int)
    for d in c["defs"]:
        if len(first) < 10 and per[d["path"]] < cap:
            first.append(d)
            per[d["path"]] += 1
        else:
            rest.append(d)
    return first + rest


def features(c: Commit) -> np.ndarray:
    file_rank = {f["path"]: i for i, f in enumerate(c["files"])}
    rows = []
    for i, d in enumerate(c["defs"]):
        fr = file_rank.get(d["path"], 60)
        best = min(d["ranks"]) if d["ranks"] else 200
        rows.append([10 / (11 + i), float(d["history"] > 0), min(d["history"], 5) / 5, float(fr == 0), 10 / (11 + fr),
                     math.log(max(d["end"] - d["start"] + 1, 1)) / 5, float(d["kind"] == "class"),
                     float(d["kind"] == "method"), float(d["named"]), min(len(d["ranks"]), 5) / 5, 10 / (10 + best)])
    return np.array(rows)


def train(commits: list[Commit], cols: list[int]) -> LogisticRegression:
    x = np.vstack([features(c)[:, cols] for c in commits])
    y = np.array([key(d) in {key(g) for g in c["gold_fns"]} for c in commits for d in c["defs"]])
    return LogisticRegression(C=1.0, max_iter=2000).fit(x, y)


def learned(model: LogisticRegression, cols: list[int]) -> Callable[[Commit], list[dict[str, Any]]]:
    def order(c: Commit) -> list[dict[str, Any]]:
        s = model.decision_function(features(c)[:, cols])
        return [c["defs"][i] for i in sorted(range(len(c["defs"])), key=lambda i: (-s[i], i))]
    return order


def hand_orders() -> dict[str, Callable[[Commit], list[dict[str, Any]]]]:
    out: dict[str, Callable[[Commit], list[dict[str, Any]]]] = {"locate's order": lambda c: c["defs"]}
    for w in (0.5, 1.0, 2.0):
        out[f"file vote, w {w:g}"] = lambda c, w=w: file_vote(c, w=w)
    out["class lift, 2 of the first 10"] = lambda c: class_lift(c, m=2, n=10)
    for cap in (4, 5):
        out[f"file cap {cap}"] = lambda c, cap=cap: file_cap(c, cap=cap)
    return out


def scored(commits: list[Commit], orders: dict[str, Callable[[Commit], list[dict[str, Any]]]]) -> list[dict]:
    """Per commit, each order's recall, shaped for bench_code_commits.paired_ci."""
    out = []
    for c in commits:
        rows = {}
        for name, order in orders.items():
            ranked = order(c)
            rows[name] = {"fn_r10": recall(c, ranked, 10), "fn_r5": recall(c, ranked, 5)}
        out.append({"rows": rows})
    return out


def result_rows(per: list[dict], orders: list[str]) -> list[list[object]]:
    rows = []
    for name in orders:
        r10 = statistics.fmean(c["rows"][name]["fn_r10"] for c in per)
        r5 = statistics.fmean(c["rows"][name]["fn_r5"] for c in per)
        d = paired_ci(per, name, "locate's order", "fn_r10")
        rows.append([name, f"{r5:.3f}", f"{r10:.3f}", "—" if name == "locate's order" or d is None
                     else f"{d[0]:+.3f} ({d[1]:+.3f} to {d[2]:+.3f})"])
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dev", action="append", required=True, help="a development window's dump (JSONL; repeatable)")
    ap.add_argument("--test", action="append", default=[], help="a test window's dump (JSONL; repeatable)")
    ap.add_argument("--name", default="definition_orderings_probe")
    opts = ap.parse_args()
    dev = [load(p) for p in opts.dev]
    test = [c for p in opts.test for c in load(p)]
    headers = ["order", "function R@5", "function R@10", "R@10 − locate's order (95 % interval)"]
    parts = ["### Orders over locate's top 50 definitions", ""]
    if len(dev) > 1:
        for i, window in enumerate(dev):
            rest = [c for j, w in enumerate(dev) if j != i for c in w]
            orders = {"locate's order": lambda c: c["defs"]}
            orders |= {name: learned(train(rest, cols), cols) for name, cols in SUBSETS.items()}
            parts += [f"Development window {Path(opts.dev[i]).name} ({len(window)} commits), learned on the other:", "",
                      table(headers, result_rows(scored(window, orders), list(orders))), ""]
    everything = [c for w in dev for c in w]
    orders = hand_orders() | {name: learned(train(everything, cols), cols) for name, cols in SUBSETS.items()}
    for label, commits in (("development windows pooled (the learned rows in-sample)", everything),
                           ("test windows pooled", test)):
        if commits:
            parts += [f"The {label}, {len(commits)} commits:", "",
                      table(headers, result_rows(scored(commits, orders), list(orders))), ""]
    coef = train(everything, SUBSETS["learned, every feature"]).coef_[0]
    parts += ["Weights of the learned order with every feature (trained on the development windows): "
              + ", ".join(f"{f} {w:+.2f}" for f, w in zip(FEATURES, coef, strict=True)) + ".", "",
              "Reproduce: `.venv/bin/python bench/definition_orderings_probe.py "
              + " ".join(f"--dev {Path(p).name}" for p in opts.dev) + " "
              + " ".join(f"--test {Path(p).name}" for p in opts.test) + "`, each dump one window of "
              "`.venv/bin/python bench/bench_code_commits.py --repo CLICK --repo HTTPX --repo SEABORN --commits 15 "
              "--adapt off --no-self-judged --no-graph --row locate --skip-newest N --dump-definitions wN.jsonl` "
              "(5 to 6 minutes each).", "", machine()]
    write_result(opts.name, "\n".join(parts))


if __name__ == "__main__":
    main()
