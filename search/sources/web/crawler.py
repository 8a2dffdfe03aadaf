"""Web sources: a polite, scoped crawl whose pages become the dataset's documents.

Why the crawl is a generator fed to search.ingest.writer.sync_documents: the sync machinery every other source
uses (content-hash skips, batched transactions, job counters, the outbox) then applies to pages too; the crawler
only decides which URL becomes which draft. Fetches run in a few threads (search.sources.web.fetcher enforces the
per-host delay and concurrency); results are handled in the order they were queued, so two crawls of the same
site make the same decisions.

A page's identity (Document.path and url) is its normalised URL, or its in-scope <link rel="canonical">. Its
validators (ETag, Last-Modified), the URL it was fetched from, its link depth and its outgoing links are kept in
Document.meta, so a re-crawl asks "changed?" (304: nothing re-read, nothing re-embedded), re-visits every known page
even when nothing links to it any more, and still follows the links of pages that did not change.

Documents: a link to a PDF, DOCX or EPUB inside the scope is fetched like a page (within the same size cap and
budgets) and its bytes go to the format registry (search.ingest.formats), which picks the reader; a body no reader
takes is reported by URL and reason (result.skipped.refused).

Removal: a known page answering 404 or 410, now excluded by the source's scope or robots.txt, or no longer a text
page or a readable document, is deleted; a 5xx, a timeout or a page grown past the size cap keeps what was stored
(a bad night on the site must not empty the dataset).
"""
from __future__ import annotations

import hashlib
import logging
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils import timezone

from config.errors import BadInput
from search.ingest.base import DocumentDraft
from search.ingest.formats import registry
from search.ingest.formats.documents import read_document
from search.ingest.web import refused_report
from search.ingest.writer import Skip, delete_documents, sync_documents
from search.models import Document, IngestJob
from search.sources import netguard
from search.sources.web.fetcher import Fetched, Fetcher, FetchPolicy
from search.sources.web.links import page_links, sitemap_entries
from search.sources.web.urls import Scope, normalize_url, origin

if TYPE_CHECKING:
    from search.ingest.progress import Progress
    from search.models import IngestJob, Source

log = logging.getLogger(__name__)

LIST_CAP = 200  # per list in job.result
MAX_STORED_LINKS = 500  # outgoing links kept per page for re-crawls
MAX_SITEMAPS = 20  # sitemap files read per crawl (an index may list thousands)
MAX_WORKERS = 16
# Fetches queued ahead per worker thread: the threads keep fetching (politely) while this thread extracts and
# embeds, so a first crawl's time is max(network, embedding) rather than their sum. Bounds memory: at most
# workers * READAHEAD bodies of SOURCES_MAX_PAGE_BYTES wait here.
READAHEAD = 4
# Links waiting to be fetched, per page the crawl may still request: a site whose pages each list thousands of
# links must not grow the frontier (and the set of URLs seen) far past what max_pages will ever fetch. The slack
# is for links robots.txt turns away (they are not requested, so they do not count against max_pages).
FRONTIER_PER_PAGE = 2
MAX_OUT_OF_SCOPE = 100_000  # distinct out-of-scope URLs remembered; past it they are counted, not kept


@dataclass
class _Item:
    url: str
    depth: int
    seed: bool = False


