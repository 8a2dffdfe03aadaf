"""Fixtures for the rules-lawyer tests: a private embedded vector store and the demo rulebook loaded into it.

Why a private store per test: the demo rulebook is ingested for real (chunker, embeddings,
outbox, Qdrant edge, graph, traversal config), and each test's database rolls back, so the
index must not outlive the test either.
"""
from __future__ import annotations

import json
from typing import Any

import pytest


@pytest.fixture
def rules_index(edge_index):
    """The test's private embedded store (the same one context tests use), under the name rules tests know."""
    return edge_index


@pytest.fixture
def emberfall(rules_index) -> dict[str, Any]:
    """The demo rulebook (ruleset emberfall; books core, gm-guide and the PDF roads-and-rest) in the global dataset
    of project demo."""
    from search.rules.demo import load_demo_rules

    return load_demo_rules()


@pytest.fixture
def demo_project(emberfall):
    from projects.models import Project

    return Project.objects.get(slug=emberfall["project"])


def chunk_id(**kw: Any) -> int:
    from search.models import Chunk

    return Chunk.objects.get(**kw).pk


def parse_sse(frames: str | bytes) -> list[tuple[str, dict[str, Any]]]:
    """Text/event-stream -> [(event, data)]; every data line of this API is one JSON object."""
    text = frames.decode() if isinstance(frames, bytes) else frames
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event, data = "message", ""
        for line in block.splitlines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data += line[len("data: "):]
        events.append((event, json.loads(data)))
    return events
