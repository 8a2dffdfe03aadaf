"""Fusion chosen for a code project without labels: its own docstrings and commit messages are the judged queries.

Why: fusion choice (search.quality.fusion_choice) needs judged queries, and a new tenant has none. A Python code
base carries its own: each documented function's docstring says, in a searcher's words, what the function does,
and the function is the one right answer (search.quality.docstring_pairs). The queries are searched over a copy
of the project's functions with the docstrings removed (otherwise a string match finds them and the choice
favours the sparse leg for a reason real queries do not share), held as an evaluation dataset in project `eval`
(never in the live index; a re-run embeds only what changed) and searched in a throwaway store.

Why commit messages too: docstrings are one kind of query. On encode/httpx the setting they chose (weighted
dense 0.7 / sparse 0.3, +0.016 on held-out docstrings) lost on commit-message queries (bench/bench_code_commits.py,
file recall@10 0.917 -> 0.892): docstrings paraphrase and favour the dense leg, commit messages name identifiers
and favour the sparse one. So where a dataset follows a git source, its history gives a second kind
(search.sources.git.history: message -> the source files the commit modified, walked back from the commit the
dataset holds, in the source's mirror), searched over the project's live datasets (search_store) and judged per
file. Fusion choice's rule then runs with both (fusion_choice.choose_agreed): one pick on the pick halves (each
kind weighing the same), adopted only when the confirm half of every kind with at least `min_queries` queries
shows a gain of at least MIN_GAIN with its 95 % lower bound above zero, never below a single leg. Without a git
source, docstrings decide alone and the reason says so. The evidence says where the queries came from (counts,
each kind's gains and bounds, each source's commit), so the admin shows it.

Why code only: on prose the label-free signals tried here (titles, inverse cloze) disagreed with judged
queries on SciFact (README, "Embedding adaptation without labels"), so a prose project still needs feedback.
Why `manage.py choose_fusion --self-judged` stores its choice only with `--adopt`: label-free queries are still
not the tenant's; the choice is evidence to read before it is applied.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dulwich.repo import Repo

from search.engine.access import accessible_dataset_ids
from search.engine.fusion_settings import kind_default
from search.engine.module_names import module_of
from search.engine.project_ranking import save_fusion
from search.ingest import symbols
from search.models import Chunk, Dataset, Document, Source
from search.quality.docstring_pairs import Pair, pairs_from_sources, unique_pairs
from search.quality.fusion_choice import (
    MIN_GAIN,
    MIN_QUERIES,
    FusionChoice,
    JudgedSet,
    choose,
    choose_agreed,
    run_legs,
)
from search.quality.runs import ingest_beir, search_store, throwaway_index
from search.sources.git import history
from search.sources.git.sync import mirror_path

if TYPE_CHECKING:
    from projects.models import Project

MAX_PAIRS = 1500  # enough for a confident choice; more only costs embedding time
MAX_COMMITS = history.MAX_PAIRS


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


def _code_dataset_ids(project: Project) -> list[int]:
    return list(Dataset.objects.filter(pk__in=accessible_dataset_ids(project, include_global=True), kind="code",
                                       is_evaluation=False).values_list("pk", flat=True))


def project_history(*, project: Project, max_commits: int = MAX_COMMITS
                    ) -> tuple[dict[str, set[tuple[int, str]]], list[dict[str, Any]]]:
    """Commit message -> the files it changed, {(dataset id, path)}, from the git history of the project's code
    datasets that follow a git source (search.sources.git.history), walked back from the commit each dataset
    holds, in its source's mirror; the newest `max_commits` in all. -> (queries, per source: what was read or
    why nothing was). A query text two datasets share is one query with both gold sets."""
    out: dict[str, set[tuple[int, str]]] = {}
    seen: list[dict[str, Any]] = []
    for source in Source.objects.filter(dataset_id__in=_code_dataset_ids(project), type="git").order_by("dataset_id"):
        row: dict[str, Any] = {"dataset": source.dataset_id, "commit": (source.state or {}).get("commit") or None}
        seen.append(row)
        path = mirror_path(source)
        if not row["commit"]:
            row["why"] = "not synced yet"
            continue
        if not (path / "HEAD").is_file():  # the mirror is a cache (another machine's, or wiped): read nothing
            row["why"] = "no mirror of the source on this machine; the next sync makes one"
            continue
        paths = set(Document.objects.filter(dataset_id=source.dataset_id).values_list("path", flat=True))
        skipped: dict[str, int] = {}
        with Repo(str(path), bare=True) as repo:
            pairs = history.history_pairs(repo.object_store, row["commit"],
                                                subdir=source.config.get("subdir", ""), keep=paths.__contains__,
                                                max_pairs=max(0, max_commits - len(out)), skipped=skipped)
        row.update({"commits": len(pairs), "skipped": skipped})
        for p in pairs:
            out.setdefault(p.query, set()).update((source.dataset_id, g) for g in p.gold)
    return out, seen


def _docstring_set(pairs: list[Pair], *, project: Project, progress: bool) -> tuple[JudgedSet, str]:
    """The docstring queries' legs over the project's functions without their docstrings (module docstring)."""
    with tempfile.TemporaryDirectory(prefix="self-judged-") as tmp:
        folder = write_collection(pairs, folder=Path(tmp) / f"self-{project.slug}")
        coll, dataset, _ = ingest_beir(path=folder, progress=progress)
    doc_chunks: dict[str, list[int]] = {}
    for pk, path in Chunk.objects.filter(dataset=dataset).values_list("pk", "path"):
        doc_chunks.setdefault(path, []).append(pk)
    judged: dict[str, dict[Any, int]] = {coll.queries[qid]: {pk: 1 for doc in rels for pk in doc_chunks.get(doc, [])}
                                         for qid, rels in coll.qrels.items()}
    with throwaway_index(dataset_ids=[dataset.pk], kinds=["code"], progress=progress) as (index, _):
        legs = run_legs(queries=sorted(judged), dataset_ids=[dataset.pk], index=index)
    return JudgedSet(legs=legs, judged=judged), dataset.name


def _history_set(history: dict[str, set[tuple[int, str]]], *, project: Project, progress: bool
                 ) -> tuple[JudgedSet, str]:
    """The commit queries' legs over the project's live datasets (a snapshot beside the server: search_store),
    judged per file: a ranking's chunks become their files, each once."""
    dataset_ids = sorted(accessible_dataset_ids(project, include_global=True))
    with search_store(dataset_ids=dataset_ids, progress=progress) as (index, where):
        legs = run_legs(queries=sorted(history), dataset_ids=dataset_ids, index=index)
    ids = {cid for dense, sparse in legs.values() for cid, _ in (*dense, *sparse)}
    to_doc = {pk: (ds, path) for pk, ds, path in Chunk.objects.filter(pk__in=ids).values_list("pk", "dataset_id",
                                                                                              "path")}
    judged: dict[str, dict[Any, int]] = {q: dict.fromkeys(gold, 1) for q, gold in history.items()}
    return JudgedSet(legs=legs, judged=judged, to_doc=to_doc), where


