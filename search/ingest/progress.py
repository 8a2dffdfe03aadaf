"""How far a job is and how fast it goes: the tqdm bar fed by the runner's per-file callback (the ingest command,
`sync` and the demo loader share it), a job's measured rate and time to finish, and the demo ingest's expected time.

Why rate and ETA are computed on read from the job's stored counters and timestamps: a reader (the API's job
resource, the admin) never writes, and the figure is the one the job's own progress supports. The rate is what was
measured so far (items done / seconds since the job, or its stage, started), never a guess from the machine.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from inference.encoders import embed_texts, text_hash
from search.ingest.base import embed_input
from search.ingest.code import code_document, walk
from search.ingest.writer import own_hashes
from search.models import IngestJob

if TYPE_CHECKING:
    from search.models import Dataset

# a rate is reported once this much was measured: before that a start-up cost (walking the tree, loading the model)
# would make the first seconds' rate, and so the ETA, wrong by a large factor
MIN_MEASURED_S = 5.0
MIN_MEASURED_ITEMS = 50


@dataclass(frozen=True)
class Pace:
    """Items per second measured so far, seconds left at that rate, and the time that makes (None: not known yet)."""

    rate_per_s: float | None = None
    eta_s: float | None = None
    eta_at: datetime | None = None


def pace(*, done: int, total: int, started_at: datetime | None, now: datetime,
         finished_at: datetime | None = None) -> Pace:
    """The rate over [started_at, finished_at or now] and, with a known `total`, the time left at that rate.

    None until MIN_MEASURED_S seconds or MIN_MEASURED_ITEMS items were measured (a finished job is always measured);
    a finished job's time left is 0."""
    if started_at is None or done <= 0:
        return Pace()
    elapsed = ((finished_at or now) - started_at).total_seconds()
    if elapsed <= 0 or (finished_at is None and elapsed < MIN_MEASURED_S and done < MIN_MEASURED_ITEMS):
        return Pace()
    rate = done / elapsed
    if finished_at is not None:
        return Pace(rate_per_s=round(rate, 3), eta_s=0.0, eta_at=finished_at)
    if total <= 0:
        return Pace(rate_per_s=round(rate, 3))
    eta = max(0, total - done) / rate
    return Pace(rate_per_s=round(rate, 3), eta_s=round(eta, 1), eta_at=now + timedelta(seconds=eta))


def duration(seconds: float) -> str:
    """'45 s', '12 min', '2 h 05 min': an estimate, so no false precision."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"


def describe_pace(p: Pace, *, unit: str) -> str:
    """One line for the admin: '12.3 files/s, about 4 min left (ETA 03:41 UTC)'; '' when nothing is measured."""
    if p.rate_per_s is None:
        return "done" if p.eta_s == 0 else ""
    text = f"{p.rate_per_s:.3g} {unit}/s"
    if p.eta_s is not None and p.eta_at is not None:
        text += " (done)" if p.eta_s == 0 else f", about {duration(p.eta_s)} left (ETA {p.eta_at:%H:%M} UTC)"
    return text


def ingest_job_pace(job: IngestJob, *, now: datetime) -> Pace:
    """Files per second of an ingest or sync job and its time to finish; a job that ended without finishing
    (failed, cancelled) keeps its rate and has no ETA."""
    if job.status == IngestJob.Status.PENDING:
        return Pace()
    if job.status == IngestJob.Status.RUNNING:
        return pace(done=job.files_done, total=job.files_total, started_at=job.started_at, now=now)
    measured = pace(done=job.files_done, total=job.files_total, started_at=job.started_at, now=now,
                    finished_at=job.finished_at or now)
    return measured if job.status == IngestJob.Status.DONE else Pace(rate_per_s=measured.rate_per_s)


def pace_unit(job: IngestJob) -> str:
    """What a job's counters (files_done, files_total) count: chunks for a re-embed (search.ingest.reembedding),
    files for every other job."""
    return "chunks" if (job.options or {}).get("origin") == "reembed" else "files"


# how often a bar whose total is known reads it again: a crawl's total grows as it finds pages
TOTAL_REFRESH_S = 2.0


def file_progress(*, dataset: Dataset, desc: str) -> tuple[Callable[[dict[str, Any]], None], tqdm]:
    """The runner learns the file count after walking the source, so the total is read from the job lazily, and
    again every TOTAL_REFRESH_S while the job runs: a web crawl's total (search.sources.web.crawler) is what it
    has found so far, and a bar held at its first total would show a time left that only ever runs out."""
    bar = tqdm(desc=desc, unit="file")
    read_at = [0.0]

    def progress(info: dict[str, Any]) -> None:
        now = time.monotonic()
        if not bar.total or now - read_at[0] >= TOTAL_REFRESH_S:
            read_at[0] = now
            total = (IngestJob.objects.filter(dataset=dataset).order_by("-created_at")
                     .values_list("files_total", flat=True).first())
            if total and total != bar.total:
                bar.total = total
        if "path" in info:  # the file walker reports each file
            bar.update(1)
        elif "files" in info:  # sync_documents (rules, BEIR) reports running totals per batch
            bar.update(info["files"] - bar.n)

    return progress, bar


@dataclass(frozen=True)
class IngestEstimate:
    """What a code ingest of a folder will embed and how long that is expected to take on this machine."""

    files: int
    chunks: int
    to_embed: int  # chunks the ingest will embed (the rest reuse a vector the dataset's project already holds)
    rate_per_s: float | None  # chunks per second, measured on a sample of them (None: nothing to embed)
    seconds: float  # to_embed / rate (0 when nothing is to embed); the walk, the writes and the index apply come on top


def estimate_code_ingest(*, root: Path, dataset: Dataset, sample: int = 32) -> IngestEstimate:
    """Chunk the folder as the code reader does (about half a second for this repository), count what the writer
    would embed (search.ingest.writer.own_hashes: only vectors of texts the project already holds are reused), and
    time embedding a sample of it, spread over the tree. Writes nothing: the sample's vectors are dropped."""
    files = 0
    texts: dict[str, str] = {}
    for rel, abs_path, reason in walk(root):
        if reason:
            continue
        try:
            doc, _ = code_document(rel=rel, data=abs_path.read_bytes(), repo=root.name)
        except OSError:
            continue
        if doc is None:
            continue
        files += 1
        texts.update((text_hash(t), t) for t in map(embed_input, doc.chunks))
    held = own_hashes(dataset=dataset, texts=list(texts.values()))
    todo = [t for h, t in texts.items() if h not in held]
    if not todo:
        return IngestEstimate(files=files, chunks=len(texts), to_embed=0, rate_per_s=None, seconds=0.0)
    head = todo[::max(1, len(todo) // max(1, sample))][:max(1, sample)]  # spread over the tree: sizes vary by folder
    embed_texts(head[:4])  # loads the model and warms the batch path: one-offs the rate must not include
    t0 = time.perf_counter()
    embed_texts(head)
    rate = round(len(head) / max(time.perf_counter() - t0, 1e-6), 1) or 0.1
    return IngestEstimate(files=files, chunks=len(texts), to_embed=len(todo), rate_per_s=rate,
                          seconds=round(len(todo) / rate, 1))
