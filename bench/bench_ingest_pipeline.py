"""A first ingest of a real code tree, end to end and per stage: can everything around the encoder keep up with a GPU?

Why: on the CPU a first ingest is bound by the encoder (tens of chunks/s); a GPU encoder does about 2,000
chunks/s, so reading and chunking, tokenising, the writer (Postgres rows, cache rows, outbox) and the applier
(outbox -> index points) must each sustain that much or the GPU waits on them. Two runs of the same corpus:

(a) the encoder on the CPU, on a small sample (it is slow);
(b) the encoder replaced by vectors computed before the clock starts (unit vectors of the model's size, one per
    text): only the model's forward pass (`inference.encoders._embed_with_retry`) is swapped, in this benchmark
    only, so the writer still looks the cache up, writes the cache rows and the outbox, and the applier reads the
    vectors back from Postgres as it would after a GPU encoder filled them.

Stages, timed one after another in one process that owns a private embedded store: walk + read + chunk
(`search.ingest.code.walk`, `search.ingest.formats.documents.read_document`), tokenise (the sparse terms and
text hashes, timed alone; the writer and the applier do this work inside their own time too), the writer
(`search.ingest.writer.sync_documents`, without the encoder's time), the applier (`apply_outbox`, points/s). Each stage runs under the garbage-collector policy an ingest job and the applier
run under (config.gcpolicy), where the checkout has one.

With `--before REV` the same script also runs in a git worktree of REV (its own services, the same corpus) and
the table has a before column: both sides run in one go, on the same loaded machine, measured by this script.
Beside each wall rate the table gives chunks per CPU second (this process, and for the writer and the applier its
Postgres backend): on a shared machine wall time grows with the load average, the CPU a stage takes does not.

    .venv/bin/python bench/bench_ingest_pipeline.py [--chunks 10000] [--cpu-sample 300] [--before HEAD]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, machine, setup_django, table, write_result

STDLIB = Path(sysconfig.get_paths()["stdlib"])  # the running Python's own: always there
SKIP_PARTS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__", "lib2to3"}


def build_corpus(*, target_chunks: int, dest: Path) -> tuple[int, int]:
    """Copy this machine's Python standard library modules (sorted, tests left out), then the installed Django's
    when the standard library chunks to fewer (about 19,000 chunks here), until they chunk to about
    `target_chunks`; -> (files, estimated chunks)."""
    import django

    from search.ingest.code import chunk_file

    files = chunks = 0
    django_root = Path(django.__file__).resolve().parent
    sources = [(STDLIB, p) for p in sorted(STDLIB.rglob("*.py"))] + \
        [(django_root.parent, p) for p in sorted(django_root.rglob("*.py"))]
    for root, p in sources:
        rel = p.relative_to(root)
        if chunks >= target_chunks:
            break
        if SKIP_PARTS & set(rel.parts) or not p.is_file():
            continue
        text = p.read_text(errors="replace")
        try:
            n = len(chunk_file(path=str(rel), text=text, lang="python")[0])
        except Exception:  # noqa: BLE001 - an estimate; the measured run counts what it wrote
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, dest / rel)
        files += 1
        chunks += n
    return files, chunks


def read_tree(root: Path) -> list:
    from search.ingest.code import walk
    from search.ingest.formats.documents import read_document

    drafts = []
    for rel, abs_path, reason in walk(root):
        if reason:
            continue
        draft, _ = read_document(kind="code", data=abs_path.read_bytes(), name=rel, repo="bench")
        if draft is not None:
            drafts.append(draft)
    return drafts


def analyse(drafts: list) -> bool:
    """What a reader process does after reading (search.ingest.reader_child): each chunk row's sparse vector, which
    the writer stores and the applier sends. False in a checkout whose readers leave that to the writer."""
    try:
        from search.ingest.base import row_sparse_arrays
    except ImportError:  # a checkout whose readers sent the lists
        try:
            from search.ingest.base import row_sparse
        except ImportError:
            return False
        for d in drafts:
            for c in d.chunks:
                sparse = row_sparse(chunk=c, path=d.path)
                c.terms, c.weights = sparse.indices, sparse.values
        return True
    for d in drafts:
        for c in d.chunks:
            c.terms, c.weights = row_sparse_arrays(chunk=c, path=d.path)
    return True


def cold_words() -> None:
    """Forget the words the tokeniser has seen (a checkout that caches them), so each stage starts as a fresh
    worker would and the tokenise stage's run does not warm the writer's."""
    from search.engine import sparse

    for name in ("_code_word_terms", "_prose_word_terms"):
        cached = getattr(sparse, name, None)
        if cached is not None:
            cached.cache_clear()


class Encoder:
    """Counts the time spent in the encoder; with `vectors`, serves them instead of running the model."""

    def __init__(self, *, real, vectors: dict[str, object] | None) -> None:
        self.real, self.vectors, self.seconds, self.texts = real, vectors, 0.0, 0

    def __call__(self, texts: list[str], *, show_progress: bool, model: str | None = None):
        import numpy as np

        t = time.perf_counter()
        try:
            if self.vectors is None:
                return self.real(texts, show_progress=show_progress, model=model)
            return np.stack([self.vectors[x] for x in texts])
        finally:
            self.seconds += time.perf_counter() - t
            self.texts += len(texts)


def cpu_seconds() -> float:
    """CPU seconds used so far by this process and by its Postgres backend (the server side of its writes).

    Why beside the wall clock: on a machine shared with other jobs a stage's wall time grows with the load
    average, while the CPU it takes (client and server) is what it would cost on an idle machine."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        server = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
    except (OSError, IndexError, ValueError):  # a server on another machine: its share is not measured
        server = 0.0
    return time.process_time() + server


