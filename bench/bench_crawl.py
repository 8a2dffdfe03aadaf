"""Web source crawl: a local 200-page site on 127.0.0.1, crawled through the real sync job (fetch, extract, embed,
write), first with the configured politeness, then re-crawled (every page answers 304 to its ETag).

Why: a crawl must keep to the configured politeness toward the site it crawls. The server logs every
request's arrival, so the per-host request rate and the smallest gap between two requests are measured where a
site owner would measure them, and set against what SOURCES_CRAWL_DELAY_S and SOURCES_PER_HOST_CONCURRENCY allow.
Baselines measured in the same run: a plain sequential httpx loop over the same URLs (what the server and the
network give with no crawler at all), and the same crawl with no delay (the crawler's own cost: robots, link
extraction, trafilatura, embedding, writes). Each site has its own words, so no crawl reuses another's cached
vectors.

    .venv/bin/python bench/bench_crawl.py [--pages 200] [--delay 0.05] [--concurrency 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, p50, pct, table, write_result

WORDS = ("river mountain lantern copper orchard harbor meadow glacier violin saddle tunnel beacon quarry falcon "
         "marble thistle compass ember willow canyon").split()


def build_site(site, *, pages: int, flavour: int) -> None:
    from tests.search.sources.site_server import html_page

    site.page("/robots.txt", "User-agent: *\nDisallow: /private/\n", content_type="text/plain")
    site.page("/", html_page("Handbook", f"Handbook number {flavour} of the benchmark site.",
                             links=[f"/section/{i}.html" for i in range(0, pages, 10)]))
    for i in range(pages - 1):
        w = [WORDS[(i * 7 + k * 3 + flavour) % len(WORDS)] for k in range(6)]
        text = (f"Page {i} of handbook {flavour} is about the {w[0]} near the {w[1]}. "
                f"It explains how a {w[2]} and a {w[3]} relate, and why the {w[4]} matters for the {w[5]}.")
        links = [f"/section/{j}.html" for j in (i + 1, i + 2, (i * 13) % (pages - 1)) if j < pages - 1]
        site.page(f"/section/{i}.html", html_page(f"Section {i} {w[0]}", text, links=links))


def crawl_once(site, dataset, *, delay: float, concurrency: int) -> dict:
    from django.conf import settings

    from search.sources.sync import start_sync

    settings.SOURCES_CRAWL_DELAY_S = delay
    settings.SOURCES_PER_HOST_CONCURRENCY = concurrency
    site.clear_log()
    t0 = time.perf_counter()
    job = start_sync(dataset=dataset, run_now=True)
    wall = time.perf_counter() - t0
    if job.status != "done":
        raise SystemExit(f"crawl failed: {job.error}")
    starts = sorted(h.t for h in site.log)  # arrival times stamped by the server's own process
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    span = (starts[-1] - starts[0]) if len(starts) > 1 else 0.0
    return {"wall": wall, "requests": len(starts), "rate": (len(starts) - 1) / span if span else 0.0,
            "min_gap_ms": min(gaps) * 1000 if gaps else 0.0, "p5_gap_ms": pct(gaps, 5) * 1000,
            "median_gap_ms": p50(gaps) * 1000, "in_flight": site.max_in_flight,
            "pages": job.result["indexed_count"] + job.result["not_modified"] + job.result["unchanged"],
            "not_modified": job.result["not_modified"], "indexed": job.result["indexed_count"],
            "embedded": job.embeddings_computed, "cached": job.embeddings_cached}


def raw_fetch(site, urls: list[str]) -> dict:
    import httpx

    t0 = time.perf_counter()
    with httpx.Client(trust_env=False) as client:
        for u in urls:
            client.get(u).raise_for_status()
    wall = time.perf_counter() - t0
    return {"wall": wall, "requests": len(urls), "rate": len(urls) / wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()

    from _common import setup_django

    setup_django()
    from django.conf import settings

    from accounts.models import User
    from projects.models import Project
    from search.models import Dataset, Source
    from tests.search.sources.site_server import SiteProcess

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    user = User.objects.create_user(email="bench@example.com", password="x" * 12)
    project = Project.objects.create(slug="crawl-bench", name="Crawl bench")
    rows, sites = [], []
    try:
        def make(flavour: int) -> tuple[SiteProcess, Dataset]:
            site = SiteProcess()  # its own process: its clock is not held up by the crawler's GIL
            sites.append(site)
            build_site(site, pages=args.pages, flavour=flavour)
            ds = Dataset.objects.create(project=project, name=f"site-{flavour}", kind="web")
            Source.objects.create(dataset=ds, type="web", created_by=user, config={
                "seeds": [site.url("/")], "scope": "same-host", "max_pages": args.pages + 10, "max_depth": 20,
                "include": [], "exclude": []})
            return site, ds

        polite_site, polite_ds = make(1)
        free_site, free_ds = make(2)
        urls = [polite_site.url("/")] + [polite_site.url(f"/section/{i}.html") for i in range(args.pages - 1)]
        base = raw_fetch(polite_site, urls)
        rows.append(["plain httpx loop, sequential (baseline)", base["requests"], "-", round(base["wall"], 2),
                     "-", round(base["rate"], 1), "-", "-", "-", "-"])
        # (the crawler's own clock: a request's turn comes SOURCES_CRAWL_DELAY_S after the previous request's
        # headers reached the socket; the server stamps arrivals when its process runs, so on a loaded machine a
        # single gap can read a few ms short while the rate stays under 1/delay)
        for name, site, ds, delay in [
                (f"first crawl, delay {args.delay:g} s, concurrency {args.concurrency}", polite_site, polite_ds,
                 args.delay),
                (f"re-crawl (all 304), delay {args.delay:g} s", polite_site, polite_ds, args.delay),
                (f"first crawl, no delay, concurrency {args.concurrency} (baseline)", free_site, free_ds, 0.0),
                ("re-crawl (all 304), no delay (baseline)", free_site, free_ds, 0.0)]:
            r = crawl_once(site, ds, delay=delay, concurrency=args.concurrency)
            rows.append([name, r["requests"], r["pages"], round(r["wall"], 2), round(r["pages"] / r["wall"], 1),
                         round(r["rate"], 1),
                         f"{r['min_gap_ms']:.1f} / {r['p5_gap_ms']:.1f} / {r['median_gap_ms']:.1f}", r["in_flight"],
                         f"{r['indexed']} / {r['not_modified']}", f"{r['embedded']} / {r['cached']}"])
    finally:
        for s in sites:
            s.close()
    text = "\n".join([
        f"# Web crawl of a local {args.pages}-page site",
        "",
        f"Configured politeness: SOURCES_CRAWL_DELAY_S = {args.delay:g} s between request starts to one host "
        f"(at most {1 / args.delay if args.delay else float('inf'):.1f} requests/s), SOURCES_PER_HOST_CONCURRENCY "
        f"= {args.concurrency} requests in flight at most. Requests, rate and gaps are measured by the site's own "
        "server (in its own process) from request arrival times; the delay is counted from the moment the previous "
        "request's headers reached the socket, so on a loaded machine one gap may read a few ms short while the "
        "rate stays under 1/delay. "
        "Each crawl is the real sync job: robots.txt, sitemap probe, fetch, trafilatura, chunking, MiniLM "
        "embedding, Postgres writes.",
        "",
        table(["run", "requests", "pages", "wall s", "pages/s", "requests/s at the host", "gap ms min / p5 / median",
               "max in flight", "indexed / 304", "embedded / cached"], rows),
        "",
        machine(),
    ])
    write_result("crawl", text)


if __name__ == "__main__":
    main()
