"""Reading a job's files in child processes, ahead of the writer, in the order they were given.

Why: reading and chunking are pure and about a quarter of a first ingest's CPU; the writer is one transaction at a
time in the job's process. With INGEST_READER_PROCESSES children (search.ingest.reader_child) the files are read on
other cores while the job writes, so a first ingest goes as fast as its writer instead of reader plus writer.

Why processes started with subprocess and not multiprocessing: a Celery prefork worker's children are daemonic and
may not start multiprocessing children. The children are started per job and stopped when its files are read, when
the job stops reading (a cancel, a deadline, an error: the generator is closed) and at the latest when it exits.

Bounds: at most AHEAD files are sent ahead of the one being answered: two of the writer's batches (FILE_BATCH), so the
children read the next batch while the job writes this one, and memory holds a few dozen files, not a tree. A child
that dies (a reader crashing its interpreter) costs the file it was reading, which is left out with the reason; the
files queued behind it are read by a fresh child. Children that die MAX_CRASHES_IN_A_ROW times in a row fail the job
(ReadersFailing) rather than leave every file out. With 0 processes every file is read in this process, the same way.
"""
from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from django.conf import settings

from search.ingest.base import DocumentDraft
from search.ingest.formats.documents import read_document
from search.ingest.reader_child import _LEN, decode_answer, read_frame, request
from search.ingest.writer import FILE_BATCH

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
CHILD = "search.ingest.reader_child"
AHEAD = 2 * FILE_BATCH  # files sent ahead of the one being answered, over all children
CRASHED = "the reader process ended while reading this file"
MAX_CRASHES_IN_A_ROW = 3  # more means the children cannot work here at all: the job fails and says so

T = TypeVar("T")
_END = object()


class ReadersFailing(RuntimeError):
    """Reader processes die one after another: a broken environment, not one bad file; the job fails with this."""


@dataclass(frozen=True)
class ToRead:
    """A file to read: its path in the dataset and its bytes."""

    name: str
    data: bytes


@dataclass(frozen=True)
class Read(Generic[T]):
    """What became of an item: `item` as given; for a ToRead, its draft or (None, why)."""

    item: T
    draft: DocumentDraft | None = None
    why: str = ""


def reader_processes() -> int:
    """INGEST_READER_PROCESSES: how many reader children a job starts (0: it reads in its own process)."""
    return max(0, int(settings.INGEST_READER_PROCESSES))


def read_in_process(*, kind: str, repo: str, name: str, data: bytes) -> tuple[DocumentDraft | None, str]:
    """One file read here, as a child reads it: a reader's failure leaves the file out with the reason."""
    try:
        return read_document(kind=kind, data=data, name=name, repo=repo)
    except Exception as exc:  # noqa: BLE001 - one unreadable file must not end the job; the report names it
        log.warning("ingest: reading %s failed: %r", name, exc)
        return None, f"could not be read: {type(exc).__name__}"


class _Sent:
    """A file handed to a child: whether its bytes reached the child's stdin in full (set by the feeding thread)."""

    __slots__ = ("delivered",)

    def __init__(self) -> None:
        self.delivered = False


