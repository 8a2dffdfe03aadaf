import re

import pytest

from credits.ledger import get_balance, grant, ledger_sum
from people.models import Search

pytestmark = pytest.mark.django_db(transaction=True)

QUERY = "backend engineers in Bangalore open to work"


def _search(client, key="k-1", **extra):
    data = {"query": QUERY, "idempotency_key": key, "open_to_work_only": "", "salary_max": "",
            "preferred_locations": "", **extra}
    return client.post("/people/", data)


def test_search_renders_cards_and_charges_once_even_when_resubmitted(client, member, directory):
    user, _ = member
    client.force_login(user)
    first = _search(client)
    body = first.content.decode()
    assert first.status_code == 200
    assert 'class="card person"' in body and "%" in body
    again = _search(client)  # browser re-POST with the same form key: replayed, not charged
    assert again.status_code == 200
    assert Search.objects.filter(searcher=user).count() == 1
    assert get_balance(user=user) == 9 and ledger_sum(user=user) == 9
    assert 'id="balance">9<' in again.content.decode()


def test_profile_unlock_drops_balance_by_the_cost_and_shows_contact(client, member, directory):
    from people.models import SearchResult

    user, _ = member
    client.force_login(user)
    body = _search(client).content.decode()
    search_id = re.search(r"Search <code>([0-9a-f-]+)</code>", body).group(1)
    open_result = (SearchResult.objects.filter(search_id=search_id)
                   .filter(person__profile__open_to_work=True).first()
                   or SearchResult.objects.filter(search_id=search_id, person__profile__open_to_contact=True).first())
    assert open_result is not None
    url = f"/people/p/{open_result.person_id}"
    page = client.get(url, {"search_id": search_id})
    assert page.status_code == 200 and 'id="unlock"' in page.content.decode()
    before = get_balance(user=user)
    unlocked = client.post(url, {"search_id": search_id, "idempotency_key": "u-1"})
    assert unlocked.status_code == 200
    assert 'id="contact"' in unlocked.content.decode()
    assert get_balance(user=user) == before - 1
    client.post(url, {"search_id": search_id, "idempotency_key": "u-2"})  # second unlock, same search: free
    assert get_balance(user=user) == before - 1


def test_out_of_credits_shows_a_clear_message(client, make_user, directory):
    poor = make_user("poor@example.com")
    client.force_login(poor)
    resp = _search(client)
    assert resp.status_code == 402
    assert "out of credits" in resp.content.decode()
    assert Search.objects.filter(searcher=poor).count() == 0


def test_closed_profile_unlock_is_403_with_message(client, member, directory):
    from people.models import PersonProfile, SearchResult

    user, _ = member
    client.force_login(user)
    body = _search(client).content.decode()
    search_id = re.search(r"Search <code>([0-9a-f-]+)</code>", body).group(1)
    result = SearchResult.objects.filter(search_id=search_id).first()
    PersonProfile.objects.filter(person_id=result.person_id).update(open_to_work=False, open_to_contact=False)
    before = get_balance(user=user)
    resp = client.post(f"/people/p/{result.person_id}", {"search_id": search_id, "idempotency_key": "c-1"})
    assert resp.status_code == 403 and "not open to work or contact" in resp.content.decode()
    assert get_balance(user=user) == before


def test_rate_limit_message(client, member, directory, settings):
    user, _ = member
    grant(user=user, amount=20, reason="test")
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "search": "2/m"}
    client.force_login(user)
    codes = [_search(client, key=f"rl-{i}").status_code for i in range(3)]
    assert codes == [200, 200, 429]
    assert "Too many searches" in _search(client, key="rl-x").content.decode()


def test_expired_session_message(client, member, directory):
    from datetime import timedelta

    from django.utils import timezone

    from people.models import SearchResult

    user, _ = member
    client.force_login(user)
    body = _search(client).content.decode()
    search_id = re.search(r"Search <code>([0-9a-f-]+)</code>", body).group(1)
    Search.objects.filter(pk=search_id).update(expires_at=timezone.now() - timedelta(minutes=1))
    person_id = SearchResult.objects.filter(search_id=search_id).first().person_id
    resp = client.get(f"/people/p/{person_id}", {"search_id": search_id})
    assert resp.status_code == 410 and "expired" in resp.content.decode()


def test_bad_salary_is_a_400_naming_the_field(client, member, directory):
    user, _ = member
    client.force_login(user)
    resp = _search(client, salary_max="lots")
    assert resp.status_code == 400 and "salary_max" in resp.content.decode()
    assert get_balance(user=user) == 10


def test_discover_lists_people(client, member, directory):
    user, _ = member
    client.force_login(user)
    resp = client.get("/people/discover")
    assert resp.status_code == 200 and "people with visible experience" in resp.content.decode()
    assert client.get("/people/discover", {"offset": "junk"}).status_code == 400  # one number parser


def test_search_page_shows_what_was_understood_unused_and_relaxed(client, member, directory):
    user, _ = member
    client.force_login(user)
    body = _search(client, query="backend engineers at Flipkrat in Pune with zorblax").content.decode()
    assert 'id="parsed"' in body and "company <strong>flipkart</strong> (from “flipkrat”)" in body
    assert "Not used as a filter (free text only): zorblax" in body
    notice = re.search(r'<p class="notice" id="relaxation"[^>]*>([^<]+)</p>', body).group(1)
    assert notice.startswith("No one at Flipkart in Pune matched") or notice.startswith("Only ")
    assert "showing people from other cities" in notice
    assert 'id="refinement"' not in body  # no LLM configured: nothing to wait for


def test_a_past_search_page_shows_refined_reasons_beside_the_rule_based_ones(client, member, directory):
    from people.models import Search, SearchResult

    user, _ = member
    client.force_login(user)
    body = _search(client).content.decode()
    search_id = re.search(r"Search <code>([0-9a-f-]+)</code>", body).group(1)
    first = SearchResult.objects.filter(search_id=search_id).order_by("rank").first()
    first.extra = {**first.extra, "why_matched_refined": ["A refined reason"], "why_source": "llm"}
    first.save()
    Search.objects.filter(pk=search_id).update(extra={**Search.objects.get(pk=search_id).extra, "refinement": "done"})
    page = client.get("/people/", {"search_id": search_id}).content.decode()
    assert '<ul class="why refined"><li>A refined reason</li></ul>' in page and "refined by LLM" in page
    assert first.extra["why_matched"][0] in page  # the deterministic bullets are kept
