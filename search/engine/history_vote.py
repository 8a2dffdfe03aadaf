"""Which files did changes like this one touch before? The past commits whose messages read most like a task vote
for the files they changed, and `locate` merges that vote with the chunks' ranking.

Why: a repository's history already answers "where do I change this?" for every task it has done, in its own
words. Read through the embedding of commit messages, the nearest past commits name the files of a later
commit's change about as often as the chunk ranking does, and the two miss different ones: on the newest 15
commits each of click, httpx and seaborn (each asked at its parent, with the memory its history held then), the
vote alone ranked 0.80 of the gold files in its top 10 and the chunks 0.79 (docs/benchmarks/code-localisation.md).
The vote is weak for functions (a commit often changes a function no past commit did): `locate` lets it rank files
only (search.engine.locate.Ranking: where it also reached the definitions, function recall fell on the commits the
constants are chosen on).

How the two are merged: reciprocal ranks, each ranking's `1 / (RANK_K + rank)`, the vote's times WEIGHT. Ranks,
not scores: chunk scores come from a fusion or a reranker, votes are sums of cosines, and neither scale means
anything to the other. RANK_K and WEIGHT were chosen on the 15 commits of each repository before the measured
ones (bench/bench_code_commits.py --history-sweep), never on the commits reported.

The memory holds only commits up to the commit each dataset is synced at (search.sources.git.commit_memory), so
the vote never sees the future of the tree it ranks; only the searched datasets' memory votes (access and the
request's dataset filter already applied), and only files among the ranked candidates are lifted, so a path, lang
or repo filter holds for the vote as for the chunks.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pgvector.django import CosineDistance

from inference.encoders import dense_model_id, embed_query
from search.engine.index_schema import IndexFilter
from search.models import CommitMemory, Document

VOTERS = 20    # the most similar past commits that vote
RANK_K = 10    # the reciprocal-rank constant of both rankings
WEIGHT = 0.5   # the vote's ranks against the chunks' ranks
MAX_PER_FILE = 3  # past commits listed as a file's evidence

T = TypeVar("T")
F = TypeVar("F", bound=Hashable)


@dataclass(frozen=True)
class PastCommit:
    """A remembered commit that votes: how like the task its message reads (cosine) and the files it changed."""

    dataset_id: int
    sha: str
    subject: str
    similarity: float
    files: tuple[str, ...]
    functions: tuple[tuple[str, str], ...] = ()  # (path, qualname) of the definitions it changed

    def as_dict(self) -> dict[str, object]:
        return {"sha": self.sha, "subject": self.subject, "similarity": round(self.similarity, 4),
                "files": list(self.files), "functions": [f"{p}:{q}" for p, q in self.functions]}


def similar_commits(*, dataset_ids: Sequence[int], task: str, voters: int = VOTERS) -> list[PastCommit]:
    """The `voters` remembered commits of `dataset_ids` whose message embeds nearest the task, nearest first (an
    exact scan of those datasets' rows: a memory holds a thousand commits per dataset at most)."""
    if not dataset_ids or voters <= 0:
        return []
    model_id = dense_model_id()
    rows = CommitMemory.objects.filter(dataset_id__in=list(dataset_ids), model_id=model_id)
    if not rows.exists():
        return []
    vector = embed_query(task).tolist()
    found = rows.annotate(distance=CosineDistance("embedding", vector)).order_by("distance", "-pk") \
        .values_list("dataset_id", "sha", "subject", "distance", "files", "functions")[:voters]
    return [PastCommit(dataset_id=d, sha=sha, subject=subject, similarity=1.0 - float(distance), files=tuple(files),
                       functions=tuple((p, q) for p, q in functions or ()))
            for d, sha, subject, distance, files, functions in found]


def file_votes(commits: Sequence[PastCommit]) -> dict[tuple[int, str], float]:
    """(dataset id, path) -> the summed similarity of the voting commits that changed it."""
    votes: dict[tuple[int, str], float] = {}
    for c in commits:
        for path in c.files:
            votes[(c.dataset_id, path)] = votes.get((c.dataset_id, path), 0.0) + max(c.similarity, 0.0)
    return votes


def voted_documents(*, votes: dict[tuple[int, str], float], flt: IndexFilter,
                    exclude: set[tuple[int, str]]) -> list[dict[str, object]]:
    """The voted files not in `exclude` that the searched datasets hold and the query's filter admits (its
    repositories, languages, path prefix and paths), most voted first: files no chunk of the query reached."""
    wanted = {key for key in votes if key not in exclude and key[0] in set(flt.dataset_ids)}
    if not wanted or not flt.reads_code:
        return []
    docs = flt.admit(Document.objects.filter(dataset_id__in=sorted({d for d, _ in wanted}),
                                             path__in=sorted({p for _, p in wanted})))
    found = [{"dataset_id": d, "document_id": pk, "path": p, "repo": repo, "lang": lang}
             for d, pk, p, repo, lang in docs.values_list("dataset_id", "pk", "path", "repo", "lang")
             if (d, p) in wanted]
    return sorted(found, key=lambda f: (-votes[(f["dataset_id"], f["path"])], f["path"]))


def evidence(commits: Sequence[PastCommit], *, dataset_id: int, path: str,
             qualname: str | None = None) -> list[dict[str, object]]:
    """The voting commits that changed the file (with `qualname`: that definition in it), most similar first (at
    most MAX_PER_FILE)."""
    return [{"sha": c.sha, "subject": c.subject, "similarity": round(c.similarity, 4)}
            for c in commits if c.dataset_id == dataset_id and (
                path in c.files if qualname is None else (path, qualname) in c.functions)][:MAX_PER_FILE]


def vote_ranks(votes: dict[F, float]) -> dict[F, int]:
    """Each voted key's rank from 1, most voted first (ties in the order the votes were summed)."""
    return {f: i + 1 for i, f in enumerate(sorted(votes, key=lambda f: -votes[f]))}


def merge(*, ranked: Sequence[T], file_of: Callable[[T], F], votes: dict[F, float], rank_k: float = RANK_K,
          weight: float = WEIGHT) -> list[tuple[T, float]]:
    """`ranked` (best first) re-ranked by `1/(rank_k + rank) + weight/(rank_k + vote rank of its file)`, ranks
    from 1; an item whose file no commit voted for keeps its own term only. Ties keep the given order. With no
    votes (or weight 0) the order is unchanged."""
    vote_rank = vote_ranks(votes)
    scored = []
    for i, item in enumerate(ranked):
        score = 1.0 / (rank_k + i + 1)
        at = vote_rank.get(file_of(item))
        if at is not None:
            score += weight / (rank_k + at)
        scored.append((i, item, score))
    scored.sort(key=lambda t: (-t[2], t[0]))
    return [(item, score) for _, item, score in scored]
