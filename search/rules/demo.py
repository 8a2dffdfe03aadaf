"""The built-in demo rulebook ("Emberfall", written for this project; not the SRD).

Why a rulebook of our own: the SRD lives in ../shared, which a user's machine
does not have, yet `make run` must show rules search and streamed answers. Each
folder under search/rules/demo_rules/ is one book of the ruleset "emberfall"; the
dataset is global, so every project can ask about it. The book roads-and-rest is a
PDF (typeset by bench/typeset_demo_pdf.py), read like any PDF rulebook, so its
answers cite their page ("roads-and-rest, p. 2").
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from projects.models import Project
from search.engine.applier import apply_outbox
from search.models import Dataset
from search.rules.ingest import ingest_rulebook

if TYPE_CHECKING:
    from io import TextIOBase

DEMO_DIR = Path(__file__).resolve().parent / "demo_rules"
RULESET = "emberfall"
DATASET_NAME = "emberfall-rules"


def load_demo_rules(stdout: TextIOBase | None = None) -> dict:
    """Ingest every demo book (incremental), rebuild config + graph, apply the index. Idempotent."""
    project, _ = Project.objects.get_or_create(slug="demo", defaults={"name": "Demo"})
    dataset, _ = Dataset.objects.get_or_create(project=project, name=DATASET_NAME,
                                               defaults={"kind": Dataset.Kind.RULES, "is_global": True})
    books = {}
    for book_dir in sorted(p for p in DEMO_DIR.iterdir() if p.is_dir()):
        books[book_dir.name] = ingest_rulebook(dataset=dataset, path=book_dir, ruleset_id=RULESET,
                                               book_id=book_dir.name)
    applied = apply_outbox()
    msg = "demo rules: " + ", ".join(f"{b} ({s['chunks']} chunks written, {s['skipped']} files unchanged)"
                                     for b, s in books.items()) + f"; {applied} index changes applied"
    if stdout is not None:
        stdout.write(msg + "\n")
    return {"project": project.slug, "dataset_id": dataset.pk, "books": books}
