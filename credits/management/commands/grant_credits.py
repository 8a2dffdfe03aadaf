from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import User
from config.errors import ApiError
from credits.ledger import grant


class Command(BaseCommand):
    help = "Grant credits to a user (one ledger row). Usage: grant_credits EMAIL AMOUNT [--reason TEXT]"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("amount", type=int)
        parser.add_argument("--reason", default="manual grant")

    def handle(self, *args: object, email: str, amount: int, reason: str, **opts: object) -> None:
        user = User.objects.filter(email__iexact=email.strip()).first()
        if user is None:
            raise CommandError(f"no user with email {email!r}")
        try:
            entry = grant(user=user, amount=amount, reason=reason[:64], reference_type="command")
        except ApiError as exc:
            raise CommandError(exc.detail) from None
        self.stdout.write(f"granted {amount} credit(s) to {user.email}; balance {entry.balance_after}")
