"""The dotted module a source path defines: one rule for ingest (symbols name imports with it) and queries.

Why its own module: the symbol facts are taken by the ingest readers, which must stay pure (no models; see the
`pure-readers` contract in pyproject.toml), while the code graph that matches the names reads the models.
"""
from __future__ import annotations

import posixpath


def module_of(path: str) -> str:
    """The dotted module a path defines: `billing/ledger.py` -> `billing.ledger`, `pkg/__init__.py` -> `pkg`,
    `web/util/index.js` -> `web.util`. Ingest names imports with it (search.ingest.symbols) and queries match them."""
    stem = posixpath.splitext(path)[0]
    parts = [p for p in stem.split("/") if p]
    if parts and parts[-1] in ("__init__", "index", "mod"):
        parts = parts[:-1]
    return ".".join(parts)
