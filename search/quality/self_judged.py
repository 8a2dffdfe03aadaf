"""Fusion chosen for a code project without labels: its own docstrings are the judged queries.

Why: fusion choice (search.quality.fusion_choice) needs judged queries, and a new tenant has none. A Python code
base carries its own: each documented function's docstring says, in a searcher's words, what the function does,
and the function is the one right answer (search.quality.docstring_pairs). The queries are searched over a copy
of the project's functions with the docstrings removed (otherwise a string match finds them and the choice
favours the sparse leg for a reason real queries do not share), held as an evaluation dataset in project `eval`
(never in the live index; a re-run embeds only what changed) and searched in a throwaway store. Then fusion
choice's own rule decides, against the project's kind default: a pick half and a confirm half, a gain of at
least MIN_GAIN with its 95 % lower bound above zero, and never below a single leg. The evidence says where the
queries came from, so the admin shows it.

Why code only: on prose the label-free signals tried here (titles, inverse cloze) disagreed with judged
queries on SciFact (README, "Embedding adaptation without labels"), so a prose project still needs feedback.
Why `manage.py choose_fusion --self-judged` stores its choice only with `--adopt`: docstrings are one kind of
query; on encode/httpx the setting they chose lost on commit-message queries (bench/bench_code_commits.py).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from projects.access import accessible_dataset_ids
from projects.models import Dataset
from search.engine.code_graph import module_of
from search.engine.fusion_settings import kind_default
from search.ingest import symbols
from search.models import Chunk, Document
from search.quality.docstring_pairs import Pair, pairs_from_sources, unique_pairs
from search.quality.fusion_choice import MIN_GAIN, MIN_QUERIES, FusionChoice, choose, run_legs
from search.quality.runs import ingest_beir, throwaway_index

if TYPE_CHECKING:
    from projects.models import Project

MAX_PAIRS = 1500  # enough for a confident choice; more only costs embedding time


def project_pairs(*, project: Project, max_pairs: int = MAX_PAIRS) -> list[Pair]:
    """The docstring -> function pairs of the Python files in the code datasets the project searches (its own,
    shared and global), each file's text rebuilt from its chunks; the first `max_pairs` in dataset/path order."""
    ids = Dataset.objects.filter(pk__in=accessible_dataset_ids(project, include_global=True), kind="code",
                                 is_evaluation=False).values_list("pk", flat=True)
    docs = list(Document.objects.filter(dataset_id__in=list(ids), lang="python").order_by("dataset_id", "path")
                .values_list("pk", "path"))
    pairs: list[Pair] = []
    for doc_id, path in docs:
        spans = Chunk.objects.filter(document_id=doc_id).order_by("start_line").values_list(
            "start_line", "end_line", "text")
        pairs += pairs_from_sources([(module_of(path), symbols.indexed_text(spans))])
        if len(pairs) >= 2 * max_pairs:  # enough left after duplicates are dropped
            break
    return unique_pairs(pairs)[:max_pairs]


def write_collection(pairs: list[Pair], *, folder: Path) -> Path:
    """The pairs as a BEIR code collection (every query in the test split), readable by `load_beir`."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w") as corpus, (folder / "queries.jsonl").open("w") as queries, \
            (folder / "qrels" / "test.tsv").open("w") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for n, p in enumerate(pairs, start=1):
            corpus.write(json.dumps({"_id": p.doc_id, "title": p.doc_id, "text": p.text}) + "\n")
            queries.write(json.dumps({"_id": f"q{n}", "text": p.query}) + "\n")
            qrels.write(f"q{n}\t{p.doc_id}\t1\n")
    (folder / "collection.json").write_text(json.dumps({"kind": "code", "source": "self-judged"}) + "\n")
    return folder


def choose_self_judged(*, project: Project, min_queries: int = MIN_QUERIES, min_gain: float = MIN_GAIN,
                       max_pairs: int = MAX_PAIRS, save: bool = True, progress: bool = False) -> FusionChoice:
    """Run fusion choice's rule on the project's own docstring queries (module docstring) and store the result on
    the project (`save`), as `choose_for_project` does with feedback."""
    kinds = set(Dataset.objects.filter(pk__in=accessible_dataset_ids(project, include_global=True))
                .values_list("kind", flat=True))
    baseline = kind_default(kinds)
    pairs = project_pairs(project=project, max_pairs=max_pairs)
    source = {"source": "self-judged", "pairs": len(pairs), "kinds": sorted(kinds)}
    if kinds != {"code"}:
        result = choose(legs={}, judged={}, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        result.reason = ("self-judged queries come from code; this project also searches "
                         f"{', '.join(sorted(kinds - {'code'})) or 'no code'}, so its choice needs feedback")
    elif len(pairs) < min_queries:
        result = choose(legs={}, judged={}, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        result.reason = f"{len(pairs)} documented functions; at least {min_queries} are needed"
    else:
        with tempfile.TemporaryDirectory(prefix="self-judged-") as tmp:
            folder = write_collection(pairs, folder=Path(tmp) / f"self-{project.slug}")
            coll, dataset, _ = ingest_beir(path=folder, progress=progress)
        doc_chunks: dict[str, list[int]] = {}
        for pk, path in Chunk.objects.filter(dataset=dataset).values_list("pk", "path"):
            doc_chunks.setdefault(path, []).append(pk)
        judged = {coll.queries[qid]: {pk: 1 for doc in rels for pk in doc_chunks.get(doc, [])}
                  for qid, rels in coll.qrels.items()}
        with throwaway_index(dataset_ids=[dataset.pk], kinds=["code"], progress=progress) as (index, _):
            legs = run_legs(queries=sorted(judged), dataset_ids=[dataset.pk], index=index)
        result = choose(legs=legs, judged=judged, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        source["evaluation_dataset"] = dataset.name
    result.evidence.update(source)
    if save:
        type(project).objects.filter(pk=project.pk).update(fusion=result.as_dict())
        project.fusion = result.as_dict()
    return result
