from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


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
    # a cross-encoder trained here (manage.py train_reranker; a folder under var/models/rerankers/): this project's
    # queries rerank with it by default. Blank: RERANKER_MODEL, else the embedded reranker (opt-in).
    reranker = models.CharField(max_length=64, blank=True, default="",
                                help_text="Name of a reranker trained with manage.py train_reranker (blank: none).")
    # the fusion chosen from this project's feedback by `manage.py choose_fusion` (search.quality.fusion_choice):
    # {"setting": {...} or null when the default stays, "label", "reason", "evidence"}; queries that name no
    # fusion run the setting when one was adopted
    fusion = models.JSONField(default=dict, blank=True, editable=False)

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


class Dataset(models.Model):
    class Kind(models.TextChoices):
        CODE = "code"
        WEB = "web"
        RULES = "rules"
        BEIR = "beir"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.CODE)
    is_global = models.BooleanField(default=False, db_index=True)
    # An evaluation corpus (`evaluate --beir`, `train_reranker --beir`): kept out of the live index, searched only
    # in a throwaway store built for the run and dropped after it, so an evaluation never touches live search.
    is_evaluation = models.BooleanField(default=False)
    # The dense model its chunks are searched with: "" is the configured EMBEDDING_MODEL, else the name of a model
    # adapted to this content (var/models/embeddings/<name>; docs/architecture.md, "Per-dataset embedding models").
    # `embedding_model_next` is the model being re-embedded into: queries keep the old vectors until it is complete.
    embedding_model = models.CharField(max_length=64, blank=True, default="")
    embedding_model_next = models.CharField(max_length=64, blank=True, default="")
    # Why the current model was adopted (or an adaptation was not): the held-out and judged-query checks.
    embedding_evidence = models.JSONField(default=dict, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # the account that created it: what its per-account dataset limit counts (accounts/limits.py)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")

    class Meta:
        ordering = ["project__slug", "name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_dataset_name")]

    def __str__(self) -> str:
        return f"{self.project.slug}/{self.name}"


class ProjectShare(models.Model):
    """A dataset shared into another project. Revoking keeps the row for history."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="shares")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="incoming_shares")
    granted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    granted_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-granted_at"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "project"], condition=Q(revoked_at__isnull=True),
                                    name="uniq_active_share"),
        ]

    def __str__(self) -> str:
        state = "revoked" if self.revoked_at else "active"
        return f"{self.dataset} -> {self.project} ({state})"
