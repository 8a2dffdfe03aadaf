"""The code tools' rows of a document (CodeFile, Symbol, SymbolRef): written with its chunks, checked, repaired.

Why beside the writer and not inside it: the writer owns "chunks + outbox in one transaction"; this stage adds
the rows derived from the same chunks, inside that same transaction (search.ingest.writer.write_documents calls
`write_code_facts` under its lock), so a document's symbols and trigrams are never older or newer than its text.
A delete needs nothing here: the rows hang off the Document by CASCADE and go in the delete's transaction.

`check` is the proof (`manage.py reconcile_code`): for every document it rebuilds the facts from the chunks in
Postgres (search.ingest.symbols.indexed_text) and compares them with the stored rows, and finds rows of documents
that are gone; `fix` rewrites exactly the documents that differ.
"""
from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction

from config.pgarrays import int_array
from config.pgcopy import copy_insert, copy_values
from search.engine.grep import trigrams
from search.engine.term_stats import lock_dataset_writes
from search.ingest import symbols
from search.models import Chunk, CodeFile, Document, Symbol, SymbolRef

if TYPE_CHECKING:
    from search.ingest.base import DocumentDraft
    from search.models import Dataset

SAMPLE = 20


def facts_of(*, path: str, lang: str, text: str) -> symbols.FileSymbols:
    """The symbol facts the graph keeps for a file: none for a language without an extractor."""
    return symbols.extract(path=path, text=text, lang=lang) if lang in symbols.SYMBOL_LANGS else symbols.FileSymbols()


def _file_row(*, dataset_id: int, document_id: int, path: str, lang: str, text: str,
              taken: tuple[str, symbols.FileSymbols] | None = None) -> tuple[CodeFile, symbols.FileSymbols]:
    """A document's CodeFile (unsaved) and the facts it digests, extracted once. `taken`: facts the reader took
    (DocumentDraft.facts), used only where they were taken from this very text."""
    facts = taken[1] if taken is not None and taken[0] == text else facts_of(path=path, lang=lang, text=text)
    return CodeFile(document_id=document_id, dataset_id=dataset_id, path=path, lang=lang,
                    lines=text.count("\n") + 1 if text else 0, trigrams=trigrams(text),
                    symbols_digest=facts.digest()), facts


def _replace(documents: list[tuple[int, int, str, str, str, tuple[str, symbols.FileSymbols] | None]]
             ) -> dict[str, int]:
    """(dataset_id, document_id, path, lang, text, facts the reader took or None) -> their rows, the old ones
    dropped first."""
    ids = [d[1] for d in documents]
    CodeFile.objects.filter(document_id__in=ids).delete()
    Symbol.objects.filter(document_id__in=ids).delete()
    SymbolRef.objects.filter(document_id__in=ids).delete()
    files, defs, refs = [], [], []
    for dataset_id, document_id, path, lang, text, taken in documents:
        f, facts = _file_row(dataset_id=dataset_id, document_id=document_id, path=path, lang=lang, text=text,
                             taken=taken)
        files.append(f)
        # the Symbol and SymbolRef columns as values, a fact's fields in their order (a named tuple spread as it
        # is): a model instance per fact cost more than its write
        defs.extend((dataset_id, document_id, path, lang, *d) for d in facts.definitions)
        refs.extend((dataset_id, document_id, path, *r) for r in facts.references)
    for f in files:  # as one literal: psycopg would quote a few thousand ids one by one (config.pgarrays)
        f.trigrams = int_array(f.trigrams)
    copy_insert(model=CodeFile, objs=files)  # one COPY each: no INSERT of thousands of placeholders to parse
    copy_values(model=Symbol, columns=_SYMBOL_COLUMNS, rows=defs)
    copy_values(model=SymbolRef, columns=_REF_COLUMNS, rows=refs)
    return {"files": len(files), "definitions": len(defs), "references": len(refs)}


