"""Postgres is the source of truth for everything the engine knows (docs/architecture.md, "Data ownership").

Qdrant holds a projection of Chunk rows (+ vectors from inference.models.EmbeddingCache), written
only by the applier from IndexOutbox.
"""
from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField


class Dataset(models.Model):
    """A project's collection of documents: what is searched, shared and ingested into.

    Owned here, not by projects: everything about a dataset but its owning project and the permission to write it
    is search's (its kind, its embedding model, its content). The table was projects_dataset until migration
    0019/0020 moved the model without copying a row (docs/architecture.md, "Apps")."""

    class Kind(models.TextChoices):
        CODE = "code"
        WEB = "web"
        RULES = "rules"
        BEIR = "beir"

    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="datasets")
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
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="incoming_shares")
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


class ProjectRanking(models.Model):
    """How a project's queries rank by default: its trained reranker and its adopted fusion.

    A row of its own (one per project, absent until something is set) so that the ranking, which only search reads
    and writes, is search's table; the values were Project.reranker and Project.fusion until migration 0021."""

    project = models.OneToOneField("projects.Project", on_delete=models.CASCADE, primary_key=True,
                                   related_name="ranking")
    # a cross-encoder trained here (manage.py train_reranker; a folder under var/models/rerankers/): this project's
    # queries rerank with it by default. Blank: RERANKER_MODEL, else the embedded reranker (opt-in).
    reranker = models.CharField(max_length=64, blank=True, default="",
                                help_text="Name of a reranker trained with manage.py train_reranker (blank: none).")
    # the fusion chosen from this project's feedback by `manage.py choose_fusion` (search.quality.fusion_choice):
    # {"setting": {...} or null when the default stays, "label", "reason", "evidence"}; queries that name no
    # fusion run the setting when one was adopted
    fusion = models.JSONField(default=dict, blank=True, editable=False)

    def __str__(self) -> str:
        return f"ranking of {self.project_id}"


class Document(models.Model):
    """One source file or page (or rulebook file / BEIR doc) in a dataset."""

    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="documents")
    repo = models.CharField(max_length=200, blank=True, default="")
    path = models.CharField(max_length=1000)  # repo-relative path, URL, or external doc id
    url = models.CharField(max_length=2000, blank=True, default="")
    lang = models.CharField(max_length=40, blank=True, default="")
    title = models.CharField(max_length=500, blank=True, default="")
    content_hash = models.CharField(max_length=64)
    macro_summary = models.TextField(blank=True, default="")
    meta = models.JSONField(default=dict, blank=True)
    # the caller's own id for a pushed document (PUT .../documents upserts by it); empty for files from a source
    external_id = models.CharField(max_length=500, blank=True, default="")
    size_bytes = models.PositiveBigIntegerField(default=0)  # source bytes, for the project's stored-bytes quota
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "path"], name="uniq_document_path"),
                       models.UniqueConstraint(fields=["dataset", "external_id"], condition=~models.Q(external_id=""),
                                               name="uniq_document_external_id")]
        indexes = [models.Index(fields=["dataset", "content_hash"])]

    def __str__(self) -> str:
        return self.path


# A document's rows. A chunk, a symbol, a reference and a code file belong to one document and also carry its
# dataset, for the indexes that lead with it (a dataset's paths, names, symbols). Only the document's foreign key is
# a constraint in the database: the row cannot outlive its document nor point at a missing one, and the document's
# own constraint ties it to its dataset. A second check per row against the dataset was about two fifths of the
# foreign-key checks a first ingest's writer paid at commit (docs/benchmarks/context.md). The dataset key is still
# a foreign key to Django: deleting a dataset deletes these rows (its collector cascades), as before.


