"""`make bench`: every benchmark that needs nothing from outside this checkout, in turn, each in its own process
with private services; the catalogue below says what each of the others needs and how to get it.

Why sequential: the figures are latencies and throughputs on a small machine; two benches at once would
measure each other. Each script writes bench/results/<name>.md, indexed in docs/reference/benchmark-results.md
(generated from this catalogue and the results). Pass script names (with arguments, quoted) to run a subset:
`.venv/bin/python bench/run_all.py bench_load.py 'bench_context.py --chunks 4000'`. The 100k context run alone
takes about 20 minutes on 2 cores.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCIFACT = "the SciFact BEIR collection (corpus, queries, qrels; public) at ../shared/data/scifact, or --beir PATH"
SRD = "the SRD 5.1 Markdown (CC-BY-4.0, public) at ../shared/data/srd51"
MANUALS = ("Debian's R and Debian Reference manuals: `apt-get download r-doc-pdf r-doc-html debian-reference-en` "
           "and `dpkg -x` (the script's docstring has the commands)")
# script (with arguments) -> what it needs from outside this checkout ("" : nothing; `make bench` runs it)
CATALOGUE: dict[str, str] = {
    "bench_embedding.py": "",
    "bench_context.py": "",
    "bench_context.py --chunks 100000": "",
    "bench_query_during_ingest.py": "",
    "bench_ingest_pipeline.py": "",
    "bench_people.py": "",
    "bench_people_relaxation.py": "",
    "bench_people_quality.py": "",
    "bench_load.py": "",
    "bench_health.py": "",
    "bench_archives.py": "",
    "bench_crawl.py": "",
    "bench_git_sync.py": "",
    "bench_code_tools.py": "",
    "bench_encoder_device.py": "",
    "bench_hostile_code_tools.py": "",
    "bench_hostile_web.py": "",
    "bench_hostile_formats.py": "",
    "bench_hostile_git.py": "",
    "bench_hostile_jobs.py": "",
    "bench_hostile_accounts.py": "",
    "bench_hostile_tenants.py": "",
    "fuzz_api.py": "",
    "fuzz_inputs.py": "",
    "access_property.py": "",
    "bench_eval.py": SCIFACT,
    "bench_isolation.py": SCIFACT,
    "bench_reranker.py": SCIFACT,
    "rerank_curve.py": SCIFACT + ", and a reranker trained by bench_reranker.py",
    "adapt_probe.py": SCIFACT,
    "sparse_analyzers.py": SCIFACT + ", or a collection from build_code_collection.py",
    "tune_fusion.py": SCIFACT + ", and the code collections build_code_collection.py writes",
    "build_code_collection.py": "nothing but this machine's Python standard library; it builds a collection "
                                "(not a benchmark) for evaluate, tune_fusion.py and sparse_analyzers.py",
    "bench_code_commits.py": "public git repositories (click, httpx, ...), fetched over the network once",
    "history_cross_encoder_probe.py": "public git repositories, as bench_code_commits.py fetches them (network, once)",
    "definition_windows_probe.py": "public git repositories, as bench_code_commits.py fetches them (network, once)",
    "definition_orderings_probe.py": "the JSONL dumps bench_code_commits.py --dump-definitions writes (one per "
                                     "window of commits)",
    "bench_web_reader.py": "Debian's python3-doc (`apt-get install python3-doc`), served on 127.0.0.1",
    "typeset_srd.py": SRD + "; it writes the SRD as a printed PDF for bench_srd_pdf.py",
    "bench_srd_pdf.py": SRD + ", typeset by typeset_srd.py",
    "typeset_demo_pdf.py": "nothing but reportlab; it typesets the demo's PDF rulebook (committed under "
                           "search/rules/demo_rules/roads-and-rest), not a benchmark",
    "bench_pdf_manuals.py": MANUALS,
    "bench_pdf_speed.py": MANUALS + ", and the SRD PDF from typeset_srd.py",
    "bench_hostile_pdfs.py": "",
    "bench_pdf_readers.py": SRD + " typeset by typeset_srd.py, and " + MANUALS + "; pdfminer.six and pypdf are "
                            "measured only where installed",
    "adoption_classifier.py": "code collections build_code_collection.py writes (the stdlib, networkx and sympy "
                              "source trees), and about half an hour of CPU per collection",
    "bench_locate.py": "the public click repository fetched as bench_code_commits.py fetches it (network, once)",
    "latency_probe.py": "nothing; bench_context.py --against REV runs it in each checkout (not run alone)",
}
SCRIPTS = [entry for entry, needs in CATALOGUE.items() if not needs]


def main() -> int:
    wanted = sys.argv[1:] or SCRIPTS
    failed = []
    for entry in wanted:
        name, *args = entry.split()
        path = HERE / name
        if not path.exists():
            print(f"== {name}: missing, skipped", flush=True)
            failed.append(name)
            continue
        print(f"== {entry}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(path), *args], cwd=HERE.parent)
        print(f"== {entry}: exit {rc} after {time.perf_counter() - t0:.0f} s", flush=True)
        if rc:
            failed.append(entry)
    if failed:
        print("failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
