import pytest

from projects.models import Membership
from search.models import Dataset, ProjectShare

pytestmark = pytest.mark.django_db


def _err(resp, status, code=None):
    assert resp.status_code == status, resp.content
    body = resp.json()
    assert "code" in body and "detail" in body
    if code:
        assert body["code"] == code
    return body


@pytest.fixture
def setup(make_user, make_project, client_for):
    owner, stranger = make_user(), make_user()
    proj = make_project("secret-proj", owner)
    ds = Dataset.objects.create(project=proj, name="docs", kind="web")
    share_target = make_project("target", owner)
    share = ProjectShare.objects.create(dataset=ds, project=share_target, granted_by=owner)
    return {"owner": owner, "stranger": stranger, "proj": proj, "ds": ds, "share": share,
            "owner_c": client_for(owner), "stranger_c": client_for(stranger)}


ENDPOINTS = [
    ("get", "/api/projects/{slug}", None),
    ("get", "/api/projects/{slug}/datasets", None),
    ("post", "/api/projects/{slug}/datasets", {"name": "x", "kind": "code"}),
    ("get", "/api/projects/{slug}/shares", None),
    ("post", "/api/projects/{slug}/shares", {"dataset_id": 1}),
    ("delete", "/api/projects/{slug}/shares/{share}", None),
]


@pytest.mark.parametrize("method,url,body", ENDPOINTS)
@pytest.mark.parametrize("slug", ["secret-proj", "target", "does-not-exist"])
def test_non_members_get_404_everywhere(setup, method, url, body, slug):
    c = setup["stranger_c"]
    path = url.format(slug=slug, share=setup["share"].pk)
    resp = getattr(c, method)(path, body, format="json") if body else getattr(c, method)(path)
    _err(resp, 404, "not_found")
    # and nothing changed
    assert Dataset.objects.filter(name="x").count() == 0
    assert ProjectShare.objects.get(pk=setup["share"].pk).revoked_at is None


def test_404_same_for_existing_and_missing(setup):
    c = setup["stranger_c"]
    assert c.get("/api/projects/secret-proj").content == c.get("/api/projects/nope").content


def test_list_and_detail_for_member(setup):
    c = setup["owner_c"]
    slugs = [p["slug"] for p in c.get("/api/projects").json()]
    assert slugs == ["secret-proj", "target"]
    detail = c.get("/api/projects/secret-proj").json()
    assert detail["role"] == "owner" and detail["dataset_count"] == 1
    assert detail["members"] == [{"email": setup["owner"].email, "role": "owner"}]
    assert setup["stranger_c"].get("/api/projects").json() == []


def test_datasets_tagged_by_access(setup):
    c = setup["owner_c"]
    rows = {d["name"]: d["access"] for d in c.get("/api/projects/target/datasets").json()}
    assert rows == {"docs": "shared"}
    rows = {d["name"]: d["access"] for d in c.get("/api/projects/secret-proj/datasets").json()}
    assert rows == {"docs": "own"}


def test_create_dataset_and_bad_input(setup):
    c = setup["owner_c"]
    resp = c.post("/api/projects/secret-proj/datasets", {"name": "code", "kind": "code"}, format="json")
    assert resp.status_code == 201 and resp.json()["access"] == "own"
    body = _err(c.post("/api/projects/secret-proj/datasets", {"name": "code", "kind": "code"}, format="json"), 409)
    assert body["field"] == "name"
    body = _err(c.post("/api/projects/secret-proj/datasets", {"name": "x", "kind": "video"}, format="json"), 400)
    assert body["field"] == "kind"
    body = _err(c.post("/api/projects/secret-proj/datasets", {"kind": "code"}, format="json"), 400)
    assert body["field"] == "name"
    _err(c.post("/api/projects/secret-proj/datasets", {"name": "g", "is_global": True}, format="json"), 403)
    assert not Dataset.objects.filter(name__in=["x", "g"]).exists()


def test_viewer_cannot_create_dataset(setup, make_user, client_for):
    viewer = make_user()
    Membership.objects.create(project=setup["proj"], user=viewer, role="viewer")
    _err(client_for(viewer).post("/api/projects/secret-proj/datasets", {"name": "v"}, format="json"), 403)


def test_share_grant_and_revoke_flow(setup, make_user, make_project, client_for):
    owner_c = setup["owner_c"]
    recipient_owner = make_user()
    recv = make_project("recv", recipient_owner, setup["owner"])
    assert Membership.objects.get(project=recv, user=setup["owner"]).role == "owner"
    ds = setup["ds"]
    resp = owner_c.post("/api/projects/recv/shares", {"dataset_id": ds.pk}, format="json")
    assert resp.status_code == 201, resp.content
    share_id = resp.json()["id"]
    # sharing again returns the same active share
    assert owner_c.post("/api/projects/recv/shares", {"dataset_id": ds.pk}, format="json").json()["id"] == share_id
    rc = client_for(recipient_owner)
    assert [d["name"] for d in rc.get("/api/projects/recv/datasets").json()] == ["docs"]
    # the recipient (not a member of the source project) cannot re-share it elsewhere
    _err(rc.post("/api/projects/recv/shares", {"dataset_id": ds.pk}, format="json"), 404)
    resp = rc.delete(f"/api/projects/recv/shares/{share_id}")
    assert resp.status_code == 200 and resp.json()["is_active"] is False
    assert rc.get("/api/projects/recv/datasets").json() == []


def test_only_owner_of_source_grants(setup, make_user, client_for, make_project):
    editor = make_user()
    Membership.objects.create(project=setup["proj"], user=editor, role="editor")
    make_project("mine", editor)
    body = _err(client_for(editor).post("/api/projects/mine/shares", {"dataset_id": setup["ds"].pk}, format="json"),
                403)
    assert body["field"] == "dataset_id"
    _err(client_for(editor).post("/api/projects/mine/shares", {"dataset_id": 10**9}, format="json"), 404)
    _err(client_for(editor).post("/api/projects/mine/shares", {"dataset_id": "abc"}, format="json"), 400)
    assert not ProjectShare.objects.filter(project__slug="mine").exists()


def test_viewer_of_target_cannot_revoke(setup, make_user, client_for):
    viewer = make_user()
    Membership.objects.create(project=setup["share"].project, user=viewer, role="viewer")
    _err(client_for(viewer).delete(f"/api/projects/target/shares/{setup['share'].pk}"), 403)
    assert ProjectShare.objects.get(pk=setup["share"].pk).revoked_at is None


def test_revoke_share_of_other_project_is_404(setup, make_project):
    make_project("other", setup["owner"])
    _err(setup["owner_c"].delete(f"/api/projects/other/shares/{setup['share'].pk}"), 404)
