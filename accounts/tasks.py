"""Celery tasks of the accounts app: mail that must not be sent from the request.

Why a task: a password-reset request that looked the address up and sent the mail itself took longer for a
registered address than for an unknown one; the request now only enqueues (accounts/password_reset.py).
"""
from __future__ import annotations

from celery import shared_task

from accounts.password_reset import TASK
from accounts.password_reset import send_password_reset as _send


@shared_task(name=TASK)
def send_password_reset(*, email: str, link_base: str) -> int:
    """Mail a reset link to the accounts of `email` (none for an unknown address); how many were sent."""
    return _send(email=email, link_base=link_base)