def first_ingest(*, project, name: str, drafts: list, encoder: Encoder) -> dict[str, float]:
    from search.engine.applier import apply_outbox
    from search.engine.index import get_index
    from search.ingest.writer import sync_documents
    from search.models import Chunk, Dataset

    dataset = Dataset.objects.create(project=project, name=name, kind="code")
    enc0 = encoder.seconds
    t, c = time.perf_counter(), cpu_seconds()
    with job_policy():
        sync_documents(dataset=dataset, drafts=iter(drafts), delete_missing=True)
    writer_s = time.perf_counter() - t
    writer_cpu = cpu_seconds() - c
    encoder_s = encoder.seconds - enc0
    t, c = time.perf_counter(), cpu_seconds()
    applied = apply_outbox(index=get_index())
    applier_s = time.perf_counter() - t
    applier_cpu = cpu_seconds() - c
    chunks = Chunk.objects.filter(dataset=dataset).count()
    return {"chunks": chunks, "encoder_s": encoder_s, "writer_s": writer_s - encoder_s, "applier_s": applier_s,
            "applied": applied, "writer_cpu": writer_cpu, "applier_cpu": applier_cpu}


class ApplierProcess:
    """The index applier in a process of its own, started before the clock: as the web process's applier thread
    runs beside a worker's job, it applies the outbox while the job still writes (`--applier`: applier_main).

    The store is embedded, so this process closes its own handle on it first: the applier process owns it."""

    def __init__(self) -> None:
        from search.engine.index import close_index

        close_index()
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--applier"], cwd=ROOT,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if (self.proc.stdout.readline().strip() if self.proc.stdout else "") != "ready":
            raise RuntimeError("the applier process did not start")

    def finish(self, *, points: int) -> dict[str, float]:
        """Tell it how many new points the job's chunks make; -> once it holds them all, its CPU seconds (its own
        and its Postgres backend's) since it was ready, and `held_at`: this process's clock when it said so.

        Why the time of its answer and not of its exit: a process that closes the embedded store flushes it on the
        way out (seconds), which a first ingest never waits for; the product's applier lives on."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{points}\n")
        self.proc.stdin.flush()
        result = json.loads(self.proc.stdout.readline())
        result["held_at"] = time.perf_counter()
        self.proc.wait()
        return result


def applier_main() -> None:
    """The applier process: apply the outbox until the store holds the number of new points the parent names."""
    import threading

    import django

    sys.path.insert(0, str(ROOT))
    django.setup()
    from search.engine.applier import apply_outbox
    from search.engine.index import get_index

    index = get_index()
    base = index.count()
    expected: list[int] = []
    told = threading.Event()

    def listen() -> None:
        expected.append(int(sys.stdin.readline()))
        told.set()

    threading.Thread(target=listen, daemon=True).start()
    c = cpu_seconds()
    print("ready", flush=True)
    with job_policy():
        while not (told.is_set() and index.count() >= base + expected[0]):
            if not apply_outbox(index=index):
                time.sleep(0.02)
    print(json.dumps({"cpu_s": cpu_seconds() - c}), flush=True)


def as_a_job(*, project, name: str, corpus: Path, processes: int,
             applier: ApplierProcess | None = None) -> dict[str, float] | None:
    """Read and write the corpus the way a code job does: the files read through the reader pool
    (search.ingest.reader_pool; `processes` 0: in this process) while this process writes what comes back, so
    reading and writing overlap. -> wall seconds and CPU seconds (this process, its reader processes, its Postgres
    backend), or None in a checkout without the pool. The encoder is whatever search.inference serves (cached).

    With `applier` (started before the clock) the outbox is applied at the same time, and the result also has the
    wall seconds until the store holds every chunk (`applied_s`) and the applier's CPU seconds."""
    try:
        from search.ingest.reader_pool import ToRead, read_files
    except ImportError:
        return None
    from search.ingest.code import walk
    from search.ingest.writer import sync_documents
    from search.models import Chunk, Dataset

    def children_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        return usage.ru_utime + usage.ru_stime

    dataset = Dataset.objects.create(project=project, name=name, kind="code")
    cold_words()
    t, c, k = time.perf_counter(), cpu_seconds(), children_cpu()
    with job_policy():
        items = (ToRead(rel, path.read_bytes()) for rel, path, why in walk(corpus) if not why)
        drafts = (r.draft for r in read_files(items=items, kind="code", repo="bench", processes=processes)
                  if r.draft is not None)
        sync_documents(dataset=dataset, drafts=drafts, delete_missing=True)
    wall, cpu = time.perf_counter() - t, cpu_seconds() - c + children_cpu() - k
    out = {"chunks": Chunk.objects.filter(dataset=dataset).count(), "wall_s": wall, "cpu_s": cpu}
    if applier is not None:
        held = applier.finish(points=out["chunks"])
        out.update(applied_s=held["held_at"] - t, applier_cpu_s=held["cpu_s"])
    return out


