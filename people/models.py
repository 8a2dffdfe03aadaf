"""People, profiles, experience cards, searches, results and contact unlocks.

Why cards carry both `embedding` and `search_document`: tier filters, vector
distance and the full-text bonus then run in one SQL engine, in one query.
"""
from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Lower
from pgvector.django import HnswIndex, VectorField

EMBEDDING_DIM = 384


class Person(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    display_name = models.CharField(max_length=200)
    headline = models.CharField(max_length=300, blank=True, default="")
    email = models.EmailField(blank=True, default="")
    phone = models.CharField(max_length=40, blank=True, default="")
    linkedin_url = models.URLField(blank=True, default="")
    external_id = models.CharField(max_length=100, blank=True, default="", db_index=True)
    import_hash = models.CharField(max_length=64, blank=True, default="", editable=False,
                                   help_text="content hash of the imported record: a re-import of it changes nothing")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.display_name


class PersonProfile(models.Model):
    person = models.OneToOneField(Person, on_delete=models.CASCADE, related_name="profile", primary_key=True)
    bio = models.TextField(blank=True, default="")
    current_city = models.CharField(max_length=100, blank=True, default="")
    open_to_work = models.BooleanField(default=False, db_index=True)
    open_to_contact = models.BooleanField(default=False)
    work_preferred_locations = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    work_preferred_salary_min = models.BigIntegerField(null=True, blank=True, help_text="INR per year")
    contact_email = models.EmailField(blank=True, default="")
    contact_phone = models.CharField(max_length=40, blank=True, default="")


class CardBase(models.Model):
    """Fields shared by parent cards and their evidence children."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    title = models.CharField(max_length=300, blank=True, default="")
    summary = models.TextField(blank=True, default="")
    search_phrases = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    embedding = VectorField(dimensions=EMBEDDING_DIM, null=True, blank=True)
    search_document = SearchVectorField(null=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    def embedding_text(self) -> str:
        return " | ".join(p for p in [self.title, self.summary, ", ".join(self.search_phrases or [])] if p)

    def drop_stale_embedding(self) -> None:
        """Before an update: if the embedded text changed but the vector did not, clear the vector so the
        post_save signal recomputes it in Celery (a stale vector would keep matching the old text)."""
        if self._state.adding or self.embedding is None:
            return
        old = type(self).objects.filter(pk=self.pk).only("title", "summary", "search_phrases", "embedding").first()
        if old is None or old.embedding_text() == self.embedding_text():
            return
        if old.embedding is not None and list(old.embedding) == list(self.embedding):
            self.embedding = None


class ExperienceCard(CardBase):
    class Visibility(models.TextChoices):
        PUBLIC = "public"
        HIDDEN = "hidden"

    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="cards")
    company_norm = models.CharField(max_length=120, blank=True, default="", db_index=True)
    team_norm = models.CharField(max_length=120, blank=True, default="")
    intent_primary = models.CharField(max_length=40, blank=True, default="")
    domain = models.CharField(max_length=80, blank=True, default="")
    sub_domain = models.CharField(max_length=80, blank=True, default="")
    employment_type = models.CharField(max_length=40, blank=True, default="")
    seniority_level = models.CharField(max_length=40, blank=True, default="")
    city = models.CharField(max_length=100, blank=True, default="")
    country = models.CharField(max_length=100, blank=True, default="")
    location_text = models.CharField(max_length=200, blank=True, default="")
    start_date = models.DateField(null=True, blank=True)
    end_date = models.DateField(null=True, blank=True)
    is_current = models.BooleanField(default=False)
    visibility = models.CharField(max_length=10, choices=Visibility.choices, default=Visibility.PUBLIC)

    class Meta:
        indexes = [
            HnswIndex(name="card_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                      opclasses=["vector_cosine_ops"]),
            GinIndex(fields=["search_document"], name="card_search_doc_gin"),
            GinIndex(fields=["search_phrases"], name="card_phrases_gin"),
            models.Index(fields=["person", "visibility"], name="card_person_vis"),
            # the tier filters' columns: counting and exact scans of a selective tier use them (people/retrieval/tiers.py)
            models.Index(fields=["intent_primary"], name="card_intent"),
            models.Index(fields=["seniority_level"], name="card_seniority"),
            models.Index(fields=["domain"], name="card_domain"),
            models.Index(fields=["team_norm"], name="card_team"),
            models.Index(Lower("city"), name="card_city_lower"),
            models.Index(Lower("country"), name="card_country_lower"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.drop_stale_embedding()
        super().save(*args, **kwargs)


class ExperienceCardChild(CardBase):
    parent = models.ForeignKey(ExperienceCard, on_delete=models.CASCADE, related_name="children")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="card_children")
    child_type = models.CharField(max_length=40, blank=True, default="evidence")

    class Meta:
        indexes = [
            HnswIndex(name="child_embedding_hnsw", fields=["embedding"], m=16, ef_construction=64,
                      opclasses=["vector_cosine_ops"]),
            GinIndex(fields=["search_document"], name="child_search_doc_gin"),
        ]

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.drop_stale_embedding()
        super().save(*args, **kwargs)


class Search(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    searcher = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="people_searches")
    query_text = models.TextField()
    parsed_constraints = models.JSONField(default=dict)
    filters = models.JSONField(default=dict, help_text="request overrides")
    extra = models.JSONField(default=dict)
    latency_ms = models.PositiveIntegerField(null=True, blank=True, help_text="server time for the whole search")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["searcher", "-created_at"], name="search_searcher_created")]


class SearchResult(models.Model):
    search = models.ForeignKey(Search, on_delete=models.CASCADE, related_name="results")
    person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="search_results")
    rank = models.PositiveSmallIntegerField()
    score = models.FloatField()
    extra = models.JSONField(default=dict)

    class Meta:
        ordering = ["rank"]
        constraints = [models.UniqueConstraint(fields=["search", "person"], name="uniq_search_person"),
                       models.UniqueConstraint(fields=["search", "rank"], name="uniq_search_rank")]


class UnlockContact(models.Model):
    searcher = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="unlocks")
    target_person = models.ForeignKey(Person, on_delete=models.CASCADE, related_name="unlocks")
    search = models.ForeignKey(Search, on_delete=models.CASCADE, related_name="unlocks")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["searcher", "target_person", "search"],
                                               name="uniq_unlock")]


class VocabTerm(models.Model):
    """One entry of the parser's vocabulary, counted from the directory itself (people/parsing/vocabulary.py).

    Why a table and not a module constant: a directory of people at Stripe in Berlin must be understood without
    editing code; the counts rank ambiguous and fuzzy matches (the more common company wins a typo)."""

    class Kind(models.TextChoices):
        COMPANY = "company"
        TEAM = "team"
        CITY = "city"
        COUNTRY = "country"
        SKILL = "skill"
        DOMAIN = "domain"

    kind = models.CharField(max_length=20, choices=Kind.choices)
    norm = models.CharField(max_length=200, help_text="the normalised value the cards carry (filters compare it)")
    count = models.PositiveIntegerField(default=0, help_text="public cards that carry it")
    extra = models.JSONField(default=dict, blank=True, help_text="for a city: its most common country")
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "norm"], name="uniq_vocab_term")]
        ordering = ["kind", "-count", "norm"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.norm} ({self.count})"


class VocabAlias(models.Model):
    """An admin-editable alias ("big blue" -> ibm, "blr" -> bangalore): what the data cannot teach."""

    kind = models.CharField(max_length=20, choices=VocabTerm.Kind.choices)
    alias = models.CharField(max_length=200)
    norm = models.CharField(max_length=200, help_text="the normalised value it stands for (as on the cards)")
    updated_at = models.DateTimeField(auto_now=True, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["kind", "alias"], name="uniq_vocab_alias")]
        ordering = ["kind", "alias"]
        verbose_name_plural = "vocab aliases"

    def __str__(self) -> str:
        return f"{self.kind}: {self.alias} -> {self.norm}"


class ImportJob(models.Model):
    """One `import_people` run or admin upload: its report (rejected rows with line, field, reason) and the
    progress of its embeddings, which Celery computes after the rows are written."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    source_name = models.CharField(max_length=300, blank=True, default="")
    file_format = models.CharField(max_length=10, choices=[("jsonl", "JSONL"), ("csv", "CSV")], default="jsonl")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="people_imports")
    created_at = models.DateTimeField(auto_now_add=True)
    created = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    cards = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text="[{line, field, reason}], the first 1000")
    embed_total = models.PositiveIntegerField(default=0)
    embed_done = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.source_name or self.pk} ({self.created_at:%Y-%m-%d %H:%M})"
