"""The scopes an API key may carry. A plain module (no Django imports): DRF's settings load
accounts.permissions early, and the models, forms and serializers read the same tuple."""
from __future__ import annotations

SCOPES: tuple[str, ...] = ("query", "ingest", "people", "manage")
SCOPE_HELP = {
    "query": "context query, rules search, answers, feedback; read projects, datasets and jobs",
    "ingest": "push, upload and delete content; delete datasets; set, sync and remove their sources; ingest",
    "people": "people search, profiles and contact unlocks (spends credits)",
    "manage": "projects, members, shares, creating and renaming datasets, API keys",
}
