"""Projects and their members: create, rename, delete; add, re-role and remove members.

Why a module of its own: the API, the settings page and the admin-facing commands all change
projects and memberships, and the rules must hold the same way everywhere:
- anyone signed in may create a project and becomes its owner;
- owners rename and delete the project and manage its members; editors and viewers do not;
- a member may always leave, except the last owner;
- a project always keeps at least one owner, also when two owners demote or remove each other at
  the same moment (every change that could remove an owner locks the project's owner rows first).
Non-members are answered 404 (as project_for_member does), members without the role 403.
"""
from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils.text import slugify

from accounts import limits
from config.errors import BadInput, Conflict, Forbidden, NotFound
from config.fields import check_text
from projects import policy
from projects.access import key_project_ids, membership_role
from projects.deletion import deleting
from projects.models import Membership, Project

if TYPE_CHECKING:
    from accounts.models import User

ROLES = tuple(Membership.Role.values)  # owner, editor, viewer
OWNER = Membership.Role.OWNER
SLUG_MAX = Project._meta.get_field("slug").max_length
NAME_MAX = Project._meta.get_field("name").max_length
RESERVED_SLUGS = frozenset({Project.GLOBAL_SLUG})
# What a project URL can carry (`<slug:...>` takes [-a-zA-Z0-9_]+); lower case only, so two projects never differ
# by case alone, and starting with a letter or digit.
_SLUG_RE = re.compile(r"[a-z0-9][a-z0-9_-]*")


def _clean_name(name: str) -> str:
    if not isinstance(name, str):
        raise BadInput("name must be text.", field="name")
    name = check_text(name, field="name").strip()
    if not name:
        raise BadInput("name is required.", field="name")
    if len(name) > NAME_MAX:
        raise BadInput(f"name must be at most {NAME_MAX} characters.", field="name")
    return name


def _clean_slug(slug: str | None, *, name: str) -> str:
    """A given slug is checked as given (no silent rewriting); an absent one is slugify(name)."""
    if slug is None or (isinstance(slug, str) and not slug.strip()):
        slug = slugify(name)[:SLUG_MAX].strip("-_")
        if not slug:
            raise BadInput("The name has no letters or digits to make a slug from; give a slug.", field="slug")
    elif not isinstance(slug, str):
        raise BadInput("slug must be text.", field="slug")
    else:
        slug = check_text(slug, field="slug").strip()
        if len(slug) > SLUG_MAX:
            raise BadInput(f"slug must be at most {SLUG_MAX} characters.", field="slug")
        if not _SLUG_RE.fullmatch(slug):
            raise BadInput("slug may contain only lower-case letters, digits, '-' and '_', and must start with "
                           "a letter or digit.", field="slug")
    if slug in RESERVED_SLUGS:
        raise BadInput(f"The slug {slug!r} is reserved.", field="slug")
    return slug


def _require_role(*, user: User, project: Project, roles: set[str] | frozenset[str], action: str) -> str:
    """The caller's role, if it is one of `roles`: 404 for a non-member (existence does not leak), else 403."""
    role = membership_role(user=user, project=project)
    if role is None:
        raise NotFound("Project not found.")
    if role not in roles:
        raise Forbidden(f"Only {' or '.join(sorted(roles))}s of this project can {action}.")
    return role


def _locked_owners(project: Project) -> list[Membership]:
    """Lock the project's owner memberships (in pk order, so concurrent callers cannot deadlock).

    Must run inside a transaction. A second caller blocks here until the first commits, and Postgres then
    re-checks `role = owner` on the rows it waited for, so it sees the first caller's demotion or removal."""
    return list(Membership.objects.select_for_update().filter(project=project, role=OWNER).order_by("pk"))


def create_project(*, user: User, name: str, slug: str | None = None) -> Project:
    """Create a project owned by `user`. The slug is derived from the name when absent.

    Project and owner membership are written in one transaction, so a project never exists without an owner.
    A slug one of the caller's own projects has (in any letter case) is 409 project_exists; one that only
    projects the caller is not in hold gets a random suffix instead (free_slug), so the answer never names
    another tenant's project. The reserved 'global' or a slug a URL cannot carry is 400. An API key limited to
    some projects cannot create one: the new project would lie outside its limit (invisible to the very key that
    made it), so that is 403. Past the account's project limit (accounts.limits) it is 409 account_limit,
    counted with the account's row locked, so concurrent creates stop at the limit."""
    if key_project_ids(user) is not None:
        raise Forbidden("This API key is limited to some projects and cannot create new ones; use a session or a key "
                        "without a project limit.")
    name = _clean_name(name)
    wanted = _clean_slug(slug, name=name)
    for _attempt in range(_SLUG_TRIES):
        try:
            with transaction.atomic():
                account = limits.lock_account(user=user)
                limits.check(account=account, what="projects",
                             held=Project.objects.filter(created_by_id=user.pk).count())
                if Project.objects.filter(slug__iexact=wanted, memberships__user_id=user.pk).exists():
                    raise Conflict(f"A project of yours with the slug {wanted!r} already exists.", field="slug",
                                   code="project_exists")
                project = Project.objects.create(slug=free_slug(wanted), name=name, created_by_id=user.pk)
                Membership.objects.create(project=project, user=user, role=OWNER)
                return project
        except IntegrityError:  # a concurrent create took the slug: pick again
            continue
    raise Conflict("Could not find a free slug; try again.", field="slug", code="project_exists")


_SLUG_TRIES = 5
_SUFFIX_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"


