"""What a hostile web server can make one fetch or one page's parse cost, before and after the bounds of
docs/security.md ("Hostile web servers"), in one run.

Each case runs in a child process on the code of this tree ("after") and on the code of the commit before the
bounds (`--before`, 97d1acf, extracted with `git archive` into a temp folder: "before"). A child is killed after
`--cap-s` seconds and runs under an address-space limit (`--mem-gib`, RLIMIT_AS), so the old code's worst cases
end; what it reports is its time, its peak resident memory above what it held before the case (ru_maxrss), and
the outcome. The hostile server is a raw-socket server on 127.0.0.1 in this process (tests/hardening/
hostile_http.py). Cases:

- crafted markup: `<a x='` repeated (36 KB, 144 KB, 1 MB), links read as the crawler reads them;
- one element with 50,000 attributes (about 400 KB): the page's links, then its text through the web reader
  (the tree it builds is quadratic in one element's attributes), or its refusal;
- a link farm: 1 MB of distinct links on one page;
- a page gzipped twice (`Content-Encoding: gzip, gzip`), 256 MiB and 1 GiB inflated from 1 KB and 4 KB, fetched;
- headers that trickle one byte every 0.5 s (the server keeps it up for longer than the cap), fetched with a
  total deadline of `--deadline-s` (WEB_FETCH_TOTAL_TIMEOUT_S; its default is 30 s).
- the page reader on 1 MB of ordinary markup (paragraphs, a list, a table) and on 2,000 attributes on one
  element, as a saved file or an upload reaches it (no crawler in front);
- a robots.txt of 500 KiB of wildcard rules (about 15,000), then 200 URLs of 1,000 characters checked against it;
- a resolver that takes 120 s to answer (the process's getaddrinfo replaced by one that sleeps), a fetch of a
  host name under it.

    .venv/bin/python bench/bench_hostile_web.py [--cap-s 60] [--mem-gib 3] [--deadline-s 10]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if "--child" not in sys.argv:  # a child imports the project from the tree it measures (PYTHONPATH)
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, table, write_result  # noqa: E402

BEFORE = "97d1acf"
CAP_BYTES = 2_000_000  # SOURCES_MAX_PAGE_BYTES's default


def crafted(size: int) -> str:
    return "<html><body><p>A page built to stall a tokenizer.</p><a href='/next.html'>next</a>" + "<a x='" * (size // 6)


def many_attributes(n: int = 50_000) -> str:
    return ("<html><body><h1>Attributes</h1><p " + " ".join(f"x{i}=1" for i in range(n))
            + ">A paragraph with fifty thousand attributes.</p></body></html>")


def paragraphs(size: int) -> str:
    return "<html><body><h1>Paragraphs</h1>" + "<p>word</p>" * (size // 11) + "</body></html>"


def list_items(size: int) -> str:
    return "<html><body><h1>A list</h1><ul>" + "<li>x</li>" * (size // 10) + "</ul></body></html>"


def table_rows(size: int) -> str:
    return "<html><body><h1>A table</h1><table>" + "<tr><td>a</td></tr>" * (size // 18) + "</table></body></html>"


def wildcard_robots(size: int) -> bytes:
    """Wildcard rules that each search the whole URL and match none of the URLs checked."""
    head = "User-agent: *\nDisallow: /private\n"
    lines, total, i = [], len(head), 0
    while True:
        line = f"Disallow: /*a*a*a*a*z{i}\n"
        if total + len(line) > size:
            break
        lines.append(line)
        total += len(line)
        i += 1
    return (head + "".join(lines)).encode()


def wide_elements(size: int) -> str:
    """Elements of 256 attributes each (the most the reader accepts on one element), as many as fit."""
    el = "<p " + " ".join(f"a{i}=1" for i in range(256)) + ">w</p>"
    return "<html><body>" + el * (size // len(el)) + "</body></html>"


def paragraph_count(count: int) -> str:
    return "<html><body><h1>Paragraphs</h1>" + "<p>word</p>" * count + "</body></html>"


READERS = {"paragraphs": paragraphs, "list": list_items, "table": table_rows, "wide": wide_elements,
           "count": paragraph_count}
ROBOTS_URLS = 200


def link_farm() -> str:
    return "<html><body>" + "".join(f'<a href="/p/{i}.html">{i}</a>' for i in range(40_000)) + "</body></html>"


# --- the child: one case on one tree ----------------------------------------------------------------------------
def bench_fetcher(fetcher_mod: Any) -> Any:
    """The measured tree's Fetcher: this tree's takes a FetchPolicy, the commit before it took the fields one by one."""
    fields = {"user_agent": "HostileBench/1.0", "timeout_s": 10.0, "delay_s": 0.0, "per_host": 1,
              "max_page_bytes": CAP_BYTES}
    policy = getattr(fetcher_mod, "FetchPolicy", None)
    if policy is None:
        return fetcher_mod.Fetcher(**fields, in_scope=lambda _u: True)
    return fetcher_mod.Fetcher(policy=policy(**fields), in_scope=lambda _u: True)


def child(case: str, arg: str) -> dict:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["SOURCES_ALLOWED_NETWORKS"] = "127.0.0.1/32"
    os.environ["WEB_FETCH_TOTAL_TIMEOUT_S"] = os.environ.get("BENCH_DEADLINE_S", "30")  # read after, not before
    if case == "dns":  # a resolver that takes 120 s, in place before the project binds getaddrinfo
        import socket

        real = socket.getaddrinfo

        def slow_getaddrinfo(host, port, *args, **kwargs):  # getaddrinfo's shape
            if str(host).endswith(".example"):
                time.sleep(120)
                return real("127.0.0.1", port, *args, **kwargs)
            return real(host, port, *args, **kwargs)

        socket.getaddrinfo = slow_getaddrinfo
    import django

    django.setup()  # settings only: nothing is started
    from search.sources.web import fetcher as fetcher_mod
    from search.sources.web import links

    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t0 = time.perf_counter()
    if case.startswith("crafted") or case == "farm":
        html = link_farm() if case == "farm" else crafted(int(arg))
        found = links.page_links(html, url="http://h/")
        outcome = f"{len(found.links)} links"
        if getattr(found, "links_dropped", 0):
            outcome += f", {found.links_dropped} past the cap"
    elif case == "reader":
        from search.ingest.web import web_document_from_bytes

        name, _, size = arg.partition(":")
        html = many_attributes(int(size)) if name == "attributes" else READERS[name](int(size))
        draft, why = web_document_from_bytes(rel="page.html", data=html.encode(), markdown=False)
        outcome = f"read: {len(draft.chunks)} chunks" if draft else f"not read: {why}"
    elif case == "robots":
        f = bench_fetcher(fetcher_mod)
        allowed = sum(f.allowed(f"{arg}/{i}/" + "a" * 990) for i in range(ROBOTS_URLS))
        note = f.host(arg + "/").robots_note
        outcome = f"{allowed} of {ROBOTS_URLS} URLs allowed" + (f"; {note}" if note else "")
    elif case == "attributes":
        from search.ingest.web import web_document_from_bytes
        from search.sources.web import crawler

        html = many_attributes()
        found = links.page_links(html, url="http://h/")
        limit = getattr(crawler, "MAX_ATTRIBUTES_PER_ELEMENT", None)
        if limit is not None and found.max_attributes > limit:
            outcome = f"refused: an element has {found.max_attributes} attributes"
        else:
            draft, why = web_document_from_bytes(rel="http://h/", data=html.encode(), markdown=False, url="http://h/")
            outcome = f"read: {len(draft.chunks)} chunks" if draft else f"not read: {why}"
    else:  # a fetch from the hostile server (trickle, bomb, dns)
        f = bench_fetcher(fetcher_mod)
        got = f.get(arg)
        outcome = f"{got.outcome}" + (f": {got.error}" if got.error else "") + f"; {f.bytes_read:,} bytes kept"
    elapsed = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"s": elapsed, "peak_mb": (peak_kb - base_kb) / 1024, "outcome": outcome[:160]}


def run_child(*, tree: Path, case: str, arg: str, cap_s: float, mem_gib: float, deadline_s: float) -> dict:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (int(mem_gib * 2**30),) * 2)

    env = {**os.environ, "PYTHONPATH": str(tree), "BENCH_DEADLINE_S": str(deadline_s)}
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", case, arg], cwd=tree,
                              env=env, capture_output=True, text=True, timeout=cap_s, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return {"s": None, "peak_mb": None, "outcome": f"> {cap_s:g} s (killed)"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return {"s": time.perf_counter() - t0, "peak_mb": None,
                "outcome": f"crashed under the {mem_gib:g} GiB limit: {last[:120]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cell(r: dict) -> str:
    s = "—" if r["s"] is None else f"{r['s']:.2f} s"
    mem = "—" if r["peak_mb"] is None else f"{r['peak_mb']:,.0f} MB"
    return f"{s}, {mem}, {r['outcome']}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, metavar=("CASE", "ARG"), help=argparse.SUPPRESS)
    ap.add_argument("--cap-s", type=float, default=60.0, help="the before run of a case is killed after this")
    ap.add_argument("--mem-gib", type=float, default=3.0, help="address-space limit of each child")
    ap.add_argument("--deadline-s", type=float, default=10.0, help="WEB_FETCH_TOTAL_TIMEOUT_S for the fetches")
    ap.add_argument("--before", default=BEFORE, help="the commit measured as 'before'")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)), flush=True)
        os._exit(0)  # not waiting at exit for a lookup thread the fetch stopped waiting for

    from tests.hardening.hostile_http import HostileServer, answer, gzip_layers, trickle_headers

    server = HostileServer()
    bombs = {size: gzip_layers(size << 20, layers=2) for size in (256, 1024)}  # MiB inflated
    for size, bomb in bombs.items():
        server.routes[f"/bomb{size}"] = answer(body=bomb, headers=(("Content-Encoding", "gzip, gzip"),))
    server.routes["/trickle"] = trickle_headers(every_s=0.5, for_s=args.cap_s * 1.5)
    robots = wildcard_robots(500 * 1024)
    robots_site = HostileServer()  # a site of its own: robots.txt is read per origin
    robots_site.routes["/robots.txt"] = answer(body=robots, content_type="text/plain")
    server.routes["/page.html"] = answer(body=b"<html><body><h1>Behind a slow resolver</h1></body></html>")
    old = Path(tempfile.mkdtemp(prefix="hostile-web-before-"))
    try:
        archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        cases = [
            ("crafted markup `<a x='` × 36 KB: links", "crafted", "36000"),
            ("crafted markup `<a x='` × 144 KB: links", "crafted", "144000"),
            ("crafted markup `<a x='` × 1 MB: links", "crafted", "1000000"),
            ("one element with 50,000 attributes (400 KB): links, then text or refusal", "attributes", "-"),
            ("link farm: 40,000 links (1 MB): links", "farm", "-"),
            *((f"`Content-Encoding: gzip, gzip`: {len(bomb):,} bytes on the wire, {size} MiB inflated", "bomb",
               server.url(f"/bomb{size}")) for size, bomb in bombs.items()),
            ("headers trickled one byte every 0.5 s", "trickle", server.url("/trickle")),
            ("reader: 1 MB of `<p>` paragraphs (90,000 elements)", "reader", "paragraphs:1000000"),
            ("reader: 1 MB of `<li>` list items (100,000 elements)", "reader", "list:1000000"),
            ("reader: 1 MB of table rows (55,000 rows)", "reader", "table:1000000"),
            ("reader: one element with 2,000 attributes, as a saved file or upload", "reader", "attributes:2000"),
            ("reader, the worst it still reads: 19,990 paragraphs (220 KB, under WEB_READER_MAX_ELEMENTS)", "reader",
             "count:19990"),
            ("reader, the worst it still reads: 1 MB of elements with 256 attributes each", "reader", "wide:1000000"),
            (f"robots.txt of {len(robots) // 1024} KiB, {robots.count(b'Disallow')} wildcard rules: "
             f"{ROBOTS_URLS} URLs of 1,000 characters checked", "robots", robots_site.url("")),
            ("a resolver that answers after 120 s: one fetch of a host name", "dns",
             f"http://slow-resolver.example:{server.port}/page.html"),
        ]
        rows = []
        for label, case, arg in cases:
            print(f"{label} ...", file=sys.stderr)
            before = run_child(tree=old, case=case, arg=arg, cap_s=args.cap_s, mem_gib=args.mem_gib,
                               deadline_s=args.deadline_s)
            after = run_child(tree=ROOT, case=case, arg=arg, cap_s=args.cap_s, mem_gib=args.mem_gib,
                              deadline_s=args.deadline_s)
            rows.append([label, cell(before), cell(after)])
            print(f"  before: {cell(before)}\n  after:  {cell(after)}", file=sys.stderr)
    finally:
        server.close()
        robots_site.close()
        shutil.rmtree(old, ignore_errors=True)
    text = "\n".join([
        "# Hostile web servers: one fetch, one page (`bench/bench_hostile_web.py`)",
        "",
        f"Before: commit {args.before}; after: this tree. Each cell: time, peak resident memory above the child's "
        f"own before the case, outcome. A child is killed after {args.cap_s:g} s and limited to "
        f"{args.mem_gib:g} GiB of address space. Page cap {CAP_BYTES:,} bytes (SOURCES_MAX_PAGE_BYTES); the "
        f"fetches run with a per-read timeout of 10 s and, after, WEB_FETCH_TOTAL_TIMEOUT_S={args.deadline_s:g}.",
        "",
        table(["case", "before: time, memory, outcome", "after: time, memory, outcome"], rows),
        "",
        machine(),
    ])
    write_result("hostile_web", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