class Chunk(models.Model):
    """A retrievable span. start_line/end_line are 1-based and inclusive."""

    # no index of their own: uniq_chunk_ordinal (document, ordinal) and the (dataset, path) indexes lead with them
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks", db_index=False)
    # no constraint in the database: the document's guards the row (see "A document's rows" above)
    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="chunks", db_index=False,
                                db_constraint=False)
    ordinal = models.PositiveIntegerField(default=0)
    kind = models.CharField(max_length=32, default="code")  # code | web | rules | beir
    repo = models.CharField(max_length=200, blank=True, default="")
    path = models.CharField(max_length=1000)
    lang = models.CharField(max_length=40, blank=True, default="")
    symbol = models.CharField(max_length=500, blank=True, default="")
    heading_path = ArrayField(models.CharField(max_length=500), default=list, blank=True)
    start_line = models.PositiveIntegerField(default=1)
    end_line = models.PositiveIntegerField(default=1)
    text = models.TextField()
    micro_summary = models.TextField(blank=True, default="")
    text_hash = models.CharField(max_length=64)  # indexed in Meta (equality only: no LIKE index)
    # distinct sparse term indices (the indices of search.ingest.base.row_sparse), set by the ingest runner; triggers
    # turn them into per-dataset document frequencies (search.engine.term_stats, migration 0010)
    terms = ArrayField(models.BigIntegerField(), default=list, blank=True)
    # the BM25 document weight of each of `terms`, in their order (search.ingest.base.row_sparse), which the index
    # applier sends as the point's sparse vector; null on rows written before there was one (the applier analyses
    # their text instead)
    term_weights = ArrayField(models.FloatField(), null=True, blank=True)
    # rulebook enrichment; empty for code/web
    ruleset_id = models.CharField(max_length=100, blank=True, default="")  # indexed in Meta
    book_id = models.CharField(max_length=100, blank=True, default="")  # indexed in Meta
    section_path = ArrayField(models.CharField(max_length=500), default=list, blank=True)
    page = models.CharField(max_length=50, blank=True, default="")
    content_kind = models.CharField(max_length=32, blank=True, default="")
    tags = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    traits = models.JSONField(default=dict, blank=True)
    is_rule_bearing = models.BooleanField(default=False)
    meta = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["document", "ordinal"], name="uniq_chunk_ordinal")]
        indexes = [models.Index(fields=["dataset", "path"]),
                   # serves a path glob's literal prefix (`path LIKE 'src/%'`) whatever the database collation
                   models.Index(fields=["dataset", "path"], opclasses=["int8_ops", "varchar_pattern_ops"],
                                name="chunk_dataset_path_like"),
                   # equality and IN only; db_index=True would add a LIKE index beside each, written by every
                   # chunk and read by no query (search.migrations 0024)
                   models.Index(fields=["text_hash"], name="chunk_text_hash"),
                   # rulebook chunks only: every other chunk has none, and an entry per chunk of '' was written by
                   # every code and web chunk and read by no query (a lookup names a ruleset or a book)
                   models.Index(fields=["ruleset_id"], name="chunk_ruleset_id", condition=~Q(ruleset_id="")),
                   models.Index(fields=["book_id"], name="chunk_book_id", condition=~Q(book_id=""))]

    def __str__(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"

    @property
    def span(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


class DocumentOriginal(models.Model):
    """The bytes a paged document (a PDF) was read from, kept so a citation's page link opens that page.

    Why a table of its own: the bytes are read only when someone opens the link (search.edge.api.originals), never
    by search; a row per document (CASCADE) leaves with its document, its dataset and its project, so the original
    is inside the tenant's access control and goes when the content goes. Addressed by its SHA-256 (the document's
    content_hash): a link names the edition it cites, and a replaced file's old links end instead of opening a
    different edition at the wrong page. Kept for uploads, folder and git ingests; a crawled PDF links to its URL."""

    document = models.OneToOneField(Document, on_delete=models.CASCADE, primary_key=True, related_name="original")
    sha256 = models.CharField(max_length=64, db_index=True)
    media_type = models.CharField(max_length=100, default="application/pdf")
    size = models.PositiveBigIntegerField(default=0)
    data = models.BinaryField()

    def __str__(self) -> str:
        return f"original of {self.document_id} ({self.size} bytes)"


class IndexOutbox(models.Model):
    """Index changes written in the same transaction as the chunks; the applier replays them."""

    class Op(models.TextChoices):
        UPSERT = "upsert"
        DELETE = "delete"

    op = models.CharField(max_length=8, choices=Op.choices)
    chunk_id = models.BigIntegerField(db_index=True)
    model_id = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)


class IndexWatermark(models.Model):
    """How far the applier of one store (collection + location) has read the outbox."""

    store = models.CharField(max_length=500, unique=True)
    last_outbox_id = models.BigIntegerField(default=0)
    # The last complete pass: it read every row committed before scanned_at, up to scanned_id, even past a young
    # gap that holds last_outbox_id back. search.engine.applier.wait_until_indexed reads both.
    scanned_id = models.BigIntegerField(default=0)
    scanned_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)