class _Child:
    """One reader process, with two threads: one feeds it the files queued for it and one drains its answers into a
    queue. Why threads: the pipes hold 64 KiB, so a write of the next files would block the job while the child is
    still reading (the job would wait for the child instead of writing), and a child writing an answer nobody reads
    yet would stop reading files."""

    def __init__(self, *, kind: str, repo: str) -> None:
        self.proc = subprocess.Popen(  # our own interpreter and module, the job's environment (its settings)
            [sys.executable, "-m", CHILD, _options(kind=kind, repo=repo)], cwd=ROOT, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.answers: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.requests: queue.SimpleQueue[tuple[bytes, _Sent] | None] = queue.SimpleQueue()
        self.pending: deque[_Sent] = deque()  # the files sent and not answered yet, in order
        threading.Thread(target=self._feed, daemon=True, name="reader-child-feed").start()
        threading.Thread(target=self._drain, daemon=True, name="reader-child-drain").start()

    def _feed(self) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        while (job := self.requests.get()) is not None:
            payload, sent = job
            try:
                stdin.write(payload)
                stdin.flush()
            except (OSError, ValueError):  # the child is gone (or stopped): its answer is the end of its stream
                return
            sent.delivered = True

    def _drain(self) -> None:
        out = self.proc.stdout
        assert out is not None
        try:
            while (head := read_frame(out, _LEN.size)) is not None:
                payload = read_frame(out, _LEN.unpack(head)[0])
                if payload is None:
                    break
                self.answers.put(payload)
        except (OSError, ValueError):  # the pipe closed under us: the child is gone
            pass
        self.answers.put(None)

    def send(self, item: ToRead) -> None:
        """Queue `item` for this child; a child that is gone is found out when its answer is due."""
        sent = _Sent()
        self.pending.append(sent)
        self.requests.put((request(name=item.name, data=item.data), sent))

    def stop(self) -> None:
        self.requests.put(None)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except (OSError, ValueError):  # the feeding thread's last write failed on it
                    pass


def _options(*, kind: str, repo: str) -> str:
    return json.dumps({"kind": kind, "repo": repo})


def read_files(*, items: Iterable[T | ToRead], kind: str, repo: str,
               processes: int | None = None) -> Iterator[Read[T | ToRead]]:
    """Each item back in the order given: a ToRead with its draft (or None and why), anything else as it came.

    `processes` defaults to reader_processes(). Files are sent to the children in turn, up to AHEAD of the item
    being answered; closing the iterator stops the children."""
    n = reader_processes() if processes is None else processes
    if n <= 0:
        for item in items:
            if isinstance(item, ToRead):
                yield Read(item, *read_in_process(kind=kind, repo=repo, name=item.name, data=item.data))
            else:
                yield Read(item)
        return
    children: list[_Child] = []
    try:
        children = [_Child(kind=kind, repo=repo) for _ in range(n)]
        yield from _ordered(items=iter(items), children=children, kind=kind, repo=repo)
    finally:
        for child in children:
            child.stop()


def _ordered(*, items: Iterator[T | ToRead], children: list[_Child], kind: str,
             repo: str) -> Iterator[Read[T | ToRead]]:
    order: deque[tuple[T | ToRead, int | None]] = deque()  # each item, and the child reading it (None: not read)
    turn = crashes = 0
    exhausted = False
    while True:
        # files in flight up to AHEAD, and items of any kind up to a few times that: a run of unchanged files (a
        # re-sync) flows through as it is hashed, so the job's progress and its deadline checks keep their pace
        while not exhausted and len(order) < 4 * AHEAD and sum(len(c.pending) for c in children) < AHEAD:
            item = next(items, _END)
            if item is _END:
                exhausted = True
                break
            if not isinstance(item, ToRead):
                order.append((item, None))
                continue
            turn = (turn + 1) % len(children)
            children[turn].send(item)
            order.append((item, turn))
        if not order:
            return
        item, slot = order.popleft()
        if slot is None:
            yield Read(item)
            continue
        read = _answer(item=item, slot=slot, children=children, order=order, kind=kind, repo=repo)
        crashes = crashes + 1 if read.why == CRASHED else 0
        if crashes >= MAX_CRASHES_IN_A_ROW:
            raise ReadersFailing(f"{crashes} reader processes in a row ended before answering (last: {item.name}); "
                                 "set INGEST_READER_PROCESSES=0 to read in the job's own process")
        yield read


def _answer(*, item: ToRead, slot: int, children: list[_Child], order: deque, kind: str, repo: str) -> Read:
    while True:
        child = children[slot]
        payload = child.answers.get()
        delivered = child.pending.popleft().delivered
        if payload is not None:
            try:
                return Read(item, *decode_answer(payload))
            except ValueError as exc:
                log.warning("ingest: %s", exc)
                return Read(item, None, "the reader process answered something that is not a draft")
        # The child is gone. If it had this file, it died reading it: the file is left out. The files queued
        # behind it (and this one, if it never arrived) go to a fresh child, in order.
        fresh = children[slot] = _restart(child, kind=kind, repo=repo)
        if not delivered:
            fresh.send(item)
        for queued, queued_slot in order:
            if queued_slot == slot:
                fresh.send(queued)
        if delivered:
            log.warning("ingest: the reader process ended while reading %s; the file is left out", item.name)
            return Read(item, None, CRASHED)


def _restart(child: _Child, *, kind: str, repo: str) -> _Child:
    child.stop()
    return _Child(kind=kind, repo=repo)
