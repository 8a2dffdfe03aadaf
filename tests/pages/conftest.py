"""Fixtures for the server-rendered pages: a member with credits, a small ingested code dataset,
a small rulebook and a small people directory, all through the real services."""
from __future__ import annotations

from pathlib import Path

import pytest

FIXTURE_CODE = {
    "billing/ledger.py": (
        '"""Money moves here."""\n\n\n'
        "def deduct_credits(account, amount):\n"
        '    """Take credits from an account; refuse to go below zero."""\n'
        "    if account.balance < amount:\n"
        "        raise ValueError('insufficient credits')\n"
        "    account.balance -= amount\n"
        "    return account.balance\n"
    ),
    "web/page.py": 'def render_page(title):\n    """Render an HTML page <b>title</b>."""\n    return f"<h1>{title}</h1>"\n',
}

RULEBOOK = """# Conditions

## Grappled

A grappled creature's speed becomes 0, and it can't benefit from any bonus to its speed.
The condition ends if the grappler is incapacitated. See Escaping a Grapple.

## Prone

A prone creature's only movement option is to crawl, unless it stands up and thereby ends the condition.

# Combat

## Escaping a Grapple

A grappled creature can use its action to escape. To do so, it must succeed on a Strength (Athletics) or
Dexterity (Acrobatics) check contested by your Strength (Athletics) check.
"""


@pytest.fixture
def member(make_user, make_project):
    user = make_user("page-user@example.com", credits=10)
    project = make_project("pages", user)
    return user, project


@pytest.fixture
def code_dataset(member, tmp_path):
    from search.engine.applier import apply_outbox
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    _, project = member
    root = tmp_path / "repo"
    for rel, text in FIXTURE_CODE.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    dataset = Dataset.objects.create(project=project, name="code", kind="code")
    start_ingest(job=IngestJob(dataset=dataset, source=str(root), kind="code", options={"repo": "fixture"}), sync=True)
    apply_outbox()
    return dataset


@pytest.fixture
def rules_dataset(member, tmp_path):
    from search.engine.applier import apply_outbox
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    _, project = member
    root = tmp_path / "book"
    root.mkdir()
    (root / "rules.md").write_text(RULEBOOK)
    dataset = Dataset.objects.create(project=project, name="rules", kind="rules")
    start_ingest(job=IngestJob(dataset=dataset, source=str(root), kind="rules",
                               options={"ruleset_id": "testrules", "book_id": "core"}),
                 sync=True)
    apply_outbox()
    return dataset


@pytest.fixture
def directory(db):
    from people.importing.demo import load_demo

    load_demo(count=40, seed=3)
    return Path(".")
