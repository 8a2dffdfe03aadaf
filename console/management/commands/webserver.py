"""`manage.py webserver [ADDR]`: runserver on config.webserver.BoundedWSGIServer (what `platform serve` starts).

Why a command of its own and not an override of `runserver`: django.contrib.staticfiles's runserver comes first
in INSTALLED_APPS and would win; a distinct name also makes `ps` say which server runs. Options are runserver's
(--noreload, --insecure, --nothreading...)."""
from __future__ import annotations

from django.contrib.staticfiles.management.commands.runserver import Command as RunserverCommand

from config.webserver import BoundedWSGIServer


class Command(RunserverCommand):
    help = "Serve the platform over HTTP with a time bound on every socket (REQUEST_SOCKET_TIMEOUT_S)."
    server_cls = BoundedWSGIServer
