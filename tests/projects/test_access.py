"""Access resolution: own, global, shared, revoked share, never shared."""
import pytest
from django.utils import timezone

from search.engine.access import accessible_dataset_ids, is_resource_accessible
from search.models import Dataset, ProjectShare

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(make_user, make_project):
    owner = make_user()
    a = make_project("a", owner)
    b = make_project("b", owner)
    c = make_project("c", owner)
    glob = make_project("global", owner)
    own = Dataset.objects.create(project=a, name="own", kind="code")
    global_ds = Dataset.objects.create(project=glob, name="g", kind="web", is_global=True)
    b_private = Dataset.objects.create(project=b, name="b-private", kind="code")
    b_shared = Dataset.objects.create(project=b, name="b-shared", kind="code")
    c_revoked = Dataset.objects.create(project=c, name="c-revoked", kind="code")
    ProjectShare.objects.create(dataset=b_shared, project=a, granted_by=owner)
    ProjectShare.objects.create(dataset=c_revoked, project=a, granted_by=owner, revoked_at=timezone.now())
    return {"a": a, "b": b, "own": own, "global": global_ds, "never": b_private, "shared": b_shared,
            "revoked": c_revoked}


def test_accessible_set_is_own_global_shared(world):
    ids = accessible_dataset_ids(world["a"])
    assert ids == {world["own"].pk, world["global"].pk, world["shared"].pk}


@pytest.mark.parametrize("name,expected", [("own", True), ("global", True), ("shared", True),
                                           ("revoked", False), ("never", False)])
def test_is_resource_accessible(world, name, expected):
    assert is_resource_accessible(world["a"], "dataset", world[name].pk) is expected


def test_include_global_false(world):
    assert world["global"].pk not in accessible_dataset_ids(world["a"], include_global=False)


def test_share_is_one_directional(world):
    assert world["own"].pk not in accessible_dataset_ids(world["b"])


def test_one_sql_query(world, django_assert_num_queries):
    with django_assert_num_queries(1):
        accessible_dataset_ids(world["a"])


def test_reshare_after_revoke(world, make_user):
    ProjectShare.objects.create(dataset=world["revoked"], project=world["a"])
    assert is_resource_accessible(world["a"], "dataset", world["revoked"].pk)


def test_unknown_resource_type_raises(world):
    with pytest.raises(ValueError):
        is_resource_accessible(world["a"], "planet", 1)