class IngestJob(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="ingest_jobs")
    source = models.CharField(max_length=2000)
    kind = models.CharField(max_length=16)
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    files_total = models.PositiveIntegerField(default=0)
    files_done = models.PositiveIntegerField(default=0)
    files_skipped = models.PositiveIntegerField(default=0)
    files_deleted = models.PositiveIntegerField(default=0)
    chunks_written = models.PositiveIntegerField(default=0)
    embeddings_computed = models.PositiveIntegerField(default=0)
    embeddings_cached = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True, default="")
    # what the job did beyond its counters; a sync says {"mode": "diff" | "full" | "crawl", "from", "to",
    # "changed": [...], "deleted": [...]} (lists capped) so "exactly that file was re-ingested" can be read off it
    result = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # set by a cancel (the API, the admin, a delete of the dataset or its source); the running job reads it between
    # files, pages and documents and ends as `cancelled` (search.ingest.job_control)
    cancel_requested = models.BooleanField(default=False)

    class Meta:
        ordering = ["-created_at"]

    @property
    def percent(self) -> int:
        return int(100 * self.files_done / self.files_total) if self.files_total else (100 if self.status == "done" else 0)


class Source(models.Model):
    """Where a dataset's content comes from when the platform follows it: a git repository or a web site.

    Why a row of its own (not fields on Dataset): projects owns datasets and knows nothing of fetching; the sync
    state (last commit, schedule, failures) changes on every sync and belongs to search, which runs it.
    Each sync is an IngestJob with options.origin == "sync": its history, progress and errors are the job's."""

    dataset = models.OneToOneField("Dataset", on_delete=models.CASCADE, related_name="source")
    # a registered source type (search.sources.registry); no `choices` here, so a new type needs no migration
    type = models.CharField(max_length=8)
    # git: {"url", "ref", "subdir"}; web: {"seeds", "scope", "max_pages", "max_depth", "include", "exclude"}
    config = models.JSONField(default=dict)
    # the credential (a token), encrypted by search.sources.secrets; never logged, never returned
    secret = models.BinaryField(default=bytes, blank=True)
    interval_s = models.PositiveIntegerField(null=True, blank=True)  # null: manual syncs only
    # git: {"commit": sha the dataset reflects, "ref": ...}; web: {"pages": n, "bytes": n}
    state = models.JSONField(default=dict, blank=True)
    last_sync_at = models.DateTimeField(null=True, blank=True)  # the last sync that finished, either way
    last_success_at = models.DateTimeField(null=True, blank=True)
    next_sync_at = models.DateTimeField(null=True, blank=True, db_index=True)
    last_error = models.TextField(blank=True, default="")
    consecutive_failures = models.PositiveIntegerField(default=0)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["dataset_id"]

    def __str__(self) -> str:
        return f"{self.type} source of {self.dataset_id}"

    @property
    def has_secret(self) -> bool:
        return bool(self.secret)