# the Definition and Reference fields in their order after the document's columns (see `_replace`)
_SYMBOL_COLUMNS = ("dataset", "document", "path", "lang", "start_line", "end_line", "qualname", "name", "kind",
                   "signature")
_REF_COLUMNS = ("dataset", "document", "path", "line", "name", "kind", "qualifier", "container", "alias")


def write_code_facts(*, dataset: Dataset, drafts: list[DocumentDraft]) -> dict[str, int]:
    """The rows of these just-written documents, from their drafts' chunks. Call inside the writer's transaction.

    Evaluation corpora (BEIR, judged sets) get none: nobody navigates them, and they are large."""
    if dataset.is_evaluation or not drafts:
        return {"files": 0, "definitions": 0, "references": 0}
    ids = dict(Document.objects.filter(dataset=dataset, path__in=[d.path for d in drafts])
               .values_list("path", "pk"))
    return _replace([(dataset.pk, ids[d.path], d.path, d.lang,
                      symbols.indexed_text((c.start_line, c.end_line, c.text) for c in d.chunks), d.facts)
                     for d in drafts if d.path in ids])


# --------------------------------------------------------------------------- the check (reconcile_code)
@dataclass
class CodeCheck:
    """What `check` found. `drifted`: documents whose stored rows differ from a fresh build; `missing`: documents
    with no CodeFile; `orphans`: rows whose document is gone (impossible by CASCADE; counted all the same)."""

    documents: int = 0
    definitions: int = 0
    references: int = 0
    drifted: list[int] = field(default_factory=list)
    missing: list[int] = field(default_factory=list)
    orphans: int = 0
    fixed: bool = False
    after: CodeCheck | None = None
    duration_s: float = 0.0

    @property
    def exact(self) -> bool:
        last = self.after or self
        return not (last.drifted or last.missing or last.orphans)

    def as_dict(self) -> dict[str, Any]:
        out = {"documents": self.documents, "definitions": self.definitions, "references": self.references,
               "drifted": len(self.drifted), "missing": len(self.missing), "orphans": self.orphans,
               "drifted_sample": sorted(self.drifted)[:SAMPLE], "missing_sample": sorted(self.missing)[:SAMPLE],
               "exact": self.exact, "fixed": self.fixed, "duration_s": round(self.duration_s, 3)}
        if self.after is not None:
            out["after"] = self.after.as_dict()
        return out


def stored_facts(document_ids: Iterable[int]) -> dict[int, symbols.FileSymbols]:
    """The facts as the rows hold them now, per document."""
    ids = list(document_ids)
    defs: dict[int, list[symbols.Definition]] = defaultdict(list)
    refs: dict[int, list[symbols.Reference]] = defaultdict(list)
    for row in Symbol.objects.filter(document_id__in=ids).values_list(
            "document_id", "start_line", "end_line", "qualname", "name", "kind", "signature"):
        defs[row[0]].append(symbols.Definition(*row[1:]))
    for row in SymbolRef.objects.filter(document_id__in=ids).values_list(
            "document_id", "line", "name", "kind", "qualifier", "container", "alias"):
        refs[row[0]].append(symbols.Reference(*row[1:]))
    return {i: symbols.FileSymbols(definitions=tuple(sorted(defs[i])), references=tuple(sorted(refs[i])))
            for i in ids}


def fresh_build(document_ids: Iterable[int]) -> dict[int, tuple[CodeFile, symbols.FileSymbols]]:
    """Each document's CodeFile and facts built anew from its chunks in Postgres (what ingest would write now)."""
    ids = list(document_ids)
    spans: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
    for doc_id, start, end, text in (Chunk.objects.filter(document_id__in=ids).order_by("document_id", "start_line")
                                     .values_list("document_id", "start_line", "end_line", "text")):
        spans[doc_id].append((start, end, text))
    out = {}
    for doc in Document.objects.filter(pk__in=ids).only("pk", "dataset_id", "path", "lang"):
        text = symbols.indexed_text(spans[doc.pk])
        out[doc.pk] = _file_row(dataset_id=doc.dataset_id, document_id=doc.pk, path=doc.path, lang=doc.lang,
                                text=text)  # the facts extracted once, for the row's digest and the comparison
    return out


