"""The vocabulary counted from the directory: full rebuild after an import, exact recount on card changes."""
import pytest

from people.models import ExperienceCard, VocabTerm
from people.parsing.gazetteer import current
from people.parsing.vocabulary import rebuild_vocabulary
from tests.people.factory import make_person

pytestmark = pytest.mark.django_db


def terms(kind):
    return dict(VocabTerm.objects.filter(kind=kind).values_list("norm", "count"))


def test_card_saves_count_companies_cities_countries_teams_domains_and_skills():
    make_person("A", cards=[{"company_norm": "stripe", "city": "Berlin", "country": "Germany", "team_norm": "risk",
                             "domain": "fintech", "search_phrases": ["Kafka", "a very long phrase of many words"]},
                            {"company_norm": "stripe", "city": "berlin", "country": "germany"}])
    make_person("B", cards=[{"company_norm": "kestrel", "city": "tallinn", "country": "estonia",
                             "visibility": "hidden"}])
    assert terms("company") == {"stripe": 2}  # the hidden card does not count
    assert terms("city") == {"berlin": 2} and terms("country") == {"germany": 2}
    assert terms("team") == {"risk": 1} and terms("domain") == {"fintech": 1}
    assert terms("skill") == {"kafka": 1}  # phrases of more than three words are not skills
    assert VocabTerm.objects.get(kind="city", norm="berlin").extra == {"country": "germany"}


def test_a_changed_card_recounts_its_old_and_new_values_and_a_deleted_one_leaves():
    p = make_person("A", cards=[{"company_norm": "stripe"}, {"company_norm": "stripe"}])
    card = ExperienceCard.objects.filter(person=p).first()
    card.company_norm = "globex"
    card.save()
    assert terms("company") == {"stripe": 1, "globex": 1}
    card.delete()
    assert terms("company") == {"stripe": 1}
    ExperienceCard.objects.filter(person=p).update(visibility="hidden")  # a bulk update sends no signal ...
    assert rebuild_vocabulary() == 0  # ... and the full rebuild (what an import runs) catches up
    assert terms("company") == {}


def test_the_parser_gazetteer_follows_the_tables():
    assert current().term("company", "stripe") is None
    make_person("A", cards=[{"company_norm": "stripe", "city": "berlin", "country": "germany"}])
    g = current()
    assert g.term("company", "stripe").count == 1
    assert g.term("city", "berlin").extra == {"country": "germany"}
    assert current() is g  # unchanged tables: the same object, no rebuild


def test_an_import_rebuilds_the_vocabulary():
    from people.importing.importer import import_records

    rec = {"display_name": "Z", "cards": [{"company": "Quillon Labs Pvt Ltd", "city": "Porto", "country": "Portugal",
                                           "title": "Engineer"}]}
    import_records([(1, rec)], embed="none", show_progress=False)
    assert terms("company") == {"quillon labs": 1} and terms("city") == {"porto": 1}