class _Crawl:
    """One crawl's decisions and tallies; `drafts()` is what sync_documents consumes."""

    def __init__(self, *, job: IngestJob, source: Source) -> None:
        self.job = job
        self.dataset = job.dataset
        cfg = source.config
        self.scope = Scope.from_config(cfg)
        self.max_pages = int(cfg.get("max_pages") or 200)
        self.max_depth = int(cfg.get("max_depth") if cfg.get("max_depth") is not None else 5)
        self.fetcher = Fetcher(policy=FetchPolicy.from_settings(), in_scope=self.scope.contains)
        # the pages an earlier crawl stored (meta.fetched_url marks them; documents pushed or uploaded into the
        # same dataset are not the crawl's to re-visit or remove): path -> (content hash, meta); and any URL we may
        # fetch -> the path it is stored as
        self.stored: dict[str, tuple[str, dict[str, Any]]] = {
            p: (h, m) for p, h, m in Document.objects.filter(dataset=self.dataset, meta__has_key="fetched_url")
            .values_list("path", "content_hash", "meta")}
        self.by_url: dict[str, str] = {}
        for path, (_h, meta) in self.stored.items():
            self.by_url[path] = path
            if meta.get("fetched_url"):
                self.by_url[meta["fetched_url"]] = path
        self.frontier: deque[_Item] = deque()
        self.queued: set[str] = set()
        self.emitted: set[str] = set()  # paths yielded this crawl (drafts and kept pages)
        self.hashes: dict[str, str] = {}  # content hash -> path, this crawl
        self.remove: set[str] = set()
        self.out_of_scope: set[str] = set()
        self.out_of_scope_more = 0  # past MAX_OUT_OF_SCOPE
        self.requested = 0
        self.handled = 0
        self.counts = {"fetched": 0, "not_modified": 0, "unchanged": 0, "duplicates": 0, "too_deep": 0,
                       "links_dropped": 0, "frontier_full": 0}
        self.lists: dict[str, list[str]] = {k: [] for k in ("indexed", "robots", "too_large", "content_type",
                                                             "no_text", "errors")}
        self.stopped = ""
        self.refused: dict[str, str] = {}  # URL -> why no reader took its bytes (job.result: skipped.refused)
        self.safe_seeds: list[str] = []  # the seeds whose hosts passed netguard at this crawl's start

    # --- tallies ----------------------------------------------------------------------------------------------
    def note(self, key: str, value: str) -> None:
        if len(self.lists[key]) < LIST_CAP:
            self.lists[key].append(value)
        self.counts[f"n_{key}"] = self.counts.get(f"n_{key}", 0) + 1

    def result(self, removed: list[str]) -> dict[str, Any]:
        skipped = {k: self.lists[k] for k in ("robots", "too_large", "content_type", "no_text", "errors")}
        skipped["out_of_scope"] = len(self.out_of_scope) + self.out_of_scope_more
        skipped["too_deep"] = self.counts["too_deep"]
        skipped["links_dropped"] = self.counts["links_dropped"]  # past WEB_MAX_LINKS_PER_PAGE on a page
        skipped["frontier_full"] = self.counts["frontier_full"]  # links beyond what max_pages could fetch
        skipped["refused"] = refused_report(self.refused, cap=LIST_CAP)  # by URL and reason, counted by reason
        return {"mode": "crawl", "seeds": self.scope.seeds[:LIST_CAP], "fetched": self.counts["fetched"],
                "not_modified": self.counts["not_modified"], "unchanged": self.counts["unchanged"],
                "duplicates": self.counts["duplicates"], "requested": self.requested,
                "bytes": self.fetcher.bytes_read, "indexed": self.lists["indexed"],
                "indexed_count": self.counts.get("n_indexed", 0), "removed": removed[:LIST_CAP],
                "removed_count": len(removed), "skipped": skipped,
                "errors_count": self.counts.get("n_errors", 0), "stopped": self.stopped}

    # --- the frontier -----------------------------------------------------------------------------------------
    def _outside(self, url: str) -> None:
        if url in self.out_of_scope:
            return
        if len(self.out_of_scope) < MAX_OUT_OF_SCOPE:
            self.out_of_scope.add(url)
        else:
            self.out_of_scope_more += 1

    def enqueue(self, url: str | None, *, depth: int, seed: bool = False, known: bool = False) -> None:
        """Queue a URL to fetch. `known`: a page the dataset holds (always re-visited); any other link waits only
        while the frontier is shorter than FRONTIER_PER_PAGE x the pages the crawl may still request."""
        if not url or url in self.queued:
            return
        if not self.scope.contains(url):
            self._outside(url)
            return
        if not seed and not self.scope.wanted(url):
            self._outside(url)
            if url in self.by_url:
                self.remove.add(self.by_url[url])
            return
        if depth > self.max_depth:
            self.counts["too_deep"] += 1
            return
        if not (seed or known) and len(self.frontier) >= FRONTIER_PER_PAGE * max(0, self.max_pages - self.requested):
            self.counts["frontier_full"] += 1
            return
        self.queued.add(url)
        self.frontier.append(_Item(url=url, depth=depth, seed=seed))

    def start(self) -> None:
        """Seeds, then every sitemap's pages, then every page the dataset already holds (re-visited even when
        nothing links to it any more; the pages of a changed scope are removed).

        Every seed's host is checked again (DNS may have changed since the source was set): an unsafe seed is
        not crawled, and when no seed is left the sync fails with that error (it lands on the Source's
        last_error) rather than finishing "successfully" with nothing fetched."""
        refused: list[BadInput] = []
        for s in self.scope.seeds:
            try:
                netguard.check_url(s, timeout_s=self.fetcher.total_timeout_s, lookup=self.fetcher.lookup)
            except BadInput as exc:
                refused.append(exc)
                self.note("errors", f"{s}: {exc.code}: {exc.detail}")
                continue
            self.safe_seeds.append(s)
            self.enqueue(s, depth=0, seed=True)
        if refused and len(refused) == len(self.scope.seeds):
            raise refused[0]
        self._read_sitemaps()
        for path, (_h, meta) in sorted(self.stored.items(), key=lambda kv: (kv[1][1].get("depth", 0), kv[0])):
            url = meta.get("fetched_url") or path
            if not self.scope.contains(url) or not self.scope.wanted(path):
                self.remove.add(path)
                continue
            self.enqueue(url, depth=int(meta.get("depth", 0)), known=True)

    def _read_sitemaps(self) -> None:
        """/sitemap.xml of each seed's origin and the Sitemap: lines of its robots.txt (on a seed's origin only);
        an index is followed one level down. Missing sitemaps are normal and not reported."""
        origins = list(dict.fromkeys(origin(s) for s in self.safe_seeds))
        todo: deque[str] = deque()
        for o in origins:
            todo.append(o + "/sitemap.xml")
            todo.extend(self.fetcher.sitemaps(o + "/"))
        done: set[str] = set()
        while todo and len(done) < MAX_SITEMAPS:
            url = normalize_url(todo.popleft())
            if not url or url in done or origin(url) not in origins:
                continue
            done.add(url)
            if not self.fetcher.allowed(url):
                continue
            got = self.fetcher.get_any(url)
            if got.outcome != "ok":
                if got.outcome == "error":
                    self.note("errors", f"{url}: {got.error}")
                continue
            pages, nested = sitemap_entries(got.body)
            todo.extend(nested)
            for p in pages:
                self.enqueue(normalize_url(p), depth=0)

    # --- the crawl --------------------------------------------------------------------------------------------
    def drafts(self) -> Iterator[DocumentDraft | Skip]:
        workers = max(1, min(MAX_WORKERS, settings.SOURCES_PER_HOST_CONCURRENCY * max(1, len(self.scope.origins))))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crawl")
        pending: deque[tuple[Future[Fetched], _Item]] = deque()
        try:
            self.start()
            while self.frontier or pending:
                while self.frontier and len(pending) < workers * READAHEAD:
                    if self.requested >= self.max_pages:
                        self.stopped = f"max_pages ({self.max_pages}) reached"
                        break
                    if self.fetcher.exhausted:
                        self.stopped = f"SOURCES_MAX_TOTAL_BYTES ({self.fetcher.max_total_bytes}) reached"
                        break
                    item = self.frontier.popleft()
                    if not self.fetcher.allowed(item.url):
                        yield self._disallowed(item)
                        continue
                    meta = self.stored.get(self.by_url.get(item.url, ""), ("", {}))[1]
                    pending.append((pool.submit(self.fetcher.get, item.url, etag=meta.get("etag", ""),
                                                last_modified=meta.get("last_modified", "")), item))
                    self.requested += 1
                if not pending:
                    break
                future, item = pending.popleft()
                out = self._handle(item, future.result())
                self.handled += 1
                budget = max(0, self.max_pages - self.requested)
                IngestJob.objects.filter(pk=self.job.pk).update(
                    files_total=self.handled + len(pending) + min(len(self.frontier), budget))
                yield out
        finally:
            for future, _ in pending:
                future.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def _disallowed(self, item: _Item) -> Skip:
        self.handled += 1
        self.note("robots", item.url)
        note = self.fetcher.host(item.url).robots_note
        if note and not any(e.endswith(note) for e in self.lists["errors"]):
            self.note("errors", f"{origin(item.url)}: {note}")
        path = self.by_url.get(item.url)
        if path and not note:  # the site forbids it now; an unreachable robots.txt forbids nothing for good
            self.remove.add(path)
        return Skip(item.url)

    def _keep(self, path: str | None, fallback: str) -> Skip:
        if path:
            self.emitted.add(path)
            return Skip(path, keep=True)
        return Skip(fallback)

    def _handle(self, item: _Item, got: Fetched) -> DocumentDraft | Skip:
        stored_path = self.by_url.get(item.url)
        if got.outcome == "ok":
            return self._page(item, got, stored_path)
        if got.outcome == "not_modified":
            self.counts["not_modified"] += 1
            if stored_path:
                self.queued.add(stored_path)
                for link in self.stored[stored_path][1].get("links", []):
                    self.enqueue(link, depth=item.depth + 1)
            return self._keep(stored_path, item.url)
        if got.outcome == "gone":
            if stored_path:
                self.remove.add(stored_path)
            else:
                self.note("errors", f"{item.url}: HTTP {got.status}")
            return Skip(item.url)
        if got.outcome == "robots":
            self.note("robots", got.final_url or item.url)
            if stored_path:
                self.remove.add(stored_path)
            return Skip(item.url)
        if got.outcome == "out_of_scope":
            self._outside(got.final_url)
            if stored_path:
                self.remove.add(stored_path)
            return Skip(item.url)
        if got.outcome == "content_type":
            self.note("content_type", item.url)
            if stored_path:
                self.remove.add(stored_path)
            return Skip(item.url)
        if got.outcome == "budget":  # queued before the bytes ran out; not requested: what is stored stays
            self.requested -= 1
            self.stopped = f"SOURCES_MAX_TOTAL_BYTES ({self.fetcher.max_total_bytes}) reached"
            return self._keep(stored_path, item.url)
        if got.outcome == "too_large":
            self.note("too_large", item.url)
            if got.inflated_past_cap:  # a compression bomb, not just a big page: the server's fault, said how
                self.note("errors", f"{item.url}: too large: {got.error}")
            return self._keep(stored_path, item.url)
        self.note("errors", f"{item.url}: {got.error or got.outcome}")
        return self._keep(stored_path, item.url)

    def _page(self, item: _Item, got: Fetched, stored_path: str | None) -> DocumentDraft | Skip:
        self.counts["fetched"] += 1
        final = got.final_url or item.url
        self.queued.add(final)
        # the bytes decide the reader (a PDF served as text/html is a PDF); the Content-Type only breaks a tie
        # between text kinds. Only an HTML page has links to follow.
        html = registry.detect(data=got.body, name=final, media_type=got.content_type).format == "html"
        text = _decode(got.body, got.charset) if html else ""
        found = page_links(text, url=final) if html else None
        if found:
            self.counts["links_dropped"] += found.links_dropped
        identity = final
        if found and found.canonical and self.scope.contains(found.canonical):
            identity = found.canonical
        self.queued.add(identity)  # reached through its canonical: not fetched again under its own name
        links = found.links if found and not found.nofollow else []
        for link in links:
            self.enqueue(link, depth=item.depth + 1)
        if stored_path and stored_path != identity:
            self.remove.add(stored_path)  # its identity changed (a new canonical, a redirect)
        if found and found.noindex:  # the page asks not to be indexed (its links are still followed)
            self.note("no_text", f"{identity} (noindex)")
            self.remove.add(identity)
            return Skip(item.url)
        if not self.scope.wanted(identity):  # a seed outside include/exclude: crawled through, not indexed
            return Skip(item.url)
        digest = hashlib.sha256(got.body).hexdigest()
        if identity in self.emitted or self.hashes.get(digest, identity) != identity:
            self.counts["duplicates"] += 1  # the same page under a second URL: stored once
            if stored_path and stored_path != self.hashes.get(digest):
                self.remove.add(stored_path)
            return Skip(item.url)
        self.hashes[digest] = identity
        self.emitted.add(identity)
        meta = {"fetched_url": item.url, "depth": item.depth, "etag": got.etag, "last_modified": got.last_modified,
                "content_type": got.content_type, "links": links[:MAX_STORED_LINKS]}
        before = self.stored.get(identity)
        if before and before[0] == digest:  # same bytes: keep the chunks, refresh the validators
            self.counts["unchanged"] += 1
            if before[1] != meta:

                Document.objects.filter(dataset=self.dataset, path=identity).update(meta=meta)
            return Skip(identity, keep=True)
        draft, why = read_document(kind="web", data=got.body, name=identity, url=identity,
                                   media_type=got.content_type, encoding=got.charset or "utf-8")
        if draft is None and why.startswith("markup refused"):  # its links were read (linear); not its text
            self.emitted.discard(identity)
            self.note("errors", f"{identity}: {why}")
            return self._keep(stored_path, item.url)
        if draft is None and why != "no readable text":  # no reader takes its bytes, or its reader refused it
            self.emitted.discard(identity)
            self.refused[identity] = why
            if before:
                self.remove.add(identity)
            return Skip(item.url)
        if draft is None:
            self.emitted.discard(identity)
            self.note("no_text", identity)
            if before:
                self.remove.add(identity)
            return Skip(item.url)
        draft.repo = urlsplit(identity).netloc
        draft.meta = {**draft.meta, **meta}  # a document's format and pages, then the crawl's validators
        draft.size_bytes = len(got.body)
        self.note("indexed", identity)
        return draft