def job_policy():
    """The garbage-collector policy an ingest job and the applier run under (config.gcpolicy), where the checkout
    has one: every stage here runs as it would inside a job. A checkout without it runs them as its jobs did."""
    try:
        from config.gcpolicy import bulk_work
    except ImportError:
        return contextlib.nullcontext()
    return bulk_work()


def side(*, corpus: Path, cpu_sample: int, out: Path) -> None:
    """One checkout's figures, written as JSON to `out`."""
    setup_django()
    import numpy as np

    from inference import encoders
    from inference.encoders import embed_texts
    from projects.models import Project
    from search.ingest.base import embed_input

    t, c = time.perf_counter(), time.process_time()
    with job_policy():
        drafts = read_tree(corpus)
        analysed = analyse(drafts)
    read_s, read_cpu = time.perf_counter() - t, time.process_time() - c
    n_chunks = sum(len(d.chunks) for d in drafts)
    cold_words()

    # (a) the encoder on the CPU, on the smallest files up to `cpu_sample` chunks
    dim = len(embed_texts(["warm the model up"], show_progress=False)[0])
    real = encoders._embed_with_retry
    sample, k = [], 0
    for d in sorted(drafts, key=lambda d: len(d.chunks)):  # small files first: the sample stays near its size
        if k >= cpu_sample:
            break
        sample.append(d)
        k += len(d.chunks)
    cpu_enc = Encoder(real=real, vectors=None)
    encoders._embed_with_retry = cpu_enc
    cpu = first_ingest(project=Project.objects.create(slug="bench-cpu", name="CPU"), name="cpu", drafts=sample,
                       encoder=cpu_enc)

    # (b) vectors computed before the clock starts; the forward pass is the only thing replaced
    rng = np.random.default_rng(7)
    vectors = {}
    for d in drafts:
        for c in d.chunks:
            v = rng.standard_normal(dim).astype(np.float32)
            vectors[embed_input(c)] = v / np.linalg.norm(v)
    cold_words()
    cached_enc = Encoder(real=real, vectors=vectors)
    encoders._embed_with_retry = cached_enc
    cached = first_ingest(project=Project.objects.create(slug="bench-cached", name="Cached"), name="cached",
                          drafts=drafts, encoder=cached_enc)
    jobs = {}
    for processes in sorted({0, max(1, os.cpu_count() or 1) - 1}):
        project = Project.objects.create(slug=f"bench-job-{processes}", name=f"Job {processes}")  # nothing held yet
        jobs[str(processes)] = as_a_job(project=project, name="job", corpus=corpus, processes=processes)
    # all at once, as the product runs a first ingest: the job with its reader processes, and the applier
    pipelined = None
    if jobs.get("0") is not None:
        # the jobs above left their outbox rows unapplied: the store catches up first, as a live applier keeps it,
        # so the applier below applies this ingest's chunks and not a backlog of earlier ones
        # imported here as everywhere in this script: Django is set up at run time (setup_django), not on import
        from search.engine.applier import apply_outbox
        from search.engine.index import get_index

        apply_outbox(index=get_index())
        processes = max(1, os.cpu_count() or 1) - 1
        project = Project.objects.create(slug="bench-pipelined", name="Pipelined")
        pipelined = as_a_job(project=project, name="job", corpus=corpus, processes=processes,
                             applier=ApplierProcess())
        pipelined["processes"] = processes
    encoders._embed_with_retry = real
    out.write_text(json.dumps({"jobs": jobs, "pipelined": pipelined, "files": len(drafts), "chunks": n_chunks, "read_s": read_s,
                               "read_cpu": read_cpu, "analysed": analysed, "cpu": cpu, "cached": cached,
                               "load": os.getloadavg()}))


