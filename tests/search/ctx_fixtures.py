"""Fixtures for the context-engine tests: a small repo on disk with known spans, and a private index."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

LEDGER_PY = textwrap.dedent('''\
    """Money moves here: a ledger of credit changes."""
    from decimal import Decimal

    RATE = Decimal("1.0")


    class Wallet:
        """A user's balance."""

        currency = "EUR"

        def __init__(self, owner):
            self.owner = owner
            self.balance = 0

        @property
        def empty(self):
            return self.balance == 0


    def deduct_credits(wallet, amount):
        """Take credits from a wallet; refuse to go below zero."""
        if amount > wallet.balance:
            raise ValueError("insufficient credits")
        wallet.balance -= amount
        return wallet.balance


    async def grantBonus(wallet, amount=5):
        wallet.balance += amount
    ''')

ROUTES_JS = textwrap.dedent('''\
    // HTTP routes for the shop
    import express from "express";

    export function listProducts(req, res) {
      res.json(products);
    }

    export function checkoutCart(req, res) {
      const total = cart.total();
      res.json({ total });
    }
    ''')

GUIDE_HTML = textwrap.dedent('''\
    <html><head><title>Shop guide</title></head><body><nav>Home | About</nav>
    <article><h1>Shop guide</h1><p>This guide explains the shop. It is short.</p>
    <h2>Refunds</h2><p>Refunds are issued within fourteen days of a purchase. Contact support first.</p>
    <h2>Shipping</h2><p>Parcels ship every weekday from the central warehouse.</p></article></body></html>
    ''')


def write_repo(root: Path) -> Path:
    (root / "billing").mkdir(parents=True)
    (root / "web").mkdir()
    (root / "node_modules" / "lib").mkdir(parents=True)
    (root / "billing" / "ledger.py").write_text(LEDGER_PY)
    (root / "web" / "routes.js").write_text(ROUTES_JS)
    (root / "web" / "app.min.js").write_text("var a=1;" * 2000)
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00binary")
    (root / "node_modules" / "lib" / "x.js").write_text("function vendored() {}\n")
    (root / "secret.py").write_text("TOKEN = 'ignored by gitignore'\n")
    (root / ".gitignore").write_text("secret.py\n*.log\n")
    (root / "debug.log").write_text("log\n")
    return root


@pytest.fixture
def code_repo(tmp_path) -> Path:
    return write_repo(tmp_path / "shop")


@pytest.fixture
def edge_index(tmp_path, db):
    """A private embedded store installed as the process singleton for the test."""
    from search.engine.index import open_index, set_index

    index = open_index(path=tmp_path / "qdrant")
    set_index(index)
    yield index
    set_index(None)
    index.close()


@pytest.fixture
def settled_applier(monkeypatch):
    """The ids earlier tests took in rolled-back transactions are gaps in the outbox that no transaction will
    fill; young, they hold the applier's watermark for GAP_GRACE_S (30 s), so a fixture that applies until nothing
    is pending would wait that long. A settled applier has no young gaps."""
    monkeypatch.setattr("search.engine.applier.GAP_GRACE_S", 0.0)


def ingest(project, name: str, source: Path, *, kind: str = "code", is_global: bool = False, repo: str = "",
           apply_index: bool = True):
    """A synchronous ingest; like every sync writer it applies its own outbox unless apply_index=False (which is
    what a Celery worker's ingest leaves behind for the applier)."""
    from search.ingest.jobs import start_ingest
    from search.models import Dataset, IngestJob

    ds, _ = Dataset.objects.get_or_create(project=project, name=name, defaults={"kind": kind, "is_global": is_global})
    job = start_ingest(job=IngestJob(dataset=ds, source=str(source), kind=kind, options={"repo": repo} if repo else {}),
                       sync=True, apply_index=apply_index)
    return ds, job
