"""Where a cited page opens: the URL of a document's original, to which a result, a citation or a pack span adds
`#page=N` (search.engine.pages.page_url).

Why resolved per query and not stored on chunks: the link goes through the asking project (its slug names the
endpoint, search.edge.api.originals, which applies the same access filter as search), and a document's original
can be replaced or removed without rewriting its chunks. A kept original (an upload, a folder or a git source)
is served by the platform; a crawled PDF opens at its own URL; anything else (a Markdown rulebook, a DOCX, a
document too large to keep) has no link.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from django.urls import reverse

from search.engine.access import accessible_dataset_ids
from search.engine.pages import PAGE_LINKED, page_url
from search.models import Document, DocumentOriginal

if TYPE_CHECKING:
    from projects.models import Project


def original_path(*, slug: str, sha256: str) -> str:
    """The endpoint that serves an original to members of project `slug` (root-relative, like every link the API
    and the pages give)."""
    return reverse("api-original", kwargs={"slug": slug, "sha256": sha256})


def document_bases(*, slug: str, document_ids: Iterable[int | None]) -> dict[int, str]:
    """document id -> the URL its pages open at (no fragment), for those that have one; two queries at most."""
    ids = {int(i) for i in document_ids if i}
    if not ids:
        return {}
    stored = dict(DocumentOriginal.objects.filter(document_id__in=ids).values_list("document_id", "sha256"))
    out = {pk: original_path(slug=slug, sha256=h) for pk, h in stored.items()}
    for pk, url, meta in Document.objects.filter(pk__in=ids - set(stored), url__startswith="http").values_list(
            "pk", "url", "meta"):
        if isinstance(meta, dict) and meta.get("format") in PAGE_LINKED:
            out[pk] = url.split("#", 1)[0]
    return out


def link_results(*, slug: str, results: list[dict[str, Any]]) -> None:
    """Each result (a dict with `document_id` and `page`) gets `page_url`: its page's link, or None."""
    bases = document_bases(slug=slug, document_ids=(r.get("document_id") for r in results))
    for r in results:
        r["page_url"] = page_url(base=bases.get(r.get("document_id") or 0, ""), page=r.get("page", ""))


def link_pack(*, slug: str, pack: dict[str, Any]) -> None:
    """Each span of a context pack that says its page gets `page_url` (the files carry their `document_id`)."""
    files = [f for f in pack.get("files", []) if any(s.get("page") for s in f.get("spans", []))]
    bases = document_bases(slug=slug, document_ids=(f.get("document_id") for f in files))
    for f in files:
        for s in f["spans"]:
            if s.get("page"):
                s["page_url"] = page_url(base=bases.get(f.get("document_id") or 0, ""), page=s["page"])


def readable_original(*, project: Project, sha256: str) -> DocumentOriginal | None:
    """The original with this hash of a document in a dataset `project` reads (own, global, or shared to it: the
    access filter search applies, search.engine.access), or None, whether it does not exist or is another
    tenant's: the caller answers 404 either way, so a hash confirms nothing about content it cannot read."""
    return (DocumentOriginal.objects.select_related("document")
            .filter(sha256=sha256, document__dataset_id__in=accessible_dataset_ids(project))
            .order_by("document_id").first())
