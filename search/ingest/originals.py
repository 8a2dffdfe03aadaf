"""Store the originals the readers kept (search.ingest.formats.originals) beside their documents.

Why in the writer's transaction: a document and the bytes its page links open are written, replaced and removed
together, so a link never opens an edition the chunks were not read from. A rewritten document whose reader kept
nothing (a PDF replaced by Markdown, or grown past ORIGINALS_MAX_BYTES) loses its old original with its chunks."""
from __future__ import annotations

import hashlib
from collections.abc import Sequence

from search.engine.pages import PAGE_LINKED
from search.models import Document, DocumentOriginal


def replace_originals(*, written: Sequence[tuple[Document, bytes | None, str, bool]]) -> int:
    """(document, kept bytes or None, format, whether the document is new) for each document just written -> its
    original replaced or removed, in at most two statements per batch (none for a batch of new documents that
    kept nothing: a code ingest pays nothing); -> how many were stored."""
    replaced = [doc.pk for doc, _, _, fresh in written if not fresh]
    if replaced:
        DocumentOriginal.objects.filter(document_id__in=replaced).delete()
    rows = [DocumentOriginal(document=doc, sha256=hashlib.sha256(data).hexdigest(), size=len(data), data=data,
                             media_type=PAGE_LINKED.get(fmt, "application/pdf"))
            for doc, data, fmt, _ in written if data is not None]
    if not rows:
        return 0
    DocumentOriginal.objects.bulk_create(rows, batch_size=8)
    return len(rows)
