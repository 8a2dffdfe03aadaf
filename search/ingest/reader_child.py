"""A reader process of an ingest job's pool (search.ingest.reader_pool): file bytes in, drafts out, one after another.

Why a process: reading (format detection, parsing, chunking, the symbol facts) is pure and takes about a quarter of a
first ingest's CPU, while the job's own process writes rows one transaction at a time. In children it runs on the
machine's other cores, ahead of the writer, instead of between its batches. So does the sparse analysis of each chunk
row (its term ids and weights, as the row's array literals: search.ingest.base.row_sparse_arrays), which depends on
the draft alone.

The wire is length-prefixed frames on stdin and stdout. A request is a file's name and bytes; the answer is JSON, never
pickle, as for the PDF reader's child: the parent rebuilds the draft from plain values and trusts nothing else this
process says. This module imports no models (the readers are pure) and reads the same settings as the job.

    python -m search.ingest.reader_child '{"kind": "code", "repo": "r"}'
"""
from __future__ import annotations

import base64
import json
import struct
import sys
from dataclasses import fields
from typing import Any, BinaryIO

from config.gcpolicy import bulk_work
from search.ingest.base import ChunkDraft, DocumentDraft, row_sparse_arrays, sparse_arrays_ok
from search.ingest.formats.documents import read_document
from search.ingest.symbols import Definition, FileSymbols, Reference

_LEN = struct.Struct(">I")
_NAME_DATA = struct.Struct(">II")
_DOC_FIELDS = tuple(f.name for f in fields(DocumentDraft) if f.name not in {"chunks", "original", "facts"})
_CHUNK_FIELDS = tuple(f.name for f in fields(ChunkDraft))


def encode_answer(draft: DocumentDraft | None, why: str) -> bytes:
    """(draft, why) as JSON: the draft's plain fields, its chunks' fields in order, the original as base64 and the
    symbol facts as lists of their fields."""
    if draft is None:
        return json.dumps({"draft": None, "why": why}).encode()
    doc: dict[str, Any] = {name: getattr(draft, name) for name in _DOC_FIELDS}
    doc["chunks"] = [[getattr(c, name) for name in _CHUNK_FIELDS] for c in draft.chunks]
    doc["original"] = None if draft.original is None else base64.b64encode(draft.original).decode("ascii")
    if draft.facts is not None:
        text, facts = draft.facts
        doc["facts"] = [text, facts.definitions, facts.references]
    return json.dumps({"draft": doc, "why": why}, ensure_ascii=False).encode()


def decode_answer(payload: bytes) -> tuple[DocumentDraft | None, str]:
    """encode_answer's inverse; a payload of any other shape raises ValueError (the parent's refusal)."""
    try:
        answer = json.loads(payload)
        why = str(answer["why"])
        doc = answer["draft"]
        if doc is None:
            return None, why
        width = len(_CHUNK_FIELDS)
        if any(len(values) != width for values in doc["chunks"]):
            raise ValueError("a chunk of another shape")
        chunks = [ChunkDraft(*values) for values in doc["chunks"]]  # the fields in their declared order
        if not all(c.terms is None and c.weights is None or isinstance(c.terms, str) and isinstance(c.weights, str)
                   and sparse_arrays_ok(terms=c.terms, weights=c.weights) for c in chunks):
            raise ValueError("a chunk's sparse arrays of another shape")
        draft = DocumentDraft(chunks=chunks, **{name: doc[name] for name in _DOC_FIELDS})
        if doc["original"] is not None:
            draft.original = base64.b64decode(doc["original"])
        if "facts" in doc:
            text, definitions, references = doc["facts"]
            # _make: a tuple of the given fields without the generated __new__ (a file has thousands of facts)
            if any(len(d) != len(Definition._fields) for d in definitions) or any(
                    len(r) != len(Reference._fields) for r in references):
                raise ValueError("a symbol fact of another shape")
            draft.facts = (str(text), FileSymbols(definitions=tuple(map(Definition._make, definitions)),
                                                  references=tuple(map(Reference._make, references))))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"a reader process answered something that is not a draft: {exc}") from None
    return draft, why


def write_frame(out: BinaryIO, payload: bytes) -> None:
    out.write(_LEN.pack(len(payload)))
    out.write(payload)
    out.flush()


def read_frame(src: BinaryIO, size: int) -> bytes | None:
    """Exactly `size` bytes, or None at the end of the stream."""
    data = src.read(size)
    if len(data) < size:
        return None
    return data


def request(*, name: str, data: bytes) -> bytes:
    encoded = name.encode()
    return _NAME_DATA.pack(len(encoded), len(data)) + encoded + data


def main() -> None:
    options = json.loads(sys.argv[1])
    kind, repo = str(options["kind"]), str(options.get("repo", ""))
    src, out = sys.stdin.buffer, sys.stdout.buffer
    with bulk_work():  # the job's collector policy (config/gcpolicy.py): reading is most of an ingest's allocations
        serve(kind=kind, repo=repo, src=src, out=out)


def serve(*, kind: str, repo: str, src: BinaryIO, out: BinaryIO) -> None:
    """Answer each request frame on `src` with a frame on `out` until `src` ends."""
    while (head := read_frame(src, _NAME_DATA.size)) is not None:
        name_len, data_len = _NAME_DATA.unpack(head)
        name = (read_frame(src, name_len) or b"").decode()
        data = read_frame(src, data_len) if data_len else b""
        if data is None:
            return
        try:
            draft, why = read_document(kind=kind, data=data, name=name, repo=repo)
            for chunk in draft.chunks if draft is not None else ():  # the writer's and applier's analysis, done here
                chunk.terms, chunk.weights = row_sparse_arrays(chunk=chunk, path=draft.path)
            answer = encode_answer(draft, why)
        except Exception as exc:  # noqa: BLE001 - a file a reader fails on is left out with the reason, as in-process
            answer = encode_answer(None, f"could not be read: {type(exc).__name__}")
        write_frame(out, answer)


if __name__ == "__main__":
    main()
