"""A small repository for the code tools: a definition used through an import, an alias, a module alias, a
base class, and a name defined twice (ambiguous)."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.search.ctx_fixtures import LEDGER_PY, ROUTES_JS, edge_index, ingest  # noqa: F401 - fixtures

SERVICE_PY = textwrap.dedent('''\
    from billing.ledger import deduct_credits as take
    import billing.ledger as ledger


    class Checkout(ledger.Wallet):
        def pay(self, wallet, amount):
            take(wallet, amount)
            self.notify(wallet)
            return ledger.deduct_credits(wallet, 0)

        def notify(self, wallet):
            return wallet
    ''')
JOBS_PY = textwrap.dedent('''\
    from billing.ledger import Wallet


    def notify(user):
        """A second `notify`: the name is ambiguous in the dataset."""
        return user


    def nightly(wallets):
        for w in wallets:
            notify(w)
        return Wallet
    ''')
FILES = {"billing/ledger.py": LEDGER_PY, "shop/service.py": SERVICE_PY, "shop/jobs.py": JOBS_PY,
         "web/routes.js": ROUTES_JS}


# code_world_with_tests: a test and a changelog that say the task's words more often than the code does
ASIDE = {"tests/test_wallet.py": "from billing.ledger import deduct_credits\n\n\n"
                                 "def test_take_credits_from_a_wallet_refuse_below_zero():\n"
                                 "    # take credits from a wallet; refuse to go below zero\n"
                                 "    assert deduct_credits({'credits': 1}, 2) is None\n",
         "CHANGES.md": "# Changes\n\nTake credits from a wallet: refuse to go below zero, take no credits.\n"}


def write_code_repo(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or FILES).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def line_of(path: str, needle: str) -> int:
    return next(i for i, line in enumerate(FILES[path].split("\n"), start=1) if needle in line)


@pytest.fixture
def code_world(db, edge_index, tmp_path, make_user, make_project):
    """alice owns `shop` with the repository indexed as dataset `app`; bob is in another project only."""
    alice, bob = make_user("alice@example.com"), make_user("bob@example.com")
    project = make_project("shop", alice)
    other = make_project("elsewhere", bob)
    dataset, _ = ingest(project, "app", write_code_repo(tmp_path / "app"), repo="app")
    return {"alice": alice, "bob": bob, "project": project, "other": other, "dataset": dataset}


@pytest.fixture
def code_world_with_tests(db, edge_index, tmp_path, make_user, make_project):
    """code_world's repository with ASIDE added (a test and a changelog that match the locate tests' task)."""
    alice = make_user("alice@example.com")
    project = make_project("shop", alice)
    dataset, _ = ingest(project, "app", write_code_repo(tmp_path / "app", {**FILES, **ASIDE}), repo="app")
    return {"alice": alice, "project": project, "dataset": dataset}
