"""The Celery app. Tasks live in each app's tasks.py and are autodiscovered.

Every worker also writes a heartbeat to Redis (config/heartbeat.py) from the moment it is ready until it shuts
down, which /healthz reads instead of pinging workers.
"""
import os
from typing import Any

from celery import Celery
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _start_heartbeat(sender: Any = None, **_: Any) -> None:
    """In the worker's main process (any pool), once it consumes: a thread that beats until shutdown."""
    from config.heartbeat import start_worker_heartbeat

    start_worker_heartbeat(nodename=getattr(sender, "hostname", None) or "worker")


@worker_shutdown.connect
def _stop_heartbeat(sender: Any = None, **_: Any) -> None:
    from config.heartbeat import stop_worker_heartbeat

    stop_worker_heartbeat()