def _decode(body: bytes, charset: str) -> str:
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:  # a charset name Python does not know
        return body.decode("utf-8", errors="replace")


def crawl_site(*, job: IngestJob, source: Source, progress: Progress | None = None) -> dict[str, Any]:
    """Crawl the source's seeds within scope and sync the dataset to what was found; -> the new Source.state.

    job.result says what the crawl did (see module docstring); job.files_total/done follow page by page."""
    crawl = _Crawl(job=job, source=source)
    drafts = crawl.drafts()
    try:
        sync_documents(dataset=job.dataset, drafts=drafts, job=job, delete_missing=False, progress=progress)
    finally:
        drafts.close()
        crawl.fetcher.close()
    removed = sorted(crawl.remove - crawl.emitted)
    deleted = delete_documents(dataset=job.dataset, paths=removed)
    IngestJob.objects.filter(pk=job.pk).update(result=crawl.result(removed), files_deleted=deleted,
                                               files_total=crawl.handled)
    log.info("crawl of %s: %d requested, %d indexed, %d not modified, %d removed", crawl.scope.seeds[:1],
             crawl.requested, crawl.counts.get("n_indexed", 0), crawl.counts["not_modified"], len(removed))
    return {"pages": Document.objects.filter(dataset=job.dataset).count(), "bytes": crawl.fetcher.bytes_read,
            "finished_at": timezone.now().isoformat()}
