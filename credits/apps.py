from django.apps import AppConfig


class CreditsConfig(AppConfig):
    name = "credits"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Grant the free sign-up credits when accounts confirms an account (credits/signup.py)."""
        from accounts.signals import account_confirmed  # here: apps must be ready first
        from credits.signup import grant_signup_credits  # here: it imports models

        account_confirmed.connect(grant_signup_credits, dispatch_uid="credits.signup")
