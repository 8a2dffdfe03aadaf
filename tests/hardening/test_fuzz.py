"""Schemathesis against the served OpenAPI schema (/api/schema/): every operation, authenticated.

A bounded, derandomised run (a few examples per operation) so `make test` stays fast and repeatable;
bench/fuzz_api.py is the large run. Each generated request goes through the real Django WSGI app on
the embedded Postgres/Redis/Qdrant, as a member of a project with a small ingested dataset and credits
(tests/hardening/fuzz_world.py), positive and negative examples alike, and must be: no 5xx, a status code
the schema lists for the operation, a media type and a body that match the schema for that status, and
refused (401) when the same request is sent without the API key.

No operation is excluded. Two settings are relaxed for the run, with reasons:
- rate limits are raised (the people search default of 10/min would turn almost every example into a
  429 and hide the code behind it; tests/hardening/test_rate_limit_load.py covers the limits);
- API ingest may only read the small fixture repo (the fuzzer must not make the server walk real dirs).
"""
from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    response_schema_conformance,
    status_code_conformance,
)

from console.wsgi import application
from tests.hardening.fuzz_world import InProcessRequests, use_world

# negative_data_rejection is left to bench/fuzz_api.py as a figure, not a gate: DRF coerces JSON numbers into
# string fields ({"name": 7} is accepted as "7"), which the check counts as "invalid input accepted".
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance, content_type_conformance,
          ignored_auth]
EXAMPLES_PER_OPERATION = 12

schema = schemathesis.openapi.from_wsgi("/api/schema/", application)


@schema.parametrize()
@schema.given(rnd=st.randoms(use_true_random=False))
@hsettings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
           suppress_health_check=list(HealthCheck))
@pytest.mark.slow
def test_every_operation_answers_without_5xx_and_within_its_schema(case, rnd, world, db):
    use_world(case, rnd, secret=world.secret)
    with InProcessRequests():
        case.call_and_validate(checks=CHECKS)


# What the fuzzer found: DRF turned JSON numbers into text, so {"query": 1.25e272} ran (and charged) a people
# search for "1.25e+272", {"name": 7876609} issued a key named "7876609", {"open_to_work_only": ""} searched
# as if the flag were absent. A wrong type is now a 400.
@pytest.mark.parametrize("path,body,field", [
    ("/api/search", {"query": 1.2501866551734208e+272}, "query"),
    ("/api/search", {"query": "python", "preferred_locations": ["pune", 7]}, "preferred_locations"),
    ("/api/keys", {"name": 7876609}, "name"),
    ("/api/projects/typed/datasets", {"name": 5}, "name"),
    ("/api/projects/typed/datasets", {"name": "docs", "description": True}, "description"),
    ("/api/projects/typed/ingest", {"dataset": 1, "kind": "code", "source": "."}, "dataset"),
    ("/api/search", {"query": "python", "open_to_work_only": ""}, "open_to_work_only"),
    ("/api/search", {"query": "python", "open_to_work_only": "yes"}, "open_to_work_only"),
    ("/api/projects/typed/datasets", {"name": "docs", "is_global": 1}, "is_global"),
])
def test_a_wrongly_typed_text_or_flag_field_is_a_400_naming_it_and_costs_nothing(user, api, make_project, path, body,
                                                                              field):
    from accounts.models import ApiKey
    from credits.ledger import get_balance
    from search.models import Dataset

    make_project("typed", user)
    keys, datasets, balance = ApiKey.objects.count(), Dataset.objects.count(), get_balance(user=user)
    resp = api.post(path, body, format="json")
    assert resp.status_code == 400, resp.content
    err = resp.json()
    assert err["code"] == "invalid" and err["field"].split(".")[0] == field and err["detail"]
    assert (ApiKey.objects.count(), Dataset.objects.count(), get_balance(user=user)) == (keys, datasets, balance)


@pytest.mark.parametrize("query,field", [("limit=", "limit"), ("offset=&limit=1", "offset")])
def test_an_empty_paging_parameter_is_a_400_not_the_default(api, query, field):
    """Also found by the fuzzer: `/api/people?limit=` was read as "no limit given" (20)."""
    resp = api.get(f"/api/people?{query}")
    assert resp.status_code == 400 and resp.json()["field"] == field and resp.json()["code"] == "invalid"
    assert api.get("/api/people?limit=1&offset=0").status_code == 200
