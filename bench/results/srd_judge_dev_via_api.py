"""A rules tenant judges its questions through the API: each SRD dev question is searched
(POST /api/projects/srd/rules/search) and every shown result from its gold section is marked relevant
(POST /api/query-sessions/<id>/feedback). Then `adapt_embeddings --project srd --name srd-full --existing` decides
on those judgments (bench/results/srd_full_adaptation.md).

Run: VAR_DIR=... .venv/bin/python manage.py shell -c "exec(open('bench/results/srd_judge_dev_via_api.py').read())"
in a throwaway store only: it writes query sessions and feedback into project srd. SRD_QUERIES names another
question file (the second dev set: search/rules/demo_rules/srd51_dev2_queries.json); never the 99 test questions.

A question whose gold sections (the chunks its paths resolve to) include a test question's is not judged (9 of the
first dev set's 60; none of the second's or third's): training on it, however it is worded, would teach the test.
The test file is read for that screen only.
"""
import json
import os

from django.test import Client

from accounts.apikeys import issue_api_key
from accounts.models import User
from projects.models import Membership, Project
from search.engine.access import accessible_dataset_ids
from search.quality.evaluation import load_rules_queries, resolve_expected

project = Project.objects.get(slug="srd")
user, _ = User.objects.get_or_create(email="judge@example.com")
Membership.objects.get_or_create(project=project, user=user, defaults={"role": "editor"})
key = issue_api_key(user=user).secret
c = Client(HTTP_AUTHORIZATION=f"Bearer {key}", SERVER_NAME="127.0.0.1")
ids = sorted(accessible_dataset_ids(project))
path = os.environ.get("SRD_QUERIES", "search/rules/demo_rules/srd51_dev_queries.json")
assert "eval" not in os.path.basename(path), "the test questions are reported on, never judged for training"
test_gold = {cid for rq in load_rules_queries("search/rules/demo_rules/srd51_eval_queries.json")
             for cid in resolve_expected(rq, dataset_ids=ids)}
every = load_rules_queries(path)
questions = [rq for rq in every if not set(resolve_expected(rq, dataset_ids=ids)) & test_gold]
judged = found = 0
for rq in questions:
    r = c.post("/api/projects/srd/rules/search", data=json.dumps({"q": rq.query, "top_k": 50}), content_type="application/json")
    assert r.status_code == 200, (r.status_code, r.content[:300])
    body = r.json()
    gold = set(resolve_expected(rq, dataset_ids=ids))
    shown = [x["chunk_id"] for x in body["results"]]
    for cid in shown:
        if cid in gold:
            f = c.post(f"/api/query-sessions/{body['search_session_id']}/feedback",
                       data=json.dumps({"chunk_id": cid, "relevance": 3}), content_type="application/json")
            assert f.status_code == 201, f.content[:300]
            judged += 1
    found += any(cid in gold for cid in shown)
print(f"judged {judged} results relevant on {found} of {len(questions)} questions (gold among the 50 shown); "
      f"{len(every) - len(questions)} not judged (their gold is a test question's)")
