from __future__ import annotations

from django.conf import settings
from django.db import models


class Project(models.Model):
    slug = models.SlugField(max_length=80, unique=True)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)
    # the account that created it: what its per-account project limit counts (accounts/limits.py)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="projects")
    # quota overrides (null: the QUOTA_* setting); see projects/quotas.py
    quota_documents = models.PositiveBigIntegerField(null=True, blank=True)
    quota_chunks = models.PositiveBigIntegerField(null=True, blank=True)
    quota_bytes = models.PositiveBigIntegerField(null=True, blank=True)
    # Its datasets, their shares and its ranking settings (reranker, fusion) are search's (search.models).

    GLOBAL_SLUG = "global"

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        EDITOR = "editor"
        VIEWER = "viewer"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.VIEWER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "user"], name="uniq_membership")]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"
