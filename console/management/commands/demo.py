"""`manage.py demo`: the demo staff user, projects and whatever demo content the apps provide.

Idempotent: running it twice leaves one user, one grant and the same projects,
so `make run` can call it every time.
"""
from __future__ import annotations

import importlib
import os

from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from accounts.models import User
from credits.ledger import get_balance, grant
from credits.models import LedgerEntry
from projects.models import Membership, Project

DEMO_EMAIL = "demo@example.com"
DEMO_PASSWORD = os.environ.get("DEMO_PASSWORD", "demo-password")
DEMO_CREDITS = 100
LOADERS = (("search.ingest.demo", "load_demo"), ("search.rules.demo", "load_demo_rules"), ("people.importing.demo", "load_demo"))


def ensure_demo_platform() -> tuple[User, Project, Project]:
    """Create (or find) the demo user, its credits and the demo/global projects."""
    with transaction.atomic():
        user = User.objects.filter(email=DEMO_EMAIL).first()
        if user is None:
            user = User.objects.create_superuser(email=DEMO_EMAIL, password=DEMO_PASSWORD, name="Demo")
        if not LedgerEntry.objects.filter(user=user, reason="demo grant").exists():
            grant(user=user, amount=DEMO_CREDITS, reason="demo grant", reference_type="demo")
        demo, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
        glob, _ = Project.objects.get_or_create(slug=Project.GLOBAL_SLUG, defaults={"name": "Global content"})
        for project in (demo, glob):
            Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.OWNER})
    return user, demo, glob


class Command(BaseCommand):
    help = "Create the demo staff user, the demo and global projects, then load the demo content that exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--skip-content", action="store_true", help="only the user and projects")

    def handle(self, *args: object, skip_content: bool = False, **opts: object) -> None:
        user, demo, glob = ensure_demo_platform()
        self.stdout.write(self.style.SUCCESS(
            f"demo login: {DEMO_EMAIL} / {DEMO_PASSWORD}  (staff; {get_balance(user=user)} credits; "
            f"projects: {demo.slug}, {glob.slug})"))
        if skip_content:
            return
        for module_name, loader_name in LOADERS:
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name and module_name.startswith(exc.name):
                    self.stdout.write(f"{module_name}: not present yet, skipped")
                    continue
                raise
            loader = getattr(module, loader_name, None)
            if loader is None:
                self.stdout.write(f"{module_name}: has no {loader_name}(), skipped")
                continue
            self.stdout.write(f"{module_name}: loading …")
            loader(stdout=self.stdout)
