"""`manage.py reference_docs [--write]`: check or rewrite the generated pages of docs/reference/."""
from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from console.reference import stale_pages, write_pages


class Command(BaseCommand):
    help = ("Check that docs/reference/ (settings, commands, MCP tools, scopes, benchmark results) matches the "
            "code; --write rewrites the pages that differ.")

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--write", action="store_true", help="rewrite the pages that differ from the code")

    def handle(self, *args: Any, **opts: Any) -> None:
        if opts["write"]:
            changed = write_pages()
            self.stdout.write(f"rewritten: {', '.join(changed) or 'none'}")
            return
        stale = stale_pages()
        if stale:
            raise CommandError(f"out of date: {', '.join(stale)} (run manage.py reference_docs --write)")
        self.stdout.write("docs/reference is up to date")
