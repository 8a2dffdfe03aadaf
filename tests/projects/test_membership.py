"""projects.membership: who may create, rename and delete projects and manage members, and the last-owner rule,
also under concurrency (real threads, each on its own database connection)."""
from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from config.errors import BadInput, Conflict, Forbidden, NotFound
from projects import membership
from projects.models import Membership, Project

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(make_user, make_project):
    owner, editor, viewer, outsider = (make_user(f"{r}@team.example") for r in ("owner", "editor", "viewer", "out"))
    project = membership.create_project(user=owner, name="Team Project")
    m = {"editor": Membership.objects.create(project=project, user=editor, role="editor"),
         "viewer": Membership.objects.create(project=project, user=viewer, role="viewer"),
         "owner": Membership.objects.get(project=project, user=owner)}
    return {"project": project, "owner": owner, "editor": editor, "viewer": viewer, "outsider": outsider, "m": m}


def _roles(project: Project) -> dict[str, str]:
    return dict(Membership.objects.filter(project=project).values_list("user__email", "role"))


# ---- create / rename / delete ---------------------------------------------------------------------------------

def test_create_derives_the_slug_from_the_name_and_makes_the_creator_owner(make_user):
    user = make_user()
    project = membership.create_project(user=user, name="  Café Search: v2!  ")
    assert project.slug == "cafe-search-v2" and project.name == "Café Search: v2!"
    assert Membership.objects.get(project=project).role == "owner"
    assert Membership.objects.get(project=project).user == user


def test_create_with_a_taken_slug_in_any_case_is_project_exists(make_user):
    user = make_user()
    membership.create_project(user=user, name="Alpha")
    for kwargs in ({"name": "Alpha"}, {"name": "Other", "slug": "alpha"}):
        with pytest.raises(Conflict) as exc:
            membership.create_project(user=user, **kwargs)
        assert exc.value.code == "project_exists" and exc.value.field == "slug"
    Project.objects.filter(slug="alpha").update(slug="Beta")  # a legacy mixed-case slug still blocks 'beta'
    with pytest.raises(Conflict):
        membership.create_project(user=user, name="beta")
    assert Project.objects.count() == 1 and Membership.objects.count() == 1


@pytest.mark.parametrize("kwargs,field", [
    ({"name": "x", "slug": "global"}, "slug"),
    ({"name": "Global"}, "slug"),
    ({"name": "x", "slug": "has space"}, "slug"),
    ({"name": "x", "slug": "a/b"}, "slug"),
    ({"name": "x", "slug": "Upper"}, "slug"),
    ({"name": "x", "slug": "-lead"}, "slug"),
    ({"name": "x", "slug": "é"}, "slug"),
    ({"name": "x", "slug": "a" * 81}, "slug"),
    ({"name": "!!!"}, "slug"),
    ({"name": "   "}, "name"),
    ({"name": "n" * 201}, "name"),
    ({"name": "nul\x00"}, "name"),
])
def test_reserved_or_unroutable_slugs_and_bad_names_are_400(make_user, kwargs, field):
    with pytest.raises(BadInput) as exc:
        membership.create_project(user=make_user(), **kwargs)
    assert exc.value.field == field
    assert not Project.objects.exists()


def test_only_owners_rename_and_delete(team):
    project = team["project"]
    for who in ("editor", "viewer"):
        with pytest.raises(Forbidden):
            membership.rename_project(user=team[who], project=project, name="Hijacked")
        with pytest.raises(Forbidden):
            membership.delete_project(user=team[who], project=project)
    with pytest.raises(NotFound):
        membership.delete_project(user=team["outsider"], project=project)
    project.refresh_from_db()
    assert project.name == "Team Project"
    assert membership.rename_project(user=team["owner"], project=project, name=" Renamed ").name == "Renamed"
    assert Project.objects.get(pk=project.pk).slug == "team-project"  # the slug never changes
    membership.delete_project(user=team["owner"], project=project)
    assert not Project.objects.filter(pk=project.pk).exists() and not Membership.objects.exists()


