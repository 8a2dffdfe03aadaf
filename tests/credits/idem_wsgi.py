"""gunicorn entry point for the idempotency kill test: the real WSGI application with the test-only charge URL."""
from django.conf import settings

from console.wsgi import application

settings.ROOT_URLCONF = "tests.credits.idem_urls"

__all__ = ["application"]