def free_slug(wanted: str) -> str:
    """`wanted` if no project has it (in any letter case), else `wanted-` and six random characters.

    Why not 409: slugs are one namespace for every tenant (they are the project's URL), and a refusal naming a
    slug would tell anyone which slugs other tenants use. The suffix is random, not a counter, so it does not
    tell how many projects share the stem either."""
    if not Project.objects.filter(slug__iexact=wanted).exists():
        return wanted
    for _attempt in range(_SLUG_TRIES):
        tail = "-" + "".join(secrets.choice(_SUFFIX_CHARS) for _ in range(6))
        candidate = wanted[:SLUG_MAX - len(tail)].rstrip("-_") + tail
        if not Project.objects.filter(slug__iexact=candidate).exists():
            return candidate
    raise Conflict("Could not find a free slug; try again.", field="slug", code="project_exists")


def rename_project(*, user: User, project: Project, name: str) -> Project:
    """Owners change the display name; the slug (in every URL and API key limit) never changes."""
    return update_project(user=user, project=project, name=name)


def update_project(*, user: User, project: Project, name: str | None = None) -> Project:
    """Owners change the display name (search.engine.project_ranking sets the reranker under the same rule).
    The slug (in every URL and API key limit) never changes."""
    policy.authorize("project.update", user=user, project=project)
    if name is not None:
        project.name = _clean_name(name)
        project.save(update_fields=["name"])
    return project


def delete_project(*, user: User, project: Project) -> None:
    """Owners delete a project with everything it owns: datasets, documents, chunks, jobs, logs, shares.

    A plain ORM delete is exact for the vector index: the search_chunk trigger queues one outbox delete per
    removed chunk in this same transaction. Datasets of this project that were shared into other projects
    disappear from them too."""
    policy.authorize("project.delete", user=user, project=project)
    with deleting(project_ids=[project.pk]):  # its datasets' jobs stop first, or 409 (projects.deletion)
        project.delete()


def members_of(*, user: User, project: Project) -> list[Membership]:
    """Any member may see who else is in the project (the project detail shows it too)."""
    _require_role(user=user, project=project, roles=set(ROLES), action="see its members")
    return list(Membership.objects.filter(project=project).select_related("user").order_by("user__email", "pk"))


def _clean_role(role: str) -> str:
    if role not in ROLES:
        raise BadInput(f"role must be one of {', '.join(ROLES)}.", field="role")
    return role


def add_member(*, user: User, project: Project, email: str, role: str = Membership.Role.VIEWER) -> Membership:
    """Owners add an existing, active account by email.

    An unknown or inactive email is 404 user_not_found with a message that says nothing about why, so the
    endpoint tells an owner no more than "cannot add"; it cannot be used to learn about accounts beyond that."""
    policy.authorize("member.add", user=user, project=project)
    role = _clean_role(role)
    if not isinstance(email, str):
        raise BadInput("email must be text.", field="email")
    email = check_text(email, field="email").strip()
    if not email:
        raise BadInput("email is required.", field="email")
    target = get_user_model().objects.filter(email__iexact=email, is_active=True).first()
    if target is None:
        raise NotFound("No account with this email can be added.", field="email", code="user_not_found")
    already = Conflict("This account is already a member of the project.", field="email", code="already_member")
    with transaction.atomic():
        owners = _locked_owners(project)  # the caller must still be an owner once the owner rows are held
        if not any(m.user_id == user.pk for m in owners):
            raise Forbidden("Only owners of this project can add members.")
        if Membership.objects.filter(project=project, user=target).exists():
            raise already
        try:
            with transaction.atomic():
                return Membership.objects.create(project=project, user=target, role=role)
        except IntegrityError:  # a concurrent add of the same account won
            raise already from None


def _target(project: Project, membership_id: int) -> Membership:
    membership = (Membership.objects.select_for_update().select_related("user")
                  .filter(pk=membership_id, project=project).first())
    if membership is None:
        raise NotFound("Member not found.")
    return membership


def change_role(*, user: User, project: Project, membership_id: int, role: str) -> Membership:
    """Owners change any member's role (their own too). The last owner cannot be demoted: 409 last_owner.

    Under the owner-row lock the caller's ownership and the owner count are read again, so two owners
    demoting each other at once leave exactly one owner, and a demoted owner cannot act a moment later."""
    policy.authorize("member.change_role", user=user, project=project)
    role = _clean_role(role)
    with transaction.atomic():
        owners = _locked_owners(project)
        if not any(m.user_id == user.pk for m in owners):
            raise Forbidden("Only owners of this project can change roles.")
        membership = _target(project, membership_id)
        if membership.role == OWNER and role != OWNER and len(owners) <= 1:
            raise Conflict("A project needs at least one owner: make someone else an owner first.",
                           field="role", code="last_owner")
        if membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
        return membership


def remove_member(*, user: User, project: Project, membership_id: int) -> None:
    """Owners remove anyone; every member may remove themself (leave). The last owner can do neither: they
    would leave a project no one can manage (409 last_owner); delete the project instead."""
    role = _require_role(user=user, project=project, roles=set(ROLES), action="remove members")
    with transaction.atomic():
        owners = _locked_owners(project)
        membership = _target(project, membership_id)
        is_owner = any(m.user_id == user.pk for m in owners)
        if membership.user_id != user.pk and not is_owner:
            raise Forbidden("Only owners of this project can remove other members." if role != OWNER
                            else "You are no longer an owner of this project.")
        if membership.role == OWNER and len(owners) <= 1:
            raise Conflict("A project needs at least one owner: make someone else an owner first, or delete "
                           "the project.", code="last_owner")
        membership.delete()