def choose_self_judged(*, project: Project, min_queries: int = MIN_QUERIES, min_gain: float = MIN_GAIN,
                       max_pairs: int = MAX_PAIRS, max_commits: int = MAX_COMMITS, save: bool = True,
                       progress: bool = False) -> FusionChoice:
    """Run fusion choice's rule on the project's own queries (module docstring) and store the result on the
    project (`save`), as `choose_for_project` does with feedback.

    Two kinds of query where the project has them: docstrings (Python functions) and commit messages (the
    history of a dataset's git source). Each kind with at least `min_queries` queries takes part, and a setting
    is adopted only when every kind that takes part confirms it (fusion_choice.choose_agreed): on encode/httpx
    the docstrings alone chose a setting that lost on commit messages. Without a git source (or too few
    qualifying commits) docstrings decide alone, and the reason says so."""
    kinds = set(Dataset.objects.filter(pk__in=accessible_dataset_ids(project, include_global=True))
                .values_list("kind", flat=True))
    baseline = kind_default(kinds)
    pairs = project_pairs(project=project, max_pairs=max_pairs)
    history, sources = project_history(project=project, max_commits=max_commits) if kinds == {"code"} else ({}, [])
    source: dict[str, Any] = {"source": "self-judged", "pairs": len(pairs), "history": len(history),
                              "git_sources": sources, "kinds": sorted(kinds)}
    if not sources:
        alone = "no git source, so docstrings decide alone"
    elif len(history) < min_queries:
        alone = f"{len(history)} qualifying commits in the git history (at least {min_queries}), so docstrings " \
                f"decide alone"
    else:
        alone = ""
    if kinds != {"code"}:
        result = choose(legs={}, judged={}, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        result.reason = ("self-judged queries come from code; this project also searches "
                         f"{', '.join(sorted(kinds - {'code'})) or 'no code'}, so its choice needs feedback")
    elif len(pairs) < min_queries and len(history) < min_queries:
        result = choose(legs={}, judged={}, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        result.reason = (f"{len(pairs)} documented functions; at least {min_queries} are needed" if not sources else
                         f"{len(pairs)} documented functions and {len(history)} qualifying commits; at least "
                         f"{min_queries} of one kind are needed")
    else:
        sets: dict[str, JudgedSet] = {}
        if len(pairs) >= min_queries:
            sets["docstring"], source["evaluation_dataset"] = _docstring_set(pairs, project=project,
                                                                            progress=progress)
        if len(history) >= min_queries:
            sets["history"], source["history_index"] = _history_set(history, project=project, progress=progress)
        result = choose_agreed(sets=sets, min_queries=min_queries, min_gain=min_gain, baseline=baseline)
        if "history" not in sets:
            result.reason += f" ({alone})"
        elif "docstring" not in sets:
            result.reason += f" (commit messages alone: {len(pairs)} documented functions, at least {min_queries})"
    result.evidence.update(source)
    if save:
        save_fusion(project=project, choice=result.as_dict())
    return result