# ---- members ------------------------------------------------------------------------------------------------------

def test_owner_adds_an_existing_account_by_email_in_any_case(team, make_user):
    newcomer = make_user("new.person@team.example")
    added = membership.add_member(user=team["owner"], project=team["project"], email=" New.Person@TEAM.example ",
                                  role="editor")
    assert added.user == newcomer and added.role == "editor"


def test_unknown_or_inactive_email_is_user_not_found_with_one_generic_message(team, make_user):
    sleeper = make_user("sleeper@team.example")
    sleeper.is_active = False
    sleeper.save()
    details = set()
    for email in ("nobody@team.example", "sleeper@team.example"):
        with pytest.raises(NotFound) as exc:
            membership.add_member(user=team["owner"], project=team["project"], email=email, role="viewer")
        assert exc.value.code == "user_not_found" and exc.value.field == "email"
        details.add(exc.value.detail)
    assert len(details) == 1 and "nobody" not in details.pop()


def test_adding_a_member_twice_is_already_member(team):
    with pytest.raises(Conflict) as exc:
        membership.add_member(user=team["owner"], project=team["project"], email=team["viewer"].email, role="owner")
    assert exc.value.code == "already_member"
    assert _roles(team["project"])[team["viewer"].email] == "viewer"


def test_only_owners_add_change_and_remove_others(team, make_user):
    project, extra = team["project"], make_user()
    for who in ("editor", "viewer"):
        with pytest.raises(Forbidden):
            membership.add_member(user=team[who], project=project, email=extra.email, role="viewer")
        with pytest.raises(Forbidden):
            membership.change_role(user=team[who], project=project, membership_id=team["m"][who].pk, role="owner")
        other = "viewer" if who == "editor" else "editor"
        with pytest.raises(Forbidden):
            membership.remove_member(user=team[who], project=project, membership_id=team["m"][other].pk)
    with pytest.raises(NotFound):
        membership.add_member(user=team["outsider"], project=project, email=extra.email, role="viewer")
    assert _roles(project) == {"owner@team.example": "owner", "editor@team.example": "editor",
                               "viewer@team.example": "viewer"}


def test_owner_changes_roles_and_removes_members(team):
    project = team["project"]
    changed = membership.change_role(user=team["owner"], project=project, membership_id=team["m"]["viewer"].pk,
                                     role="editor")
    assert changed.role == "editor"
    membership.remove_member(user=team["owner"], project=project, membership_id=team["m"]["editor"].pk)
    assert set(_roles(project)) == {"owner@team.example", "viewer@team.example"}
    with pytest.raises(BadInput) as exc:
        membership.change_role(user=team["owner"], project=project, membership_id=team["m"]["viewer"].pk,
                               role="admin")
    assert exc.value.field == "role"


def test_a_membership_of_another_project_is_not_found(team, make_project):
    elsewhere = make_project("elsewhere", team["outsider"])
    foreign = Membership.objects.get(project=elsewhere)
    with pytest.raises(NotFound):
        membership.change_role(user=team["owner"], project=team["project"], membership_id=foreign.pk, role="viewer")
    with pytest.raises(NotFound):
        membership.remove_member(user=team["owner"], project=team["project"], membership_id=foreign.pk)
    assert Membership.objects.get(pk=foreign.pk).role == "owner"


def test_any_member_may_leave(team):
    membership.remove_member(user=team["viewer"], project=team["project"], membership_id=team["m"]["viewer"].pk)
    assert team["viewer"].email not in _roles(team["project"])