class CommitMemory(models.Model):
    """One qualifying commit of a git-followed code dataset: its message, the source files and definitions it
    changed, and the message's embedding. `locate` asks which past commits read like the task, lets them vote for
    the files they changed and lists them as the evidence of the definitions they changed
    (search.engine.history_vote): on click, httpx and seaborn that vote ranks the gold files of a later commit about
    as well as the chunks do, and the two miss different files (docs/benchmarks/code-localisation.md).

    Why rows and not a walk at query time: reading a repository's history takes seconds to minutes; the sync that
    moves the dataset to a commit adds that commit's history once (search.sources.git.commit_memory), so a
    query reads only what the synced tree's past holds, never a later commit. Paths are relative to the source's
    subdir, as the commit wrote them; a file since moved or removed simply matches no candidate. Ids follow the
    history (each sync inserts its new commits oldest first), so the newest are the highest ids."""

    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="commit_memory")
    sha = models.CharField(max_length=40)
    committed_at = models.DateTimeField()
    subject = models.CharField(max_length=300)
    query = models.TextField()  # the message as a query (trailers and PR refs out): what is embedded
    files = ArrayField(models.TextField())  # the source files it modified or deleted
    # [[path, qualname], ...]: the definitions it changed in those files (history.commit_definitions); None: not
    # read yet (remembered before the memory kept them), filled in by the next sync within its time budget
    functions = models.JSONField(null=True, blank=True)
    model_id = models.CharField(max_length=200)  # the dense model that embedded `query`
    embedding = VectorField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "sha"], name="commit_memory_unique_sha")]
        indexes = [models.Index(fields=["dataset", "model_id"], name="commit_memory_dataset_model")]

    def __str__(self) -> str:
        return f"{self.sha[:12]} {self.subject}"


class StagedContent(models.Model):
    """What a push or an upload brought, held in Postgres until its ingest job has run.

    Why in Postgres and not on the web server's disk: the job runs in a Celery worker, which may be another
    machine; the row goes with the job (CASCADE) and is deleted when the job finishes."""

    job = models.OneToOneField(IngestJob, on_delete=models.CASCADE, related_name="staged")
    filename = models.CharField(max_length=500, blank=True, default="")
    data = models.BinaryField(default=bytes)  # an uploaded file or archive
    documents = models.JSONField(default=list, blank=True)  # pushed documents
    size = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)


class QuerySession(models.Model):
    """One logged query (context or rules). `search_session_id` groups its RerankResult rows."""

    search_session_id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="query_sessions")
    class Source(models.TextChoices):
        API = "api", "API"
        PAGE = "page", "search page"
        MCP = "mcp", "MCP server"

    kind = models.CharField(max_length=16, default="context")  # context | rules
    # where the query came from: the DRF API, the server-rendered pages, or the MCP server (search.edge.mcp.server)
    source = models.CharField(max_length=8, choices=Source.choices, default=Source.API, db_index=True)
    query = models.TextField()
    filters = models.JSONField(default=dict, blank=True)
    reranker = models.CharField(max_length=200, blank=True, default="")
    timings = models.JSONField(default=dict, blank=True)
    result_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]


class RerankResult(models.Model):
    session = models.ForeignKey(QuerySession, on_delete=models.CASCADE, related_name="rerank_results")
    chunk = models.ForeignKey(Chunk, on_delete=models.SET_NULL, null=True, related_name="+")
    dataset_id = models.BigIntegerField()
    project_id = models.BigIntegerField()
    dense_score = models.FloatField(null=True)
    dense_rank = models.PositiveIntegerField(null=True)
    sparse_score = models.FloatField(null=True)
    sparse_rank = models.PositiveIntegerField(null=True)
    fused_score = models.FloatField(null=True)
    rank_before = models.PositiveIntegerField()
    rerank_score = models.FloatField(null=True)
    rank_after = models.PositiveIntegerField(null=True)
    final_rank = models.PositiveIntegerField(null=True)
    graph_boost = models.FloatField(null=True)

    class Meta:
        ordering = ["session", "rank_before"]


class Feedback(models.Model):
    session = models.ForeignKey(QuerySession, on_delete=models.CASCADE, related_name="feedback")
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="+")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    relevance = models.PositiveSmallIntegerField()  # 0..3
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "chunk"], name="uniq_feedback")]


class DailyMetric(models.Model):
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="daily_metrics")
    day = models.DateField()
    kind = models.CharField(max_length=16, default="context")
    judged_sessions = models.PositiveIntegerField(default=0)
    mrr_at_10 = models.FloatField(null=True)  # the cutoffs of search.quality.metrics, as offline
    ndcg_at_10 = models.FloatField(null=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["project", "day", "kind"], name="uniq_daily_metric")]


