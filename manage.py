#!/usr/bin/env python
import os
import sys


def _hint_if_services_down(argv: list[str]) -> None:
    """Importing settings starts nothing, so a command run before `manage.py platform up` (or `make services`) on
    the embedded defaults would fail on a missing socket: say what to run, up front, instead."""
    if len(argv) < 2 or argv[1] in ("platform", "help", "--help", "-h", "version", "--version", "check"):
        return
    try:
        from django.conf import settings

        from config import embedded

        down = embedded.services_down(var_dir=settings.VAR_DIR, names=sorted(settings.EMBEDDED))
    except Exception:  # noqa: BLE001 - settings errors are Django's to report, with its own message
        return
    if down:
        print(f"note: embedded {' and '.join(down)} not running under {settings.VAR_DIR}; start them with "
              "`python manage.py platform up` (or `make services`)", file=sys.stderr)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    _hint_if_services_down(sys.argv)
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
