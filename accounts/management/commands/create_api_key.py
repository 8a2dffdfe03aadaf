from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from accounts.apikeys import issue_api_key
from accounts.models import User


class Command(BaseCommand):
    help = "Issue an API key for a user and print its secret (shown this once only)."

    def add_arguments(self, parser) -> None:  # noqa: ANN001
        parser.add_argument("email")
        parser.add_argument("--name", default="cli")

    def handle(self, *args, email: str, name: str, **opts) -> None:
        user = User.objects.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no user with email {email!r}")
        issued = issue_api_key(user=user, name=name[:100])
        self.stderr.write(f"API key {issued.api_key.prefix} for {user.email} (store it now; it is not shown again):")
        self.stdout.write(issued.secret)
