"""run_search's understanding step: role words no vocabulary entry has are embedded with the query text, in one
model call, and reach the response as semantic matches (real Postgres, real MiniLM; the encoder is only watched)."""
import pytest
from django.db import transaction

from people.service import searches as service
from tests.people.factory import embed_all, make_person

pytestmark = pytest.mark.django_db


@pytest.fixture
def directory():
    for i, (title, intent) in enumerate([("SDET", "qa"), ("Backend Engineer", "backend"),
                                         ("Site Reliability Engineer", "sre")] * 3):
        make_person(f"{intent}{i}", cards=[{"title": title, "intent_primary": intent, "city": "pune",
                                            "summary": f"{title} work"}])
    embed_all()


def run(user, query):
    with transaction.atomic():
        return service.run_search(user=user, asked=service.SearchRequest(query=query))


def test_unknown_role_words_cost_no_second_embedding_call_and_become_the_role(directory, make_user, monkeypatch):
    user = make_user(credits=5)
    calls = []
    real = service.embed_texts
    monkeypatch.setattr(service, "embed_texts", lambda texts, **kw: calls.append(list(texts)) or real(texts, **kw))
    out = run(user, "test automation engineers in pune")
    assert calls == [["test automation engineers in pune", "test automation engineer"]]
    sem = [u for u in out["parsed"]["understood"] if u["how"] == "semantic"]
    assert sem and sem[0]["kind"] == "intent" and sem[0]["value"] == "qa" and sem[0]["score"] >= 0.6
    assert out["people"] and all(p["name"].startswith("qa") for p in out["people"])


def test_a_query_the_vocabulary_fully_understands_embeds_only_its_text(directory, make_user, monkeypatch):
    user = make_user(credits=5)
    calls = []
    real = service.embed_texts
    monkeypatch.setattr(service, "embed_texts", lambda texts, **kw: calls.append(list(texts)) or real(texts, **kw))
    run(user, "sdet in pune")
    assert calls == [["sdet in pune"]]