class GraphEdge(models.Model):
    """Rulebook graph. Nodes are chunks (`chunk:<id>`) and sections (`section:<path>`)."""

    class Relation(models.TextChoices):
        CONTAINS = "contains"
        NEXT = "next"
        DESCRIBES = "describes"
        HAS_TRAIT = "has_trait"
        REFERENCES = "references"
        SIMILAR_TO = "similar_to"  # embedding neighbours above a threshold (search.rules.graph.similarity_edges)

    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="graph_edges")
    ruleset_id = models.CharField(max_length=100, db_index=True)
    book_id = models.CharField(max_length=100, db_index=True)
    source_id = models.CharField(max_length=600, db_index=True)
    target_id = models.CharField(max_length=600, db_index=True)
    relation = models.CharField(max_length=16, choices=Relation.choices)
    metadata = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["dataset", "source_id", "target_id", "relation"],
                                               name="uniq_graph_edge")]


class TraversalConfig(models.Model):
    """Per-ruleset game terms and policies, versioned."""

    ruleset_id = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    is_active = models.BooleanField(default=True)
    condition_names = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    spell_names = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    feat_names = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    item_names = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    action_names = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    player_keywords = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    gm_keywords = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    intent_patterns = models.JSONField(default=dict, blank=True)
    policies = models.JSONField(default=dict, blank=True)
    # {abbreviation: expansion} applied to the sparse query (search.rules.aliases): learned from the books + edits
    aliases = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["ruleset_id", "-version"]
        constraints = [models.UniqueConstraint(fields=["ruleset_id", "version"], name="uniq_traversal_version")]


class EvaluationRun(models.Model):
    """A `manage.py evaluate` report, kept so the admin dashboard can show the latest ones."""

    collection = models.CharField(max_length=300)
    queries = models.PositiveIntegerField(default=0)
    results = models.JSONField(default=dict)  # {pipeline: {metric: value}}
    timings = models.JSONField(default=dict, blank=True)
    report_dir = models.CharField(max_length=1000, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]


class ReconcileRun(models.Model):
    """One `manage.py reconcile_index` (or admin) check of the index against Postgres.

    Kept so the dashboard can show whether the projection was last found exact,
    and what a fix left behind. Counts leave out ids changed while the scan ran (in flight, not drift).
    """

    store = models.CharField(max_length=500)
    model_id = models.CharField(max_length=200)
    points = models.PositiveIntegerField(default=0)
    chunks = models.PositiveIntegerField(default=0)
    orphans = models.PositiveIntegerField(default=0)  # points whose chunk is gone
    missing = models.PositiveIntegerField(default=0)  # chunks with a vector but no point
    stale = models.PositiveIntegerField(default=0)  # points whose payload differs from Postgres
    unembedded = models.PositiveIntegerField(default=0)  # chunks with no vector for this model (ingest/reembed)
    pending = models.PositiveIntegerField(default=0)  # outbox rows not yet applied when the check ended
    fixed = models.BooleanField(default=False)
    # what the re-check after --fix found; null when the run did not fix
    orphans_after = models.PositiveIntegerField(null=True, blank=True)
    missing_after = models.PositiveIntegerField(null=True, blank=True)
    stale_after = models.PositiveIntegerField(null=True, blank=True)
    duration_s = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def exact(self) -> bool:
        """True when the index held exactly the chunks' points (after the fix, if one ran)."""
        if self.fixed:
            return not (self.orphans_after or self.missing_after or self.stale_after)
        return not (self.orphans or self.missing or self.stale)


