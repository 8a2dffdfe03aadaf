"""`manage.py mcp --key <API key>`: the MCP server over stdio, for editors and agents that launch a local process.

`--selftest` lists the tools and runs one search through the same server (an in-process MCP client), prints a
one-screen summary and exits 0 when both worked, 1 otherwise. With `--url http://host:8000/mcp` it checks a
running server over streamable HTTP instead: the way to check while `make run` serves, since the embedded
Qdrant store admits one open handle and the server holds it. A key that is wrong, revoked or expired is refused
before anything is served (exit 1, with the reason). PLATFORM_API_KEY works in place of --key, so the secret need
not sit in an editor's config file.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

import anyio
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.exceptions import AuthenticationFailed

from search.edge.mcp.server import caller_for_secret, http_client, in_process_client, serve_stdio


class Command(BaseCommand):
    help = "Serve the platform's MCP tools (search_context, read_span, answer_rules, ...) over stdio."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--key", default="", help="an API key (sk_...); default: $PLATFORM_API_KEY")
        parser.add_argument("--selftest", action="store_true", help="list the tools, run one search, exit 0/1")
        parser.add_argument("--project", default="", help="selftest: the project to search (default: the first)")
        parser.add_argument("--query", default="main entry point", help="selftest: the query to run")
        parser.add_argument("--url", default="", help="selftest: a running server's /mcp to check over HTTP")

    def handle(self, *args: object, **opts: Any) -> None:
        secret = opts["key"] or os.environ.get("PLATFORM_API_KEY", "")
        if not secret:
            raise CommandError("Give an API key: --key sk_... (or set PLATFORM_API_KEY). Create one on /keys/ or "
                               "with `manage.py create_api_key`.")
        try:
            caller = caller_for_secret(secret, transport="stdio")
        except AuthenticationFailed as exc:
            raise CommandError(f"The API key was refused ({exc.default_code}): {exc.detail}") from None
        if opts["selftest"]:
            ok = anyio.run(self._selftest, caller, opts["project"], opts["query"], opts["url"], secret)
            if not ok:
                sys.exit(1)
            return
        anyio.run(serve_stdio, caller)

    async def _selftest(self, caller: Any, project: str, query: str, url: str, secret: str) -> bool:
        out = self.stdout
        t0 = time.perf_counter()
        async with (http_client(url, secret) if url else in_process_client(caller)) as client:
            if url:
                out.write(f"over streamable HTTP: {url}")
            tools = (await client.list_tools()).tools
            out.write(f"MCP server OK as {caller.user.email} (key {caller.key.prefix}, scopes "
                      f"{', '.join(caller.key.scopes)})")
            out.write(f"{len(tools)} tools: {', '.join(t.name for t in tools)}")
            listed = await client.call_tool("list_projects", {})
            projects = (listed.structured_content or {}).get("projects", [])
            if listed.is_error or not projects:
                out.write(self.style.ERROR(f"list_projects: {_why(listed) if listed.is_error else 'no project'}"))
                return False
            slug = project or projects[0]["slug"]
            found = await client.call_tool("search_context", {"project": slug, "q": query, "top_k": 5})
            if found.is_error:
                out.write(self.style.ERROR(f"search_context({slug!r}, {query!r}) failed: {_why(found)}"))
                return False
            data = found.structured_content or {}
            out.write(f"search_context({slug!r}, {query!r}): {len(data['results'])} result(s), "
                      f"session {data['search_session_id']}")
            for r in data["results"]:
                out.write(f"  {r['rank']}. {r['span']}  score={r['score']:.3f}")
        out.write(self.style.SUCCESS(f"selftest passed in {time.perf_counter() - t0:.1f} s"))
        return True


def _why(result: Any) -> str:
    body = result.structured_content or {}
    return f"{body.get('code', 'error')}: {body.get('detail', '')}"
