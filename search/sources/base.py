"""What every source type shares: the checked spec, the type's description, and the field checkers.

Why a type is a value (SourceType) and not a branch: a source type brings its own fields, check, display and
sync; the registry (search.sources.registry) lists the types, so adding one is one folder and one line there
(docs/architecture.md). This module imports no type, so the types can import it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from config.errors import BadInput
from config.text import bad_text_reason

if TYPE_CHECKING:
    pass


@dataclass(frozen=True)
class SourceSpec:
    """A checked source: its type, the normalised config stored on the row, and whether it reads local disk."""

    type: str
    config: dict[str, Any]
    local: bool = False


@dataclass(frozen=True)
class SourceType:
    """One kind of source: what it is called, which dataset kinds it feeds, the fields it takes, how a raw
    source is checked into a SourceSpec, what the pages show for it, and how one sync runs (-> the state stored
    on the Source row)."""

    name: str
    kinds: tuple[str, ...]
    fields: frozenset[str]
    parse: Callable[[dict[str, Any]], SourceSpec]
    display: Callable[[dict[str, Any]], str]
    sync: Callable[..., dict[str, Any]]  # sync(*, job: IngestJob, source: Source, progress: Progress | None)


def text(value: Any, field: str, *, max_len: int = 2000, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadInput(f"{field} must be a string.", field=field)
    value = value.strip()
    if required and not value:
        raise BadInput(f"{field} is required.", field=field)
    if len(value) > max_len or bad_text_reason(value):
        raise BadInput(f"{field} must be at most {max_len} characters of valid text (no NUL, no lone "
                       "surrogate).", field=field)
    return value


def integer(value: Any, field: str, *, lo: int, hi: int, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadInput(f"{field} must be an integer.", field=field)
    if not lo <= value <= hi:
        raise BadInput(f"{field} must be between {lo} and {hi}.", field=field)
    return value
