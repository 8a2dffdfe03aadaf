import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

# This process serves queries and owns the embedded index: apply the outbox in a background thread, never
# on the query path (search/engine/applier.py; a no-op with QDRANT_URL, where Celery applies).
from search.engine.applier import start_background_applier  # noqa: E402 - needs the app registry loaded above
from search.quality.jobs import start_quality_poller  # noqa: E402 - needs the app registry loaded above

start_background_applier()
start_quality_poller()  # runs the adaptation jobs the schedule queued (search/quality/schedule.py)
