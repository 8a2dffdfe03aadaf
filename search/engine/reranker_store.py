"""Trained rerankers on disk: where they live, how a name is checked, their manifests, and how a trained model's
score is blended with the fused one.

Why in the engine: the query path loads a trained model by name and blends its scores on every reranked query;
training one is quality's job (search.quality.reranker_training), which writes the folders this module reads.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from django.conf import settings

from config.errors import BadInput

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def models_dir() -> Path:
    """Where trained rerankers live: one folder per model, each with manifest.json."""
    return Path(settings.VAR_DIR) / "models" / "rerankers"


def model_path(name: str) -> Path:
    """The folder of trained reranker `name`; BadInput (field `reranker`) when it is not a trained model here."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise BadInput("Must be the name of a trained reranker (letters, digits, '.', '_', '-').", field="reranker")
    path = models_dir() / name
    if not (path / "manifest.json").is_file():
        known = ", ".join(sorted(p.name for p in models_dir().glob("*") if (p / "manifest.json").is_file()))
        raise BadInput(f"No trained reranker named {name!r}; trained here: {known or 'none (manage.py train_reranker)'}.",
                       field="reranker")
    return path


def trained_rerankers() -> list[dict[str, Any]]:
    """Every trained reranker's manifest, newest first (a folder with a broken manifest is skipped)."""
    out = []
    for p in models_dir().glob("*/manifest.json"):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda m: str(m.get("created", "")), reverse=True)


# the share of the fused score in a trained reranker's output, chosen on the held-out slice: 0 is the
# cross-encoder alone, 1 the fused order unchanged (so a model that learned nothing cannot make ranking worse)
BLENDS = tuple(round(x / 10, 1) for x in range(11))


def blend_scores(*, model: list[float], prior: list[float], blend: float) -> list[float]:
    """blend * min-max(fused) + (1 - blend) * min-max(cross-encoder), over one query's candidates."""
    def norm(xs: list[float]) -> list[float]:
        lo, hi = min(xs), max(xs)
        return [(x - lo) / (hi - lo) if hi > lo else 1.0 for x in xs]

    if not model:
        return []
    return [blend * p + (1 - blend) * m for m, p in zip(norm(model), norm(prior), strict=True)]
