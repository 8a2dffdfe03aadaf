"""Build a docstring -> function BEIR collection from this machine's Python standard library.

Why the standard library: the platform must be tuned and measured on code it was never tuned on and that none
of its own tests or dependencies supply; every Python install carries the stdlib, so the collection can be
rebuilt anywhere without downloading anything. Why strip the docstring from the document: the query IS the
docstring's first sentence(s), so a document that still contains it would be found by string match alone.

Layout written under --out (BEIR, readable by `manage.py evaluate --beir`):
  corpus.jsonl        {"_id": qualified name, "title": qualified name, "text": source without its docstring}
  queries.jsonl       {"_id": "q<n>", "text": first sentence(s) of the docstring}
  qrels/train.tsv     70% of the modules (by --seed), one relevant document per query
  qrels/test.tsv      the other 30%: queries of one module are all in one split, so no module leaks across
  collection.json     {"kind": "code", ...}: evaluate ingests it as code chunks (code-aware sparse analysis)

Usage: .venv/bin/python bench/build_code_collection.py --out var/data/stdlib-code [--max-docs 3000] [--seed 15]
       [--root DIR]   another Python source tree instead of the stdlib (e.g. an installed package's folder)
The generated data is never committed (var/ is ignored).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import sysconfig
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: the pairs are the product's
from search.quality.docstring_pairs import Pair, pairs_from_sources

# Test suites and vendored/bundled trees are not "the library": their docstrings describe test cases.
EXCLUDED_DIRS = {"test", "tests", "idle_test", "site-packages", "dist-packages", "__pycache__", "_bundled",
                 "lib2to3", "idlelib", "turtledemo", "__phello__", "config-3.11-x86_64-linux-gnu"}


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def collect(root: Path) -> list[Pair]:
    """Every (docstring, function) pair of the stdlib under root, in a stable order, duplicates of either removed."""
    sources = []
    for path in sorted(root.rglob("*.py")):
        rel_dirs = path.relative_to(root).parts[:-1]
        if any(d in EXCLUDED_DIRS or d.startswith("config-") for d in rel_dirs) or path.name.startswith("test_"):
            continue
        try:
            sources.append((module_name(root, path), path.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError):
            continue
    return pairs_from_sources(sources)


def build(*, out: Path, stdlib: Path, max_docs: int, seed: int, test_share: float) -> dict[str, object]:
    """Write the collection; returns its manifest. Same stdlib + seed + cap -> byte-identical files."""
    pairs = collect(stdlib)
    rng = random.Random(seed)
    if max_docs and len(pairs) > max_docs:
        pairs = sorted(rng.sample(pairs, max_docs), key=lambda p: p.doc_id)
    modules = sorted({p.module for p in pairs})
    random.Random(seed).shuffle(modules)
    n_test = round(len(modules) * test_share)
    test_modules = set(modules[:n_test])
    out.mkdir(parents=True, exist_ok=True)
    (out / "qrels").mkdir(exist_ok=True)
    with (out / "corpus.jsonl").open("w") as corpus, (out / "queries.jsonl").open("w") as queries, \
            (out / "qrels" / "train.tsv").open("w") as train, (out / "qrels" / "test.tsv").open("w") as test:
        for fh in (train, test):
            fh.write("query-id\tcorpus-id\tscore\n")
        for n, p in enumerate(pairs, start=1):
            corpus.write(json.dumps({"_id": p.doc_id, "title": p.doc_id, "text": p.text}) + "\n")
            queries.write(json.dumps({"_id": f"q{n}", "text": p.query}) + "\n")
            (test if p.module in test_modules else train).write(f"q{n}\t{p.doc_id}\t1\n")
    n_test_q = sum(1 for p in pairs if p.module in test_modules)
    source = "python-stdlib" if stdlib == Path(sysconfig.get_paths()["stdlib"]) else stdlib.name
    manifest = {"kind": "code", "source": source, "python": sys.version.split()[0], "stdlib": str(stdlib),
                "seed": seed, "max_docs": max_docs, "documents": len(pairs), "modules": len(modules),
                "test_modules": len(test_modules), "train_queries": len(pairs) - n_test_q, "test_queries": n_test_q}
    (out / "collection.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="var/data/stdlib-code", help="output folder (default var/data/stdlib-code)")
    ap.add_argument("--stdlib", "--root", dest="stdlib", default=sysconfig.get_paths()["stdlib"],
                    help="source folder to build from: a stdlib or a package's (default: this Python's stdlib)")
    ap.add_argument("--max-docs", type=int, default=3000, help="cap on documents (0 = all)")
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--test-share", type=float, default=0.3, help="share of modules in the test split")
    args = ap.parse_args(argv)
    if not 0 < args.test_share < 1:
        ap.error("--test-share must be between 0 and 1")
    manifest = build(out=Path(args.out), stdlib=Path(args.stdlib), max_docs=args.max_docs, seed=args.seed,
                     test_share=args.test_share)
    print(json.dumps(manifest, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
