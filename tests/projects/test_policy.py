"""projects/policy.py: the write-permission table is what the endpoints do, and what the docs say.

The walk: for every rule, every role the caller can hold in the URL's project (owner, editor, viewer, none) and,
for rules that involve a second project, every role there too, the real API request is made by a real API key
and its status compared with what the table allows: 2xx when allowed, 404 when the caller is not a member of
the project that decides (existence does not leak), 403 otherwise. A new write endpoint that decides its own
rule shows up here as a mismatch."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from projects.policy import RULES, allowed, render_markdown

ROLES = ("owner", "editor", "viewer", None)
DOCS = Path(__file__).resolve().parents[2] / "docs" / "permissions.md"


@pytest.fixture
def world(make_user, client_for, settings, tmp_path):
    """A factory: the caller with `here` in project A and `there` in project B; B's dataset shared into A."""
    from projects.models import Membership, Project
    from search.models import Dataset, ProjectShare

    settings.INGEST_ALLOWED_ROOTS = [str(tmp_path)]
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "a.py").write_text("def f():\n    return 1\n")
    counter = itertools.count()

    def make(here: str | None, there: str | None = None, *, staff: bool = False) -> dict:
        n = next(counter)
        caller = make_user(f"caller{n}@example.com", staff=staff)
        owner_a, owner_b, member = (make_user(f"{who}{n}@example.com") for who in ("oa", "ob", "m"))
        a = Project.objects.create(slug=f"a{n}", name=f"A{n}")
        b = Project.objects.create(slug=f"b{n}", name=f"B{n}")
        Membership.objects.create(project=a, user=owner_a, role="owner")
        Membership.objects.create(project=b, user=owner_b, role="owner")
        m = Membership.objects.create(project=a, user=member, role="viewer")
        if here:
            Membership.objects.create(project=a, user=caller, role=here)
        if there:
            Membership.objects.create(project=b, user=caller, role=there)
        ds_a = Dataset.objects.create(project=a, name="docs", kind="web")
        ds_b = Dataset.objects.create(project=b, name="theirs", kind="code")
        ds_b2 = Dataset.objects.create(project=b, name="other", kind="code")
        share = ProjectShare.objects.create(project=a, dataset=ds_b, granted_by=owner_b)
        newcomer = make_user(f"new{n}@example.com")
        return {"client": client_for(caller), "a": a, "b": b, "ds_a": ds_a, "ds_b2": ds_b2, "share": share,
                "member": m, "newcomer": newcomer, "repo": str(tmp_path / "repo")}

    return make


def _request(action: str, w: dict, *, slug: str) -> object:
    """The API request that performs `action` in world `w`, with `slug` as the URL's project."""
    c, ds = w["client"], w["ds_a"]
    base = f"/api/projects/{slug}"
    dsb = f"{base}/datasets/{ds.pk}"
    return {
        "project.update": lambda: c.patch(base, {"name": "Renamed"}, format="json"),
        "project.delete": lambda: c.delete(base),
        "member.add": lambda: c.post(f"{base}/members", {"email": w["newcomer"].email, "role": "viewer"},
                                     format="json"),
        "member.change_role": lambda: c.patch(f"{base}/members/{w['member'].pk}", {"role": "editor"}, format="json"),
        "member.remove": lambda: c.delete(f"{base}/members/{w['member'].pk}"),
        "dataset.create": lambda: c.post(f"{base}/datasets", {"name": "fresh", "kind": "code"}, format="json"),
        "dataset.update": lambda: c.patch(dsb, {"description": "changed"}, format="json"),
        "dataset.delete": lambda: c.delete(dsb),
        "share.grant": lambda: c.post(f"{base}/shares", {"dataset_id": w["ds_b2"].pk}, format="json"),
        "share.revoke": lambda: c.delete(f"{base}/shares/{w['share'].pk}"),
        "content.write": lambda: c.put(f"{dsb}/documents", {"documents": [
            {"external_id": "x", "path": "x.md", "text": "# X\n\nSome text.\n"}]}, format="json"),
        "source.write": lambda: c.put(f"{dsb}/source", {"source": {"type": "web", "seeds": ["http://127.0.0.1:9/"]}},
                                      format="json"),
        "ingest.path": lambda: c.post(f"{base}/ingest", {"source": w["repo"], "dataset": "code", "kind": "code"},
                                      format="json"),
        "job.cancel": lambda: c.post(f"/api/ingest-jobs/{_queued_job(ds).pk}/cancel", {}, format="json"),
    }[action]()


def _queued_job(dataset):
    """A job of the URL's project's dataset that no worker runs (a cancel ends it at once)."""
    from search.models import IngestJob

    return IngestJob.objects.create(dataset=dataset, source="push", kind=dataset.kind, options={"origin": "push"})


def _cases() -> list[tuple[str, str | None, str | None]]:
    out = []
    for action, rule in RULES.items():
        for here in ROLES:
            for there in (ROLES if rule.there is not None else (None,)):
                out.append((action, here, there))
    return out


def test_every_rule_has_a_request_in_the_walk():
    assert {a for a, _, _ in _cases()} == set(RULES)


@pytest.mark.django_db
@pytest.mark.parametrize("action,here,there", _cases(), ids=lambda v: str(v))
def test_each_write_endpoint_answers_each_role_as_the_table_says(world, action, here, there):
    rule = RULES[action]
    staff = action == "ingest.path"  # server paths are staff-only on top of the table's roles
    w = world(here, there, staff=staff)
    # the URL's project: A (the receiving side), except for ending a share as its giver only
    slug = w["b"].slug if (rule.either and here is None and there is not None) else w["a"].slug
    resp = _request(action, w, slug=slug)
    if allowed(rule, here=here, there=there):
        assert 200 <= resp.status_code < 300, (action, here, there, resp.status_code, resp.content[:300])
    else:
        if rule.there is None:
            unseen = here is None
        elif rule.either:
            unseen = here is None and there is None
        else:
            unseen = here is None or there is None
        expected = 404 if unseen else 403
        assert resp.status_code == expected, (action, here, there, resp.status_code, resp.content[:300])
        body = resp.json()
        assert body["code"] in ("not_found", "forbidden") and body["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize("action", [a for a, r in RULES.items() if r.staff])
def test_staff_rules_admit_staff_who_are_not_members_and_no_one_else(world, make_user, action):
    from config.errors import NotFound
    from projects.policy import authorize

    w = world(None, None, staff=True)
    staff, outsider = make_user("ops@example.com", staff=True), make_user("nobody@example.com")
    assert authorize(action, user=staff, project=w["a"]) is None  # the admin and commands act for a team
    with pytest.raises(NotFound):
        authorize(action, user=outsider, project=w["a"])


def test_a_viewer_here_who_owns_the_dataset_cannot_share_it_in():
    rule = RULES["share.grant"]
    assert not allowed(rule, here="viewer", there="owner")
    assert not allowed(rule, here="owner", there="editor")
    assert allowed(rule, here="owner", there="owner")


def test_the_docs_show_the_table_the_code_applies():
    assert render_markdown() in DOCS.read_text(), "docs/permissions.md is out of date: paste render_markdown()"