def _scan(*, dataset_ids: list[int] | None, batch: int) -> CodeCheck:
    found = CodeCheck()
    docs = Document.objects.filter(dataset__is_evaluation=False)
    if dataset_ids is not None:
        docs = docs.filter(dataset_id__in=dataset_ids)
    all_ids = list(docs.order_by("pk").values_list("pk", flat=True))
    found.documents = len(all_ids)
    for i in range(0, len(all_ids), batch):
        part = all_ids[i:i + batch]
        stored = {f.document_id: f for f in CodeFile.objects.filter(document_id__in=part)}
        have = stored_facts(part)
        for doc_id, (fresh_file, fresh) in fresh_build(part).items():
            now = stored.get(doc_id)
            if now is None:
                found.missing.append(doc_id)
                continue
            found.definitions += len(have[doc_id].definitions)
            found.references += len(have[doc_id].references)
            same_file = (now.dataset_id, now.path, now.lang, now.lines, list(now.trigrams), now.symbols_digest) == \
                (fresh_file.dataset_id, fresh_file.path, fresh_file.lang, fresh_file.lines, fresh_file.trigrams,
                 fresh.digest())
            if not same_file or have[doc_id] != fresh:
                found.drifted.append(doc_id)
    scope = {"dataset_id__in": dataset_ids} if dataset_ids is not None else {}
    live = Document.objects.filter(**scope).values("pk")
    found.orphans = sum(model.objects.filter(**scope).exclude(document_id__in=live).count()
                        for model in (CodeFile, Symbol, SymbolRef))
    return found


def check(*, dataset_ids: list[int] | None = None, fix: bool = False, batch: int = 200) -> CodeCheck:
    """Compare every document's code rows with a fresh build from its chunks; with `fix`, rewrite the documents
    that differ (and drop orphans) and check again."""
    t0 = time.perf_counter()
    found = _scan(dataset_ids=dataset_ids, batch=batch)
    if fix:
        found.fixed = True
        if not found.exact:
            repair(document_ids=[*found.drifted, *found.missing], dataset_ids=dataset_ids)
            found.after = _scan(dataset_ids=dataset_ids, batch=batch)
    found.duration_s = time.perf_counter() - t0
    return found


def repair(*, document_ids: list[int], dataset_ids: list[int] | None = None) -> None:
    """Rewrite these documents' rows from their chunks, each batch under its dataset's write lock."""
    by_dataset: dict[int, list[int]] = defaultdict(list)
    for doc_id, ds_id in Document.objects.filter(pk__in=document_ids).values_list("pk", "dataset_id"):
        by_dataset[ds_id].append(doc_id)
    for ds_id, ids in sorted(by_dataset.items()):
        with transaction.atomic():
            lock_dataset_writes(dataset_id=ds_id)
            spans: dict[int, list[tuple[int, int, str]]] = defaultdict(list)
            for doc_id, start, end, text in (Chunk.objects.filter(document_id__in=ids)
                                             .values_list("document_id", "start_line", "end_line", "text")):
                spans[doc_id].append((start, end, text))
            docs = Document.objects.filter(pk__in=ids).values_list("pk", "path", "lang")
            _replace([(ds_id, pk, path, lang, symbols.indexed_text(sorted(spans[pk])), None) for pk, path, lang in docs])
    scope = {"dataset_id__in": dataset_ids} if dataset_ids is not None else {}
    live = Document.objects.filter(**scope).values("pk")
    for model in (CodeFile, Symbol, SymbolRef):
        model.objects.filter(**scope).exclude(document_id__in=live).delete()