def test_the_last_owner_can_neither_be_demoted_nor_leave(team):
    project, own = team["project"], team["m"]["owner"]
    with pytest.raises(Conflict) as exc:
        membership.change_role(user=team["owner"], project=project, membership_id=own.pk, role="editor")
    assert exc.value.code == "last_owner"
    with pytest.raises(Conflict) as exc:
        membership.remove_member(user=team["owner"], project=project, membership_id=own.pk)
    assert exc.value.code == "last_owner"
    assert _roles(project)["owner@team.example"] == "owner"
    # with a second owner, the first may step down
    membership.change_role(user=team["owner"], project=project, membership_id=team["m"]["editor"].pk, role="owner")
    membership.change_role(user=team["owner"], project=project, membership_id=own.pk, role="viewer")
    assert _roles(project)["owner@team.example"] == "viewer"
    with pytest.raises(Forbidden):  # and is no longer an owner
        membership.change_role(user=team["owner"], project=project, membership_id=own.pk, role="owner")


# ---- concurrency ------------------------------------------------------------------------------------------------

def _race(monkeypatch, calls):
    """Run each call in its own thread at the same moment; the write after the owner check is slowed down, so
    without the owner-row lock both callers would pass the check before either writes."""
    real_save, real_delete = Membership.save, Membership.delete

    def slow_save(self, *a, **kw):
        if self.pk:
            time.sleep(0.3)
        return real_save(self, *a, **kw)

    def slow_delete(self, *a, **kw):
        time.sleep(0.3)
        return real_delete(self, *a, **kw)

    monkeypatch.setattr(Membership, "save", slow_save)
    monkeypatch.setattr(Membership, "delete", slow_delete)
    barrier = threading.Barrier(len(calls))
    outcomes: list[str] = []

    def run(call):
        try:
            barrier.wait()
            call()
            outcomes.append("ok")
        except Conflict as exc:
            outcomes.append(exc.code)
        except Forbidden:
            outcomes.append("forbidden")
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(c,)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sorted(outcomes)


@pytest.mark.django_db(transaction=True)
def test_two_owners_demoting_each_other_at_once_leave_exactly_one_owner(make_user, monkeypatch):
    a, b = make_user("a@race.example"), make_user("b@race.example")
    project = membership.create_project(user=a, name="Race")
    mb = Membership.objects.create(project=project, user=b, role="owner")
    ma = Membership.objects.get(project=project, user=a)
    outcomes = _race(monkeypatch, [
        lambda: membership.change_role(user=a, project=project, membership_id=mb.pk, role="viewer"),
        lambda: membership.change_role(user=b, project=project, membership_id=ma.pk, role="viewer"),
    ])
    # the loser waited for the winner's commit, then found itself no longer an owner
    assert outcomes == ["forbidden", "ok"], outcomes
    assert Membership.objects.filter(project=project, role="owner").count() == 1


@pytest.mark.django_db(transaction=True)
def test_two_owners_leaving_at_once_leave_exactly_one_owner(make_user, monkeypatch):
    a, b = make_user("a@leave.example"), make_user("b@leave.example")
    project = membership.create_project(user=a, name="Leave")
    mb = Membership.objects.create(project=project, user=b, role="owner")
    ma = Membership.objects.get(project=project, user=a)
    outcomes = _race(monkeypatch, [
        lambda: membership.remove_member(user=a, project=project, membership_id=ma.pk),
        lambda: membership.remove_member(user=b, project=project, membership_id=mb.pk),
    ])
    assert outcomes == ["last_owner", "ok"], outcomes
    assert Membership.objects.filter(project=project, role="owner").count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_demotion_racing_a_removal_of_the_other_owner_keeps_one_owner(make_user, monkeypatch):
    a, b = make_user("a@mixed.example"), make_user("b@mixed.example")
    project = membership.create_project(user=a, name="Mixed")
    mb = Membership.objects.create(project=project, user=b, role="owner")
    ma = Membership.objects.get(project=project, user=a)
    outcomes = _race(monkeypatch, [
        lambda: membership.change_role(user=a, project=project, membership_id=ma.pk, role="editor"),
        lambda: membership.remove_member(user=b, project=project, membership_id=mb.pk),
    ])
    assert outcomes == ["last_owner", "ok"], outcomes
    assert Membership.objects.filter(project=project, role="owner").count() == 1
