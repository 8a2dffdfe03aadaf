"""What `reconcile_index` and `reconcile_code` share: print the report (JSON or lines), then exit 1 while it is not
exact. The leading underscore keeps Django from taking this module for a command."""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from django.core.management.base import BaseCommand, CommandError

if TYPE_CHECKING:
    from collections.abc import Iterable


def finish(command: BaseCommand, *, as_json: bool, data: dict[str, Any], lines: Iterable[str], exact: bool,
           failure: str) -> None:
    """Write `data` as JSON or `lines` one a line (a generator is not read for JSON); CommandError(`failure`,
    returncode 1) unless `exact`."""
    if as_json:
        command.stdout.write(json.dumps(data, indent=2, default=str))
    else:
        for line in lines:
            command.stdout.write(line)
    if not exact:
        raise CommandError(failure, returncode=1)

