"""Who may write what: one table for every write endpoint, and the one function that applies it.

Why a table: each service used to decide its own rule, and one got it wrong (a viewer of project A who owned
project B could share B's dataset into A and change what A's members retrieve). Here every write action names
the roles it needs in the project the URL names ("here") and, where a second project is involved, in that one
("there": the project that owns a shared dataset). Services call `authorize`; docs/permissions.md is rendered
from RULES (`render_markdown`, checked by a test) and tests/projects/test_policy.py walks every row for every
role through the API, so no endpoint decides alone.

Answers: a caller who is not a member of the project in question gets 404 (existence does not leak); a member
without the role 403. Staff have no project rights through the API unless a rule says so (`staff`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.errors import Forbidden, NotFound
from projects.access import membership_role
from projects.models import Membership

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser

    from accounts.models import User
    from projects.models import Project

OWNER, EDITOR, VIEWER = Membership.Role.OWNER.value, Membership.Role.EDITOR.value, Membership.Role.VIEWER.value
OWNERS = frozenset({OWNER})
WRITERS = frozenset({OWNER, EDITOR})
MEMBERS = frozenset({OWNER, EDITOR, VIEWER})


@dataclass(frozen=True)
class Rule:
    """One write action. `here`: roles needed in the URL's project. `there`: roles needed in the project that owns
    the other object (a shared dataset), or None. `either`: here OR there is enough (ending a share). `staff`:
    staff need no membership (operators acting for a team). `endpoints`: where the action is reachable."""

    action: str
    summary: str
    endpoints: tuple[str, ...]
    here: frozenset[str]
    there: frozenset[str] | None = None
    either: bool = False
    staff: bool = False
    note: str = ""


RULES: dict[str, Rule] = {r.action: r for r in (
    Rule("project.update", "rename a project, choose its reranker", (
        "PATCH /api/projects/{slug}", "POST /projects/{slug}/settings/rename"), OWNERS),
    Rule("project.delete", "delete a project with its datasets", (
        "DELETE /api/projects/{slug}", "POST /projects/{slug}/settings/delete"), OWNERS),
    Rule("member.add", "add a member", (
        "POST /api/projects/{slug}/members", "POST /projects/{slug}/members/add"), OWNERS),
    Rule("member.change_role", "change a member's role", (
        "PATCH /api/projects/{slug}/members/{id}", "POST /projects/{slug}/members/{id}/role"), OWNERS,
         note="the last owner cannot be demoted (409 last_owner)"),
    Rule("member.remove", "remove a member", (
        "DELETE /api/projects/{slug}/members/{id}", "POST /projects/{slug}/members/{id}/remove"), OWNERS,
         note="any member may remove themself (leave); the last owner cannot (409 last_owner)"),
    Rule("dataset.create", "create a dataset (optionally with a source)", (
        "POST /api/projects/{slug}/datasets", "POST /projects/{slug}/datasets/new"), WRITERS,
         note="only staff may create a global dataset"),
    Rule("dataset.update", "rename or describe a dataset", (
        "PATCH /api/projects/{slug}/datasets/{id}",), WRITERS, note="only staff may change is_global"),
    Rule("dataset.delete", "delete a dataset with its documents", (
        "DELETE /api/projects/{slug}/datasets/{id}", "POST /projects/{slug}/datasets/{id}/delete"), WRITERS),
    Rule("share.grant", "share a dataset into this project", (
        "POST /api/projects/{slug}/shares",), OWNERS, there=OWNERS,
         note="here: the receiving project; there: the project that owns the dataset"),
    Rule("share.revoke", "end a share", (
        "DELETE /api/projects/{slug}/shares/{id}", "POST /projects/{slug}/shares/{id}/revoke"), OWNERS,
         there=OWNERS, either=True, note="the receiver drops it or the giver takes it back"),
    Rule("content.write", "push, upload or delete documents", (
        "PUT /api/projects/{slug}/datasets/{id}/documents", "DELETE /api/projects/{slug}/datasets/{id}/documents",
        "DELETE /api/projects/{slug}/datasets/{id}/documents/{external_id}",
        "POST /api/projects/{slug}/datasets/{id}/uploads", "POST /projects/{slug}/datasets/{id}/upload",
        "POST /projects/{slug}/datasets/{id}/documents/delete"), WRITERS),
    Rule("source.write", "set, remove or sync a dataset's source", (
        "PUT /api/projects/{slug}/datasets/{id}/source", "DELETE /api/projects/{slug}/datasets/{id}/source",
        "POST /api/projects/{slug}/datasets/{id}/sync", "POST /projects/{slug}/datasets/{id}/source",
        "POST /projects/{slug}/datasets/{id}/source/remove", "POST /projects/{slug}/datasets/{id}/sync"),
         WRITERS, staff=True, note="staff operate sources of any project (the admin does the same)"),
    Rule("job.cancel", "cancel an ingest or sync job", (
        "POST /api/ingest-jobs/{id}/cancel",), WRITERS, staff=True,
         note="the job's project decides; staff cancel any job (the admin's job list does the same)"),
    Rule("ingest.path", "ingest a path on the server", (
        "POST /api/projects/{slug}/ingest",), WRITERS, note="and the caller must be staff; the path must lie "
                                                             "under INGEST_ALLOWED_ROOTS"),
)}


def _describe(roles: frozenset[str]) -> str:
    return " or ".join(f"{r}s" for r in (OWNER, EDITOR, VIEWER) if r in roles)


def authorize(action: str, *, user: User | AnonymousUser, project: Project, there: Project | None = None,
              what: str = "Project") -> str | None:
    """Apply RULES[action] for `user`: returns the caller's role in `project` (None for staff acting under a
    `staff` rule), or raises NotFound (not a member of the project in question: `what` names the object) or
    Forbidden (a member without the role)."""
    rule = RULES[action]
    role = membership_role(user=user, project=project)
    if rule.staff and getattr(user, "is_staff", False):
        return role
    if rule.there is None:
        if role is None:
            raise NotFound(f"{what} not found.")
        if role not in rule.here:
            raise Forbidden(f"Only {_describe(rule.here)} of this project can {rule.summary}.")
        return role
    if there is None:
        raise ValueError(f"{action} needs the other project")
    role_there = membership_role(user=user, project=there)
    if rule.either:
        if role is None and role_there is None:
            raise NotFound(f"{what} not found.")
        if role not in rule.here and role_there not in rule.there:
            raise Forbidden(f"Only {_describe(rule.here)} of either project can {rule.summary}.")
        return role
    if role_there is None:
        raise NotFound(f"{what} not found.", field="dataset_id")
    if role is None:
        raise NotFound("Project not found.")
    if role_there not in rule.there:
        raise Forbidden(f"Only {_describe(rule.there)} of the dataset's project can {rule.summary}.",
                        field="dataset_id")
    if role not in rule.here:
        raise Forbidden(f"Only {_describe(rule.here)} of this project can {rule.summary}.")
    return role


def allowed(rule: Rule, *, here: str | None, there: str | None = None, staff: bool = False) -> bool:
    """Whether a caller with these roles passes `rule` (what the table says; the walk test compares it with
    what each endpoint answers)."""
    if rule.staff and staff:
        return True
    if rule.there is None:
        return here in rule.here
    if rule.either:
        return here in rule.here or there in rule.there
    return here in rule.here and there in rule.there


def render_markdown() -> str:
    """The table as docs/permissions.md shows it."""
    lines = ["| action | what | needs, in the URL's project | needs, in the other project | endpoints | notes |",
             "|---|---|---|---|---|---|"]
    for r in RULES.values():
        there = "—" if r.there is None else _describe(r.there) + (" (either side is enough)" if r.either else "")
        here = _describe(r.here) + (", or staff" if r.staff else "")
        endpoints = "<br>".join(f"`{e}`" for e in r.endpoints)
        lines.append(f"| `{r.action}` | {r.summary} | {here} | {there} | {endpoints} | {r.note or ''} |")
    return "\n".join(lines)
