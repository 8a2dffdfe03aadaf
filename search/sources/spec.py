"""What a dataset source may say, checked whole before anything is stored.

Why one module for both API and pages: the same source must be accepted or refused the same way from the
API, the dataset page and the admin, with the same `field` in the error (e.g. "source.seeds[2]"). Network
addresses are checked by each type's spec (search.sources.netguard) so a bad URL is refused when it is set, not
at 3 a.m. by the scheduler; the sync checks again, since DNS changes. The type-specific checks live with each
type (search.sources.git.spec, search.sources.web.spec); this module dispatches through the registry.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings

from config.errors import BadInput, Forbidden
from config.text import bad_text_reason
from search.sources.base import SourceSpec, integer
from search.sources.registry import SOURCE_TYPES, all_fields, source_type

if TYPE_CHECKING:
    from accounts.models import User

MAX_INTERVAL_S = 30 * 24 * 3600


def parse_source(raw: Any, *, user: User | None, dataset_kind: str) -> SourceSpec:
    """Check a source as sent (API body's `source`, the page's form) for a dataset of `dataset_kind`.

    Local git paths read the server's disk, so only staff may use them (or SOURCES_ALLOW_LOCAL_PATHS)."""
    if not isinstance(raw, dict):
        raise BadInput("source must be an object with a type.", field="source")
    kind = raw.get("type")
    if kind not in SOURCE_TYPES:
        raise BadInput(f"source.type must be one of {', '.join(SOURCE_TYPES)}.", field="source.type")
    unknown = set(raw) - {"type"} - all_fields()
    if unknown:
        name = sorted(unknown)[0]
        raise BadInput(f"source.{name} is not a field of a {kind} source.", field=f"source.{name}")
    stype = source_type(kind)
    if dataset_kind not in stype.kinds:
        raise BadInput(f"A {kind} source feeds a {' or '.join(stype.kinds)} dataset, not a {dataset_kind} one.",
                       field="source.type")
    spec = stype.parse(raw)
    if spec.local and not (settings.SOURCES_ALLOW_LOCAL_PATHS or getattr(user, "is_staff", False)):
        raise Forbidden("Only staff may use a path on this server as a source; use an https or ssh URL.",
                        field="source.url")
    return spec


def parse_interval(value: Any) -> int | None:
    """None (manual syncs only) or seconds between syncs, at least SOURCES_MIN_INTERVAL_S."""
    if value is None:
        return None
    return integer(value, "interval_s", lo=settings.SOURCES_MIN_INTERVAL_S, hi=MAX_INTERVAL_S, default=0)


def parse_token(value: Any) -> str | None:
    """None: keep the stored token; "": clear it; else the new token."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 4096 or any(c in value for c in "\r\n") or bad_text_reason(value):
        raise BadInput("token must be a single-line string of at most 4096 characters.", field="token")
    return value.strip()


def display_url(spec_type: str, config: dict[str, Any]) -> str:
    """What a job's `source` and the pages show: the git URL or the first seed (never a credential)."""
    return source_type(spec_type).display(config)
