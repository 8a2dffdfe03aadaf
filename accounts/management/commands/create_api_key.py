from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.apikeys import MAX_EXPIRY_DAYS, create_api_key
from accounts.models import SCOPES, User
from config.errors import ApiError


class Command(BaseCommand):
    help = "Issue an API key for a user and print its secret (shown this once only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--name", default="cli")
        parser.add_argument("--scopes", default=",".join(SCOPES),
                            help=f"comma-separated subset of {','.join(SCOPES)} (default: all)")
        parser.add_argument("--project", action="append", dest="projects", metavar="SLUG",
                            help="limit the key to this project (repeatable; default: every project of the user)")
        parser.add_argument("--expires-in-days", type=int, default=None,
                            help=f"1..{MAX_EXPIRY_DAYS} (default: never)")

    def handle(self, *args: object, email: str, name: str, scopes: str, projects: list[str] | None,
               expires_in_days: int | None, **opts: object) -> None:
        user = User.objects.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no user with email {email!r}")
        try:
            issued = create_api_key(user=user, name=name[:100], scopes=[s.strip() for s in scopes.split(",") if s.strip()],
                                    projects=projects, expires_in_days=expires_in_days)
        except ApiError as exc:
            raise CommandError(f"{exc.field or 'error'}: {exc.detail}") from None
        key = issued.api_key
        self.stderr.write(f"API key {key.prefix} for {user.email} with scopes {','.join(key.scopes)}"
                          f"{'' if key.project_ids is None else ' on ' + ','.join(projects or [])}"
                          f"{'' if key.expires_at is None else ', expiring ' + key.expires_at.isoformat()}"
                          " (store it now; it is not shown again):")
        self.stdout.write(issued.secret)