def run_side(*, checkout: Path, corpus: Path, cpu_sample: int) -> dict:
    out = Path(tempfile.mkstemp(prefix="ingest-pipeline-", suffix=".json")[1])
    script = checkout / "bench" / "bench_ingest_pipeline.py"
    if script.resolve() != Path(__file__).resolve():  # both sides measured by this same script
        shutil.copyfile(Path(__file__), script)
    cmd = [sys.executable, str(script), "--side", "--corpus", str(corpus), "--cpu-sample", str(cpu_sample),
           "--out", str(out)]
    subprocess.run(cmd, cwd=checkout, check=True)
    result = json.loads(out.read_text())
    out.unlink()
    return result


def worktree(rev: str) -> Path:
    path = Path(tempfile.mkdtemp(prefix="ingest-pipeline-before-"))
    path.rmdir()
    subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    (path / ".venv").symlink_to(ROOT / ".venv")
    return path


def rates(r: dict) -> dict[str, float]:
    c = r["cached"]
    n = c["chunks"]
    total = r["read_s"] + c["writer_s"] + c["encoder_s"] + c["applier_s"]
    return {"read": r["chunks"] / r["read_s"],
            "writer": n / c["writer_s"], "applier": c["applied"] / c["applier_s"], "end": n / total}


def cpu_rates(r: dict) -> dict[str, float]:
    """Chunks per CPU second (this process, and for the writer and the applier its Postgres backend too)."""
    c = r["cached"]
    n = c["chunks"]
    total = r["read_cpu"] + c["writer_cpu"] + c["applier_cpu"]  # the cached encoder's lookups are in writer_cpu
    return {"read": r["chunks"] / r["read_s"],
            "writer": n / c["writer_cpu"], "applier": c["applied"] / c["applier_cpu"], "end": n / total}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--chunks", type=int, default=10_000, help="target chunk count of the corpus")
    ap.add_argument("--cpu-sample", type=int, default=300, help="chunks embedded on the CPU in run (a)")
    ap.add_argument("--before", default="", help="a git revision to measure in a worktree beside this checkout")
    ap.add_argument("--side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--applier", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--corpus", default="", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.applier:
        applier_main()
        return
    if args.side:
        side(corpus=Path(args.corpus), cpu_sample=args.cpu_sample, out=Path(args.out))
        return
    corpus = Path(tempfile.mkdtemp(prefix="ingest-pipeline-corpus-"))
    sys.path.insert(0, str(ROOT))
    files, _ = build_corpus(target_chunks=args.chunks, dest=corpus)
    sides: dict[str, dict] = {}
    old = worktree(args.before) if args.before else None
    try:
        if old is not None:
            sides["before"] = run_side(checkout=old, corpus=corpus, cpu_sample=args.cpu_sample)
        sides["after"] = run_side(checkout=ROOT, corpus=corpus, cpu_sample=args.cpu_sample)
    finally:
        shutil.rmtree(corpus, ignore_errors=True)
        if old is not None:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)
    names = list(sides)
    r = {k: rates(v) for k, v in sides.items()}
    labels = {"read": "walk + read + chunk + sparse analysis (a reader process's work)",
              "writer": "writer (chunks, cache rows, code facts, outbox; encoder's time left out)",
              "applier": "applier (outbox -> index points)", "end": "end to end (read + writer + applier)"}
    with_cpu = all("read_cpu" in v for v in sides.values())
    rc = {k: cpu_rates(v) for k, v in sides.items()} if with_cpu else {}
    rows = [[labels[s], *[f"{r[k][s]:,.0f}" for k in names], *[f"{rc[k][s]:,.0f}" for k in rc]] for s in labels]
    a = sides["after"]
    cpu_rows = []
    for k in names:
        c = sides[k]["cpu"]
        total = c["encoder_s"] + c["writer_s"] + c["applier_s"] + sides[k]["read_s"] * c["chunks"] / sides[k]["chunks"]
        cpu_rows.append([k, c["chunks"], f"{c['chunks'] / c['encoder_s']:,.0f}", f"{c['chunks'] / c['writer_s']:,.0f}",
                         f"{c['applied'] / c['applier_s']:,.0f}", f"{c['chunks'] / total:,.0f}"])
    job_rows = []
    for k in names:
        for processes, j in sorted((sides[k].get("jobs") or {}).items()):
            if j is None:
                continue
            how = "in the job's process" if processes == "0" else f"in {processes} reader process" + (
                "es" if processes != "1" else "")
            job_rows.append([k, f"read {how}, written by the job", f"{j['chunks']:,}", f"{j['chunks'] / j['wall_s']:,.0f}",
                             f"{j['chunks'] / j['cpu_s']:,.0f}"])
    pipe_rows = []
    for k in names:
        pipe = sides[k].get("pipelined")
        if pipe:
            cpu = pipe["cpu_s"] + pipe["applier_cpu_s"]
            pipe_rows.append([k, pipe["processes"], f"{pipe['chunks']:,}", f"{pipe['applied_s']:.1f}",
                              f"{pipe['chunks'] / pipe['applied_s']:,.0f}", f"{cpu:.1f}", f"{pipe['chunks'] / cpu:,.0f}"])
    unanalysed = [k for k in names if not sides[k].get("analysed")]
    text = "\n".join([
        f"## A first ingest without the encoder: {a['cached']['chunks']:,} chunks of {a['files']} Python "
        f"files (the standard library, then Django's), chunks/s per stage", "",
        table(["stage", *[f"{k} chunks/s" for k in names], *[f"{k} chunks per CPU s" for k in rc]], rows), "",
        "The encoder is replaced by vectors computed before the clock starts (its forward pass only; the writer "
        "still writes the cache rows and the outbox, the applier reads the vectors back from Postgres). "
        "A GPU encoder does about 2,000 chunks/s: every stage must reach that for the GPU not to wait. "
        "Chunks per CPU second: the chunks over the CPU time the stage took in this process, plus, for the writer "
        "and the applier, in its Postgres backend; on a loaded machine wall time grows with the load average, "
        "the CPU a stage needs does not (with one core per stage it is the rate an idle machine reaches)."
        + (f" In {', '.join(unanalysed)} the readers do not analyse: the read row is reading only, and the writer "
           "and the applier each analyse the chunks' text." if unanalysed else ""), "",
        "## Read, written and applied at once: a first ingest as the product runs it (encoder cached)", "",
        table(["checkout", "reader processes", "chunks", "seconds until the store holds every chunk", "chunks/s",
               "CPU s (all processes)", "chunks per CPU s"], pipe_rows) if pipe_rows else "(not measured)", "",
        "The job (its walk, its reader processes, its writer) in one process and the index applier in another, "
        "started together, as a worker's job and the web process's applier thread run; the clock stops when the "
        "store holds a point for every chunk. CPU seconds: the job's process, its reader processes, the applier's "
        "process and both Postgres backends. This is what this machine's cores sustain with every stage "
        "competing for them.", "",
        "## Read and written as a code job does it (encoder cached, applier not included)", "",
        table(["checkout", "how the files are read", "chunks", "chunks/s", "chunks per CPU s"], job_rows)
        if job_rows else "(no reader pool in these checkouts)", "",
        "The job's walk, its reads through search.ingest.reader_pool and its writer, timed together: with reader "
        "processes the files are read on another core while the job writes the previous batch. CPU seconds here "
        "add the reader processes' and the Postgres backend's. The applier runs in the web process beside this; on "
        "a machine with a core for each, the pipeline runs at the slowest stage's rate.", "",
        f"## The same ingest with the encoder on the CPU ({a['cpu']['chunks']} chunks, the smallest files)", "",
        table(["checkout", "chunks", "encoder chunks/s", "writer chunks/s", "applier points/s",
               "end to end chunks/s"], cpu_rows), "",
        ("Before: " + args.before + " in a worktree, its own services, the same corpus, run just before. ")
        if args.before else "",
        "Load average when each side finished: "
        + "; ".join(f"{k} {'/'.join(f'{x:.1f}' for x in sides[k]['load'])}" for k in names) + ".", "",
        machine(), "",
        f"Reproduce: `.venv/bin/python bench/bench_ingest_pipeline.py --chunks {args.chunks} "
        f"--cpu-sample {args.cpu_sample}" + (f" --before {args.before}`" if args.before else "`"),
    ])
    write_result("ingest_pipeline", text)


if __name__ == "__main__":
    main()
