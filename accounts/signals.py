"""What accounts tells the apps above it, without knowing them.

`account_confirmed` is sent with `user=` when a self-serve sign-up is confirmed (accounts.signup.confirm_sign_up),
inside the transaction that creates the account: a receiver's writes commit with the account, and a receiver that
fails rolls the account back. The credits app grants the free sign-up credits from it (credits/apps.py)."""
from django.dispatch import Signal

account_confirmed = Signal()
