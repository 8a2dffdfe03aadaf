"""Which file aggregation should `locate` use? Judged on real commits, as bench/bench_code_commits.py judges search.

The same commits, gold files and gold functions as that benchmark (its functions, imported: commit selection by
the product's rules, one git source synced through the product to each commit's parent, gold functions the
innermost Symbol rows the old-side diff touches). Per commit the query pipeline runs once (`STAGES`, the commit
message as the task, candidates 100, no logging), then `search.engine.locate` regroups the same candidates three
ways: max, the sum of the top 3, and the reciprocal-rank sum. Files: recall@5/@10 over the gold files. Functions:
recall@10 over the gold functions, a gold function found when one of locate's top 10 definitions is it (same file,
same span), and, as the baseline, when one of the top 10 *chunks* overlaps it (the commit benchmark's measure).

    nice -n 5 .venv/bin/python bench/bench_locate.py --repo /work/.mirror/pallets+click/repo --commits 10
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, setup_django, table, write_result
from bench.bench_code_commits import (
    BRANCH,
    CANDIDATES,
    FN_K,
    git_dir,
    gold_functions,
    overlaps,
    repo_label,
    select_commits,
    sync_to,
)


def measure(*, project: Any, query: str, gold_files: list[str], gold_fns: list[dict[str, Any]]) -> dict[str, Any]:
    from search.engine.aggregation import AGGREGATIONS
    from search.engine.locate import Ranking, rank_definitions, rank_files
    from search.engine.pipeline import QuerySpec, execute

    run = execute(spec=QuerySpec(q=query, top_k=FN_K, candidates=CANDIDATES, graph=False, log=False),
                  project=project)
    cands = [c for c in run.cands if c.chunk is not None]
    gold = set(gold_files)
    out: dict[str, Any] = {}
    spans10 = [(c.chunk.path, c.chunk.start_line, c.chunk.end_line) for c in cands[:FN_K]]
    out["chunks"] = {"fn_r10": (sum(any(overlaps(sp, f) for sp in spans10) for f in gold_fns) / len(gold_fns))
                     if gold_fns else None}
    for method in AGGREGATIONS:
        files = [f["path"] for f in rank_files(cands=cands, top=10, ranking=Ranking(aggregation=method))]
        defs = {(d.path, d.start_line, d.end_line)
                for d, _, _ in rank_definitions(cands=cands, top=FN_K, ranking=Ranking(aggregation=method))}
        out[method] = {"file_r5": len(gold & set(files[:5])) / len(gold),
                       "file_r10": len(gold & set(files[:10])) / len(gold),
                       "fn_r10": (sum((f["path"], f["start_line"], f["end_line"]) in defs for f in gold_fns)
                                  / len(gold_fns)) if gold_fns else None}
    return out


def bench_repo(*, path: Path, n: int, tmp: Path, parsed_langs: set[str]) -> list[dict[str, Any]]:
    from projects.models import Project
    from search.models import Dataset, Document
    from search.sources.spec import SourceSpec
    from search.sources.sync import set_source

    label = repo_label(path)
    name = label.rsplit("/", 1)[-1]
    commits, _ = select_commits(path, n=n, parsed_langs=parsed_langs)
    clone = tmp / f"{name}.git"
    subprocess.run(["git", "clone", "--bare", "--quiet", str(path), str(clone)], check=True)
    project = Project.objects.create(slug=f"bench-locate-{name}"[:50], name=f"Bench locate {label}")
    dataset = Dataset.objects.create(project=project, name=name, kind="code")
    set_source(user=None, dataset=dataset, interval_s=None,
               spec=SourceSpec(type="git", config={"url": clone.as_uri(), "ref": BRANCH, "subdir": ""}, local=True))
    out = []
    for i, c in enumerate(commits, start=1):
        t = time.perf_counter()
        sync_to(dataset=dataset, clone=clone, sha=c.parent)
        indexed = set(Document.objects.filter(dataset=dataset, path__in=c.gold_files).values_list("path", flat=True))
        gold_files = [p for p in c.gold_files if p in indexed]
        if not gold_files:
            continue
        c.old_lines = {p: r for p, r in c.old_lines.items() if p in indexed}
        fns = gold_functions(dataset, c)
        out.append({"repo": label, "sha": c.sha, "rows": measure(project=project, query=c.query,
                                                                 gold_files=gold_files, gold_fns=fns)})
        print(f"{label} {i}/{len(commits)} {c.sha[:10]} ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
    return out


def summary(per_commit: list[dict[str, Any]]) -> str:
    rows = []
    for method in ("max", "top3", "rrf"):
        outs = [c["rows"][method] for c in per_commit]
        fns = [o["fn_r10"] for o in outs if o["fn_r10"] is not None]
        rows.append([method, statistics.fmean(o["file_r5"] for o in outs), statistics.fmean(o["file_r10"] for o in outs),
                     statistics.fmean(fns) if fns else "—", len(fns)])
    base = [c["rows"]["chunks"]["fn_r10"] for c in per_commit if c["rows"]["chunks"]["fn_r10"] is not None]
    rows.append(["(top-10 chunks overlap)", "—", "—", statistics.fmean(base) if base else "—", len(base)])
    return table(["aggregation", "file R@5", "file R@10", "function R@10", "commits with gold functions"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", action="append", required=True, help="a local git directory (repeatable)")
    ap.add_argument("--commits", type=int, default=10, help="newest qualifying commits per repository")
    ap.add_argument("--name", default="locate", help="results file name under bench/results/")
    opts = ap.parse_args()
    t0 = time.perf_counter()
    setup_django()
    from django.conf import settings

    from search.ingest.syntax import GRAMMARS

    tmp = Path(tempfile.mkdtemp(prefix="bench-locate-"))
    settings.SOURCES_GIT_DIR = tmp / "mirrors"
    try:
        per_commit = [c for p in opts.repo for c in bench_repo(path=git_dir(p), n=opts.commits, tmp=tmp,
                                                               parsed_langs={"python", *GRAMMARS})]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    repos = sorted({c["repo"] for c in per_commit})
    text = "\n".join([
        "# Locate: file and function aggregation judged on real commits", "",
        f"{len(per_commit)} commits of {', '.join(repos)} (the newest {opts.commits} qualifying per repository, the "
        "commit benchmark's rules); the commit message is the task; one ranking per commit (STAGES, candidates "
        f"{CANDIDATES}), regrouped by each aggregation. Function R@10: a gold function is one of locate's top 10 "
        "definitions; the last row is the commit benchmark's measure (a top-10 chunk overlaps it). A small sample: "
        "differences of a few points are within noise.", "",
        summary(per_commit), "",
        f"Whole run {(time.perf_counter() - t0) / 60:.1f} min.", "",
        f"`nice -n 5 .venv/bin/python bench/bench_locate.py --commits {opts.commits}"
        + "".join(f" --repo {p}" for p in opts.repo) + "`", "", machine()])
    write_result(opts.name, text)


if __name__ == "__main__":
    main()
