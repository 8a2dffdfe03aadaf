"""`manage.py evaluate_people`: the benchmark over the loaded directory, leaving no searcher, search or debit."""
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from accounts.models import User
from credits.models import LedgerEntry
from people.models import Search
from tests.people.factory import embed_all, make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def directory():
    for i, (intent, title, city, company) in enumerate([
            ("backend", "Backend Engineer", "pune", "flipkart"), ("backend", "Backend Engineer", "bangalore", "tcs"),
            ("qa", "SDET", "pune", "swiggy"), ("frontend", "Frontend Engineer", "mumbai", "flipkart")] * 2):
        make_person(f"P{i}", profile={"open_to_work": i % 2 == 0},
                    cards=[{"title": title, "intent_primary": intent, "city": city, "company_norm": company,
                            "seniority_level": "senior", "start_date": "2019-01-01", "is_current": True}])
    embed_all()


def test_it_reports_each_policy_and_writes_the_table_json_and_chart(directory, tmp_path):
    out = StringIO()
    call_command("evaluate_people", "--queries", "8", "--policies", "seed,graded", "--no-weights",
                 "--report-dir", str(tmp_path), stdout=out)
    text = out.getvalue()
    assert "| policy: seed |" in text and "| policy: graded |" in text
    data = json.loads((tmp_path / "people_eval.json").read_text())
    assert set(data) == {"policy: seed", "policy: graded"}
    assert data["policy: graded"]["queries"] == 8 and 0 <= data["policy: graded"]["ndcg@6"] <= 1
    assert (tmp_path / "people_eval.png").stat().st_size > 1000
    assert not User.objects.filter(email="people-benchmark@invalid.example").exists()
    assert Search.objects.count() == 0 and LedgerEntry.objects.count() == 0


def test_an_unknown_policy_is_an_error(directory):
    with pytest.raises(CommandError, match="gradd"):
        call_command("evaluate_people", "--policies", "gradd", stdout=StringIO())