class QualityJob(models.Model):
    """An evaluation, a reranker's training or a fusion choice started from the admin, run in the web process.

    Why in the web process: with the embedded store only the process that owns it can search the live index
    (docs/architecture.md, "Who owns the index"); an evaluation of a BEIR folder searches a throwaway store and
    could run anywhere, but one queue for all quality work keeps them from competing for the CPU with each other.
    Progress (`stage`, `done`, `total`) is written by the job's bars (search.quality.progress); liveness is the
    job's advisory lock, as for ingest jobs, so a job whose process died reads as interrupted, not running."""

    class Kind(models.TextChoices):
        EVALUATE_BEIR = "evaluate_beir", "evaluate a BEIR collection"
        EVALUATE_RULES = "evaluate_rules", "evaluate rules questions"
        TRAIN_RERANKER = "train_reranker", "train a reranker"
        CHOOSE_FUSION = "choose_fusion", "choose fusion"
        ADAPT_EMBEDDINGS = "adapt_embeddings", "adapt the embedding model"

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    options = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    stage = models.CharField(max_length=100, blank=True, default="")
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    result = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True, default="")
    evaluation = models.ForeignKey(EvaluationRun, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="jobs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(null=True, blank=True)
    # when the current stage's bar started: its rate is done / (now - this), so each stage (mining, training,
    # re-embedding) is timed on its own (search.quality.progress.quality_job_pace)
    stage_started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    @property
    def percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        return int(100 * self.done / self.total) if self.total else 0


class CodeFile(models.Model):
    """What the code tools know of one document: its symbol facts' digest and the trigrams grep narrows by.

    Why a row per document (any kind, not only code): grep reads every indexed file, and the trigram array is its
    index (Postgres's pg_trgm is not in the embedded server). Written with the document's chunks in one
    transaction (search.ingest.writer) and deleted with the document (CASCADE), so it never outlives or lags its
    text; `manage.py reconcile_code` proves it and the symbol rows equal a fresh build from the chunks."""

    document = models.OneToOneField(Document, on_delete=models.CASCADE, related_name="code_file")
    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="+",
                                db_constraint=False)  # the document's guards the row ("A document's rows")
    path = models.CharField(max_length=1000)
    lang = models.CharField(max_length=40, blank=True, default="")
    lines = models.PositiveIntegerField(default=0)
    # casefolded character trigrams within lines (search.engine.grep.trigrams), for `trigrams @> literal's`
    trigrams = ArrayField(models.BigIntegerField(), default=list, blank=True)
    symbols_digest = models.CharField(max_length=64, blank=True, default="")  # FileSymbols.digest() as written

    class Meta:
        indexes = [models.Index(fields=["dataset", "path"], name="codefile_dataset_path"),
                   GinIndex(fields=["trigrams"], name="codefile_trigrams")]


class Symbol(models.Model):
    """A definition in a file (search.ingest.symbols.Definition); lines 1-based, inclusive."""

    # no index of their own: symbol_dataset_name and symbol_document_line lead with them
    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="+", db_index=False,
                                db_constraint=False)  # the document's guards the row ("A document's rows")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="symbols", db_index=False)
    path = models.CharField(max_length=1000)
    lang = models.CharField(max_length=40, blank=True, default="")
    name = models.CharField(max_length=300)
    qualname = models.CharField(max_length=500)
    kind = models.CharField(max_length=32)
    signature = models.CharField(max_length=300, blank=True, default="")
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()

    class Meta:
        indexes = [models.Index(fields=["dataset", "name"], name="symbol_dataset_name"),
                   models.Index(fields=["document", "start_line"], name="symbol_document_line")]


class SymbolRef(models.Model):
    """A use of a name in a file (search.ingest.symbols.Reference): a call, a reference, an import, a base class.
    Which definition it means is resolved when asked (search.engine.code_graph), never stored."""

    # no index of their own: symbolref_dataset_name and symbolref_document_kind lead with them
    dataset = models.ForeignKey("Dataset", on_delete=models.CASCADE, related_name="+", db_index=False,
                                db_constraint=False)  # the document's guards the row ("A document's rows")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="symbol_refs", db_index=False)
    path = models.CharField(max_length=1000)
    name = models.CharField(max_length=300)
    kind = models.CharField(max_length=16)  # call | reference | import | inherit
    line = models.PositiveIntegerField()
    qualifier = models.CharField(max_length=300, blank=True, default="")
    container = models.CharField(max_length=500, blank=True, default="")
    alias = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        indexes = [models.Index(fields=["dataset", "name"], name="symbolref_dataset_name"),
                   models.Index(fields=["document", "kind"], name="symbolref_document_kind")]
