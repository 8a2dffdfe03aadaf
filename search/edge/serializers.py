"""Request and response shapes of the context, rules and content API: the views parse with the Input serializers and
render through the Output ones, so the OpenAPI schema is exactly what goes over the wire
(tests/config/test_response_contracts.py holds every operation to it). Deeper checks of `q`/filters live in
pipeline.validate_query so the API, pages and commands reject the same inputs with the same field names."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.fields import FlagField, InputSerializer, IntField, NumberField, TextField, TextListField
from search.edge.project_serializers import DatasetCreateSerializer, DatasetDetailSerializer, DatasetSerializer
from search.engine.aggregation import AGGREGATIONS
from search.engine.aggregation import DEFAULT as AGGREGATION_DEFAULT
from search.engine.code_graph import DEFAULT_OUTLINE, MAX_FILES, MAX_OUTLINE, MAX_REFERENCES, MAX_SYMBOL
from search.engine.fusion import FUSIONS, RULES_FUSIONS
from search.engine.globs import MAX_GLOB_LENGTH
from search.engine.grep import DEFAULT_MATCHES, MAX_MATCHES, MAX_PATTERN
from search.engine.locate import MAX_TOP_FILES, MAX_TOP_FUNCTIONS, Ranking
from search.engine.pipeline import MAX_CANDIDATES, MAX_Q, MAX_TOP_K, QuerySpec
from search.ingest.progress import MIN_MEASURED_ITEMS, MIN_MEASURED_S, Pace, ingest_job_pace
from search.models import IngestJob
from search.rules.search import DEFAULTS as RULES_DEFAULTS
from search.rules.search import RulesSpec
from search.sources.registry import SOURCE_TYPES


class QueryFiltersSerializer(InputSerializer):
    repo = TextListField(required=False, help_text="Repo name(s); a string works too.")
    path = TextField(required=False, max_length=MAX_GLOB_LENGTH,
                     help_text="Path prefix (`search/`) or glob (`search/**/*.py`, at most 10 wildcards).")
    lang = TextListField(required=False, help_text="Language(s), e.g. python; a string works too.")
    dataset = TextListField(required=False, help_text="Only these datasets (names as listed by the project's "
                                                      "datasets endpoint, or ids); a string works too. A name the "
                                                      "project cannot search is a 400 on `filters.dataset`.")


class QueryRequestSerializer(InputSerializer):
    q = TextField(max_length=MAX_Q, trim_whitespace=False)
    filters = QueryFiltersSerializer(required=False, allow_null=True)
    include_global = FlagField(default=True)
    top_k = IntField(default=15, min_value=1, max_value=MAX_TOP_K)
    candidates = IntField(default=100, min_value=1, max_value=MAX_CANDIDATES)
    fusion = serializers.ChoiceField(choices=list(FUSIONS), required=False,
                                     help_text="Default: the fusion the project adopted from its feedback "
                                               "(manage.py choose_fusion), else the searched content's: weighted "
                                               "(dense 0.6, sparse 0.4) for code, dbsf (dense 0.4, sparse 0.6) "
                                               "for web pages, rrf (k=60) for rules or a mix of kinds.")
    rerank = FlagField(required=False, allow_null=True, default=None,
                       help_text="Default: on only with a real cross-encoder: the project's trained reranker, "
                                 "else RERANKER_MODEL when it is configured.")
    budget_tokens = IntField(default=8000, min_value=100, max_value=100000)
    graph = FlagField(required=False, allow_null=True, default=None,
                      help_text="Code: add to the pack the definitions the top results call or inherit from, and a "
                                "method's class header (pack spans with `source: graph` and a `why`). Default: "
                                "CODE_GRAPH_PACK.")

    def spec(self, *, source: str = "api") -> QuerySpec:
        """The validated body as the pipeline's QuerySpec: the one object every query runs from."""
        d = self.validated_data
        filters = {k: v for k, v in (d.get("filters") or {}).items() if v is not None} or None
        return QuerySpec(q=d["q"], filters=filters, include_global=d["include_global"], top_k=d["top_k"],
                         candidates=d["candidates"], fusion=d.get("fusion"), rerank=d["rerank"],
                         budget_tokens=d["budget_tokens"], graph=d["graph"], source=source)


class WhySerializer(serializers.Serializer):
    dense_score = serializers.FloatField(allow_null=True)
    dense_rank = serializers.IntegerField(allow_null=True)
    sparse_score = serializers.FloatField(allow_null=True)
    sparse_rank = serializers.IntegerField(allow_null=True)
    fused_score = serializers.FloatField()
    rank_before_rerank = serializers.IntegerField()
    rerank_score = serializers.FloatField(allow_null=True)
    graph_boost = serializers.FloatField(allow_null=True, help_text="Rules: what the graph added (null elsewhere).")
    path_prior = serializers.FloatField(help_text="Multiplier from the query naming a path or symbol (1.0: none).")
    final_rank = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    project_id = serializers.IntegerField(help_text="The project queried.")
    owner_project_id = serializers.IntegerField(help_text="The project that owns the dataset (own, shared or global).")
    span = serializers.CharField()
    commit = serializers.CharField(allow_null=True, help_text="Git sources: the commit the result's dataset "
                                   "reflects (its last synced commit); null for content that is not from git.")


class ResultSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    chunk_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    dataset_id = serializers.IntegerField()
    repo = serializers.CharField()
    path = serializers.CharField()
    lang = serializers.CharField()
    symbol = serializers.CharField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField()
    kind = serializers.CharField(help_text="code | web | rules | beir")
    heading_path = serializers.ListField(child=serializers.CharField(), help_text="Web/rules: the headings above.")
    url = serializers.CharField(help_text="Web pages: the page URL (canonical link) when known, else empty.")
    page = serializers.CharField(allow_blank=True, help_text="Where the passage is printed (\"p. 112\", "
                                                             "\"pp. 112–113\") in a paged document (PDF); empty "
                                                             "otherwise.")
    page_url = serializers.CharField(
        allow_null=True, help_text="A link that opens the document at that page (`...#page=112`, the PDF open "
                                   "parameter): the platform's copy of an uploaded, folder or git PDF "
                                   "(`/api/projects/{slug}/originals/{sha256}`, root-relative, for members of this "
                                   "project; the same access as search), or a crawled PDF's own URL. Null where "
                                   "the document has no page or no reachable original (Markdown, DOCX, a PDF over "
                                   "ORIGINALS_MAX_BYTES). The context pack's spans carry the same `page_url`.")
    micro_summary = serializers.CharField()
    text = serializers.CharField()
    score = serializers.FloatField()
    why = WhySerializer()


class QueryResponseSerializer(serializers.Serializer):
    search_session_id = serializers.UUIDField()
    results = ResultSerializer(many=True)
    pack = serializers.DictField()
    timings_ms = serializers.DictField(child=serializers.FloatField())
    reranker = serializers.CharField(allow_null=True)
    fusion = serializers.CharField()
    fusion_source = serializers.ChoiceField(choices=["request", "project", "default"],
                                            help_text="request: named in the body; project: adopted from the "
                                                      "project's feedback; default: the searched content's default "
                                                      "(see the request's `fusion`).")
    fusion_params = serializers.DictField(help_text="method, rrf_k and the dense/sparse weights that ran.")
    embedding_models = serializers.ListField(
        child=serializers.CharField(),
        help_text="The dense models that ran: the configured model, or the model adapted to a searched dataset.")


class IngestRequestSerializer(InputSerializer):
    dataset = TextField(max_length=200, help_text="Dataset name in this project (created if missing).")
    kind = serializers.ChoiceField(choices=["code", "web", "rules"])
    source = TextField(max_length=2000, help_text="Staff only: an absolute server path under INGEST_ALLOWED_ROOTS "
                                                  "(empty by default, so nowhere).")
    repo = TextField(max_length=200, required=False, allow_blank=True)


class IngestJobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    dataset_id = serializers.IntegerField()
    kind = serializers.CharField()
    source = serializers.CharField()
    status = serializers.CharField()
    percent = serializers.IntegerField()
    files_total = serializers.IntegerField()
    files_done = serializers.IntegerField()
    files_skipped = serializers.IntegerField()
    files_deleted = serializers.IntegerField()
    chunks_written = serializers.IntegerField()
    embeddings_computed = serializers.IntegerField()
    embeddings_cached = serializers.IntegerField()
    error = serializers.CharField()
    result = serializers.DictField(help_text="What the job did beyond its counters. A sync: {mode: diff | full | "
                                             "crawl, from, to (commits), changed, deleted (paths, capped)}; "
                                             "empty for other jobs.")
    rate_per_s = serializers.SerializerMethodField(
        help_text="Files per second measured so far (files done / seconds since the job started); null until "
                  f"{MIN_MEASURED_S:g} s or {MIN_MEASURED_ITEMS} files were measured, and for a queued job.")
    eta_s = serializers.SerializerMethodField(
        help_text="Seconds left at the measured rate (files left / rate_per_s); null while the rate or the file "
                  "count is not known yet, or for a job that ended without finishing; 0 once done.")
    eta_at = serializers.SerializerMethodField(help_text="When the job is expected to finish (now + eta_s).")

    def _pace(self, job: IngestJob) -> Pace:
        """Computed on read from the job's counters and timestamps (search.ingest.progress): reading never writes."""
        cache = self.context.setdefault("_pace", {})
        if job.pk not in cache:
            cache[job.pk] = ingest_job_pace(job, now=timezone.now())
        return cache[job.pk]

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_rate_per_s(self, job: IngestJob) -> float | None:
        return self._pace(job).rate_per_s

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_eta_s(self, job: IngestJob) -> float | None:
        return self._pace(job).eta_s

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_eta_at(self, job: IngestJob) -> str | None:
        eta_at = self._pace(job).eta_at
        return serializers.DateTimeField().to_representation(eta_at) if eta_at else None


class IngestJobCancelSerializer(InputSerializer):
    """POST /api/ingest-jobs/{id}/cancel takes no fields: the job is the URL's (an empty body or `{}`)."""


class IngestJobCancelledSerializer(IngestJobSerializer):
    cancel_requested = serializers.BooleanField(
        help_text="Asked to stop. A job that had not started is `cancelled` at once; a running one stops at the next "
                  "file, page or document it reads and ends `cancelled`, keeping what it wrote before.")


class FeedbackRequestSerializer(InputSerializer):
    chunk_id = IntField(min_value=1)
    relevance = IntField(min_value=0, max_value=3)


class FeedbackSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    relevance = serializers.IntegerField()


_RULES_ID = r"^[\w.:-]{1,100}$"
_RULES_ALIASES = {"query": "q", "books": "book", "rulesets": "ruleset"}


class RulesRequestSerializer(InputSerializer):
    """Body of rules search and rules answer; `spec()` is the search.rules.search.RulesSpec it asks for."""

    aliases = frozenset(_RULES_ALIASES)

    q = TextField(max_length=MAX_Q, help_text="The question (`query` is accepted as an alias).")
    book = serializers.ListField(child=serializers.RegexField(_RULES_ID), required=False, max_length=50,
                                 help_text="Book id(s) to search; a single string works too. Alias: books.")
    ruleset = serializers.ListField(child=serializers.RegexField(_RULES_ID), required=False, max_length=50,
                                    help_text="Ruleset id(s); a single string works too. Alias: rulesets.")
    fusion = serializers.ChoiceField(choices=list(RULES_FUSIONS), default=RULES_DEFAULTS["fusion"],
                                     help_text="Default: the rules lawyer's (search.rules.search.DEFAULTS).")
    graph = FlagField(default=True, help_text="false disables the graph boost.")
    seed_top_n = IntField(required=False, min_value=0, max_value=20)
    depth = IntField(required=False, min_value=0, max_value=4)
    decay = NumberField(required=False, min_value=0.0, max_value=1.0)
    graph_top_k = IntField(required=False, min_value=0, max_value=200)
    graph_strength = NumberField(required=False, min_value=0.0, max_value=1.0)
    top_k = IntField(default=8, min_value=1, max_value=50)
    candidates = IntField(default=100, min_value=1, max_value=200)
    rerank = FlagField(required=False, allow_null=True, default=RULES_DEFAULTS["rerank"],
                       help_text="Default: on only with a trained reranker (the project's, or RERANKER_MODEL), as for "
                                 "context search; true also asks for the embedded one; false: the fused order.")
    prefer_kinds = FlagField(default=True, help_text="false: no boost for the content kinds the question's "
                                                     "intents prefer (traversal config policies).")
    audience = FlagField(default=True, help_text="false: no boost for sections written for the detected reader "
                                                 "(player or GM).")
    expand_aliases = FlagField(default=True, help_text="false: the sparse leg does not expand abbreviations "
                                                       "(AC -> armor class) from the traversal config.")
    route_chapters = IntField(default=0, min_value=0, max_value=20,
                              help_text="Search only the N likeliest chapters (0: the whole book).")

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = dict(data)
            for alias, name in _RULES_ALIASES.items():
                if alias in data:
                    value = data.pop(alias)
                    data.setdefault(name, value)
            for name in ("book", "ruleset"):
                if isinstance(data.get(name), str):
                    data[name] = [data[name]] if data[name] else []
                elif data.get(name) is None:
                    data.pop(name, None)
        out = super().to_internal_value(data)
        out["books"] = out.pop("book", [])
        out["rulesets"] = out.pop("ruleset", [])
        return out

    def spec(self, *, source: str = "api") -> RulesSpec:
        """The validated body as the rules lawyer's RulesSpec (an omitted tuning field keeps its default)."""
        return RulesSpec(**self.validated_data, source=source)


class RulesResultSerializer(ResultSerializer):
    book_id = serializers.CharField(allow_blank=True)
    ruleset_id = serializers.CharField(allow_blank=True)
    section_path = serializers.ListField(child=serializers.CharField())
    page = serializers.CharField(allow_blank=True, help_text="Where the passage is printed (\"p. 112\", "
                                                             "\"pp. 112–113\"), for a paged book (PDF); empty "
                                                             "where the format has no pages.")
    cite = serializers.CharField(help_text="How to cite it: the book and, where known, its page (\"core, p. 112\").")
    content_kind = serializers.CharField(allow_blank=True)
    tags = serializers.ListField(child=serializers.CharField())
    traits = serializers.DictField()
    is_rule_bearing = serializers.BooleanField()
    base_score = serializers.FloatField(help_text="Fused score before the policy, heading and graph boosts; base + the "
                                                  "three boosts = why.fused_score, which orders the results unless "
                                                  "the reranker ran (then score is why.rerank_score).")
    policy_boost = serializers.FloatField(help_text="What the traversal policies (preferred kinds, audience) added.")
    heading_boost = serializers.FloatField(help_text="What the heading match added: the question names this "
                                                     "section's heading (0 when it does not, or when it is off).")
    graph_boost = serializers.FloatField()
    graph_path = serializers.ListField(child=serializers.JSONField(), help_text="How the boost reached this chunk.")


class RulesSearchResponseSerializer(serializers.Serializer):
    search_session_id = serializers.UUIDField(allow_null=True)
    results = RulesResultSerializer(many=True)
    analysis = serializers.DictField(help_text="Detected intents, entities, audience and preferred kinds.")
    filters = serializers.DictField()
    fusion = serializers.CharField()
    reranker = serializers.CharField(allow_null=True)
    graph = serializers.DictField()
    policies = serializers.DictField(help_text="The policies applied: prefer_kinds, audience, graph_relations, "
                                               "sparse_query (after aliases).")
    routing = serializers.DictField(help_text="Chapter routing: top_n and the chapters searched.")
    timings_ms = serializers.DictField(child=serializers.FloatField())
    candidate_ids = serializers.ListField(child=serializers.IntegerField())


# --------------------------------------------------------------------------- self-serve content
class PushDocumentSerializer(InputSerializer):
    external_id = TextField(max_length=500, help_text="Your id for the document; a second push with it replaces it.")
    path = TextField(max_length=1000, help_text="Where results point (`src/app.py`, `docs/intro.md`); its suffix "
                                                "picks the language or the markdown/HTML reader.")
    text = TextField(trim_whitespace=False, max_length=1_000_000)
    title = TextField(max_length=500, required=False, allow_blank=True)
    url = TextField(max_length=2000, required=False, allow_blank=True)
    lang = TextField(max_length=40, required=False, allow_blank=True, help_text="Overrides the language from the path.")
    metadata = serializers.DictField(required=False, help_text="Stored with the document.")


class PushRequestSerializer(InputSerializer):
    documents = PushDocumentSerializer(many=True, allow_empty=False,
                                       help_text="At most PUSH_MAX_DOCUMENTS (1,000) per request.")
    repo = TextField(max_length=200, required=False, allow_blank=True, help_text="Default: the dataset name.")

    def validate_documents(self, value: list) -> list:
        if len(value) > settings.PUSH_MAX_DOCUMENTS:
            raise serializers.ValidationError(f"At most {settings.PUSH_MAX_DOCUMENTS} documents per request.")
        return value


class DocumentDeleteSerializer(InputSerializer):
    external_ids = TextListField(required=False, max_length=1000, child=TextField(max_length=500))
    paths = TextListField(required=False, max_length=1000, child=TextField(max_length=1000))


class DocumentDeleteResultSerializer(serializers.Serializer):
    deleted = serializers.IntegerField()
    missing = serializers.ListField(child=serializers.CharField(), help_text="Ids or paths that were not there.")


class DocumentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField(allow_blank=True)
    path = serializers.CharField()
    title = serializers.CharField(allow_blank=True)
    url = serializers.CharField(allow_blank=True)
    lang = serializers.CharField(allow_blank=True)
    content_hash = serializers.CharField()
    size_bytes = serializers.IntegerField()
    chunk_count = serializers.IntegerField()
    updated_at = serializers.DateTimeField()


class DocumentPageSerializer(serializers.Serializer):
    count = serializers.IntegerField()
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    results = DocumentSerializer(many=True)


class DocumentListQuerySerializer(InputSerializer):
    limit = IntField(required=False, min_value=1, max_value=500, default=100)
    offset = IntField(required=False, min_value=0, max_value=10**7, default=0)
    path_prefix = TextField(required=False, max_length=1000)


class UploadRequestSerializer(InputSerializer):
    file = serializers.FileField(help_text="A file (code, markdown, HTML, JSON rulebook) or an archive "
                                           "(.zip, .tar.gz, .tgz, .tar) of a repository or rulebook.")
    mode = serializers.ChoiceField(choices=["merge", "mirror"], required=False,
                                   help_text="mirror: files missing from the upload are removed (default for "
                                             "archives); merge: add and replace only (default for one file).")
    repo = TextField(max_length=200, required=False, allow_blank=True)
    ruleset = serializers.RegexField(r"^[\w.:-]{1,100}$", required=False, help_text="Rules datasets.")
    book = serializers.RegexField(r"^[\w.:-]{1,100}$", required=False, help_text="Rules datasets.")


# --------------------------------------------------------------------------- dataset sources (search.sources)
class SourceSerializer(serializers.Serializer):
    """A dataset's source as the API shows it: whether a token is stored (`has_token`), never the token."""

    type = serializers.ChoiceField(choices=list(SOURCE_TYPES))
    config = serializers.DictField(help_text="git: {url, ref, subdir}; web: {seeds, scope, max_pages, max_depth, "
                                             "include, exclude}; normalised as stored.")
    url = serializers.CharField(help_text="The git URL or the first seed.")
    interval_s = serializers.IntegerField(allow_null=True, help_text="Seconds between scheduled syncs; null: "
                                                                     "manual syncs only.")
    has_token = serializers.BooleanField(help_text="Whether a token is stored (encrypted; never returned).")
    last_sync_at = serializers.DateTimeField(allow_null=True, help_text="When the last sync ended, either way.")
    last_success_at = serializers.DateTimeField(allow_null=True)
    next_sync_at = serializers.DateTimeField(allow_null=True, help_text="When the scheduler syncs next (null: "
                                                                        "manual only); pushed back after failures.")
    last_error = serializers.CharField(allow_blank=True, help_text="Why the last sync failed; empty after a "
                                                                   "success.")
    consecutive_failures = serializers.IntegerField()
    commit = serializers.CharField(allow_null=True, help_text="Git: the commit the dataset reflects.")
    active_sync_id = serializers.UUIDField(allow_null=True, help_text="The sync job queued or running, if any.")


class SourceSetSerializer(InputSerializer):
    source = serializers.DictField(help_text='git: {"type": "git", "url": "https://host/org/repo.git", "ref": '
                                             '"main", "subdir": ""}; web: {"type": "web", "seeds": [url, ...], '
                                             '"scope": "same-host" | "prefix", "max_pages", "max_depth", "include", '
                                             '"exclude"}. URLs must not reach private or loopback addresses; local '
                                             'paths (file://, /path) are for staff.')
    interval_s = IntField(required=False, allow_null=True, min_value=0,
                          help_text="Seconds between scheduled syncs (at least SOURCES_MIN_INTERVAL_S); null or "
                                    "absent: manual syncs only.")
    token = TextField(required=False, allow_blank=True, max_length=4096, trim_whitespace=False,
                      help_text="A credential for a private repository, stored encrypted and never returned. "
                                "Absent: keep the stored one; empty: remove it.")


class DatasetCreateWithSourceSerializer(DatasetCreateSerializer):
    source = serializers.DictField(required=False, allow_null=True,
                                   help_text="Optional: the dataset follows this source from the start (see PUT "
                                             ".../datasets/{id}/source).")
    interval_s = IntField(required=False, allow_null=True, min_value=0, help_text="With `source`.")
    token = TextField(required=False, allow_blank=True, max_length=4096, trim_whitespace=False,
                      help_text="With `source`: stored encrypted, never returned.")


class DatasetWithSourceSerializer(DatasetSerializer):
    source = SourceSerializer(source="source_view", allow_null=True, read_only=True,
                              help_text="The git repository or web site the dataset follows; null if none.")

    class Meta(DatasetSerializer.Meta):
        fields = [*DatasetSerializer.Meta.fields, "source"]
        read_only_fields = fields


class DatasetDetailWithSourceSerializer(DatasetDetailSerializer):
    source = SourceSerializer(source="source_view", allow_null=True, read_only=True,
                              help_text="The git repository or web site the dataset follows; null if none.")

    class Meta(DatasetDetailSerializer.Meta):
        fields = [*DatasetDetailSerializer.Meta.fields, "source"]
        read_only_fields = fields


class SyncJobSerializer(IngestJobSerializer):
    trigger = serializers.CharField(source="options.trigger", default="",
                                    help_text="manual | schedule | command | admin")
    summary = serializers.CharField(help_text="The result in one line (mode, commits, changed and deleted files).")
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)


# --------------------------------------------------------------------------- code tools
_DATASET_HELP = "Only this dataset (name or id, as the datasets endpoint lists them); default: every readable one."


class CodeSymbolRequestSerializer(InputSerializer):
    symbol = TextField(max_length=MAX_SYMBOL, help_text="A name (`deduct`), a qualified name (`Wallet.deduct`) or "
                                                        "a dotted tail of module and name (`billing.ledger.deduct`).")
    dataset = TextField(required=False, max_length=200, help_text=_DATASET_HELP)


class CodeReferencesRequestSerializer(CodeSymbolRequestSerializer):
    limit = IntField(required=False, default=MAX_REFERENCES, min_value=1, max_value=MAX_REFERENCES,
                     help_text="References: at most this many are listed (`total` counts them all).")


class CodeDefinitionSerializer(serializers.Serializer):
    dataset_id = serializers.IntegerField()
    path = serializers.CharField()
    lang = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    qualname = serializers.CharField()
    full_name = serializers.CharField(help_text="The module (from the path) and the qualified name.")
    kind = serializers.CharField(help_text="function | method | class | interface | struct | enum | trait | type | "
                                           "module | variable | ...")
    signature = serializers.CharField(allow_blank=True)
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:start-end")


class CodeDefinitionResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    symbol = serializers.CharField()
    status = serializers.ChoiceField(choices=["found", "ambiguous", "not_found"],
                                     help_text="ambiguous: several definitions match; all are listed, none chosen.")
    definitions = CodeDefinitionSerializer(many=True)
    truncated = serializers.BooleanField()


class CodeReferenceSerializer(serializers.Serializer):
    dataset_id = serializers.IntegerField()
    path = serializers.CharField()
    line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:line")
    kind = serializers.ChoiceField(choices=["call", "reference", "import", "inherit"])
    name = serializers.CharField()
    qualifier = serializers.CharField(allow_blank=True, help_text="What the name was reached through (`self`, a "
                                                                  "module alias; an import's module).")
    container = serializers.CharField(allow_blank=True, help_text="The definition the use sits in (empty: file level).")
    resolution = serializers.ChoiceField(choices=["resolved", "ambiguous"],
                                         help_text="resolved: to `definition`; ambiguous: the name has `candidates` "
                                                   "definitions and this use cannot be pinned to one.")
    definition = serializers.CharField(allow_null=True, help_text="The span of the definition it resolves to.")
    candidates = serializers.IntegerField()


class CodeReferencesResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    symbol = serializers.CharField()
    status = serializers.ChoiceField(choices=["found", "ambiguous", "not_found"])
    definitions = CodeDefinitionSerializer(many=True)
    references = CodeReferenceSerializer(many=True)
    total = serializers.IntegerField()
    truncated = serializers.BooleanField()
    complete = serializers.BooleanField(help_text="false: the time budget (or the request's deadline) or the cap on "
                                                  "uses read ended the search; `total` counts the uses resolved "
                                                  "until then.")


class CodeOutlineRequestSerializer(InputSerializer):
    path = TextField(max_length=1000, help_text="The file's path as search and list_files show it.")
    dataset = TextField(required=False, max_length=200, help_text=_DATASET_HELP)
    limit = IntField(required=False, default=DEFAULT_OUTLINE, min_value=1, max_value=MAX_OUTLINE,
                     help_text="At most this many symbols, and this many imports, in one page.")
    offset = IntField(required=False, default=0, min_value=0, max_value=10 ** 7,
                      help_text="Skip this many of each (paging: the previous page's `next`).")


class CodeOutlineSymbolSerializer(CodeDefinitionSerializer):
    depth = serializers.IntegerField(help_text="Nesting: 0 at file level, 1 for a method, ...")


class CodeImportSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    name = serializers.CharField()
    module = serializers.CharField(allow_blank=True)
    alias = serializers.CharField(allow_blank=True)
    span = serializers.CharField()


class CodeOutlineResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    dataset_id = serializers.IntegerField()
    path = serializers.CharField()
    lang = serializers.CharField(allow_blank=True)
    symbols = CodeOutlineSymbolSerializer(many=True)
    imports = CodeImportSerializer(many=True)
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    complete = serializers.BooleanField(help_text="This page ends both lists.")
    next = serializers.IntegerField(allow_null=True, help_text="The offset of the next page; null when complete.")


class CodeFilesRequestSerializer(InputSerializer):
    dataset = TextField(required=False, max_length=200, help_text=_DATASET_HELP)
    glob = TextField(required=False, max_length=MAX_GLOB_LENGTH, help_text="`src/**/*.py`; a prefix needs `**`.")
    limit = IntField(required=False, default=200, min_value=1, max_value=MAX_FILES)
    offset = IntField(required=False, default=0, min_value=0, max_value=10 ** 7)


class CodeFileSerializer(serializers.Serializer):
    dataset_id = serializers.IntegerField()
    dataset = serializers.CharField()
    path = serializers.CharField()
    lang = serializers.CharField(allow_blank=True)
    size_bytes = serializers.IntegerField()


class CodeFilesResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    files = CodeFileSerializer(many=True)
    limit = serializers.IntegerField()
    offset = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="More files follow: ask again with a larger offset.")


class CodeGrepRequestSerializer(InputSerializer):
    pattern = TextField(max_length=MAX_PATTERN, trim_whitespace=False,
                        help_text="A literal string, or an RE2 regular expression with `regex`. Within one line.")
    regex = FlagField(default=False)
    case_sensitive = FlagField(default=True)
    path = TextField(required=False, max_length=MAX_GLOB_LENGTH, help_text="A path prefix (`src/`) or glob.")
    dataset = TextField(required=False, max_length=200, help_text=_DATASET_HELP)
    max_matches = IntField(required=False, default=DEFAULT_MATCHES, min_value=1, max_value=MAX_MATCHES)


class CodeGrepHitSerializer(serializers.Serializer):
    dataset_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    path = serializers.CharField()
    line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:line")
    text = serializers.CharField(allow_blank=True, help_text="The line (cut at 500 characters).")


class CodeGrepResponseSerializer(serializers.Serializer):
    project = serializers.CharField()
    pattern = serializers.CharField()
    regex = serializers.BooleanField()
    case_sensitive = serializers.BooleanField()
    hits = CodeGrepHitSerializer(many=True)
    truncated = serializers.BooleanField(help_text="max_matches was reached; more hits may follow.")
    complete = serializers.BooleanField(help_text="false: the time budget ended the search before every file "
                                                  "was read.")
    narrowed = serializers.BooleanField(help_text="Whether the pattern's literals narrowed the files read.")
    files_read = serializers.IntegerField()
    took_ms = serializers.FloatField()


# --------------------------------------------------------------------------- locate
class LocateRequestSerializer(InputSerializer):
    task = TextField(max_length=MAX_Q, trim_whitespace=False,
                     help_text="The change you want to make, in words (a commit message, an issue's title).")
    filters = QueryFiltersSerializer(required=False, allow_null=True)
    include_global = FlagField(default=True)
    top_files = IntField(default=10, min_value=1, max_value=MAX_TOP_FILES)
    top_functions = IntField(default=10, min_value=1, max_value=MAX_TOP_FUNCTIONS)
    candidates = IntField(default=100, min_value=1, max_value=MAX_CANDIDATES,
                          help_text="Chunks ranked by the query pipeline and regrouped into files and functions.")
    aggregation = serializers.ChoiceField(choices=list(AGGREGATIONS), default=AGGREGATION_DEFAULT,
                                          help_text="A file's (or function's) score from its chunks: max (the best "
                                                    "chunk), top3 (the sum of the three best), rrf (the sum of "
                                                    "1/(60 + rank)).")
    fusion = serializers.ChoiceField(choices=list(FUSIONS), required=False,
                                     help_text="As for the context query.")
    rerank = FlagField(required=False, allow_null=True, default=None, help_text="As for the context query.")
    history = FlagField(default=True, help_text="Let the past commits whose messages read like the task vote for "
                                                "the files and the functions they changed (datasets that follow "
                                                "git).")
    sources_first = FlagField(default=True, help_text="List source files, and the definitions in them, before "
                                                      "tests, docs, examples and prose (changelogs, READMEs); false "
                                                      "keeps every file where its score puts it.")
    names = FlagField(default=True, help_text="Lift the functions, methods and classes the task names in code "
                                              "form (`open_url`, `Plot.layout`, `NoSuchCommand`, `build()`), even "
                                              "where no chunk reached them; false ranks by the chunks (and the "
                                              "history vote) alone.")
    windows = FlagField(default=False, help_text="Rank the best 30 functions again by their lines that read most "
                                                 "like the task (windows of 24 lines, each embedded with the "
                                                 "task's model), and list each one's best window: where in a long "
                                                 "function to look. About a second more on a CPU when its windows "
                                                 "are not cached; measured, it does not find more of the functions "
                                                 "a change touches, so it is off by default.")

    def spec(self, *, source: str = "api") -> QuerySpec:
        """The context query's spec for the task, logged as kind `locate`: the ranking is search's own."""
        d = self.validated_data
        filters = {k: v for k, v in (d.get("filters") or {}).items() if v is not None} or None
        return QuerySpec(q=d["task"], filters=filters, include_global=d["include_global"],
                         top_k=min(d["candidates"], MAX_TOP_K, max(d["top_files"], d["top_functions"])),
                         candidates=d["candidates"], fusion=d.get("fusion"), rerank=d["rerank"], graph=False,
                         kind="locate", source=source)

    def ranking(self) -> Ranking:
        """How the candidates become files and definitions: the request's aggregation and its history, source-first,
        names and windows switches, the measured defaults for the rest."""
        d = self.validated_data
        return Ranking(aggregation=d["aggregation"], history=d["history"], sources_first=d["sources_first"],
                       names=d["names"], windows=d["windows"])


class LocateEvidenceSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    rank = serializers.IntegerField(help_text="The chunk's rank among the query's candidates (1 is best); a rank "
                                              "past `candidates` is a chunk the second look inside the top files "
                                              "found, in that look's order.")
    score = serializers.FloatField()
    symbol = serializers.CharField(allow_blank=True)
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:start-end")


class LocatePastCommitSerializer(serializers.Serializer):
    sha = serializers.CharField()
    subject = serializers.CharField(allow_blank=True)
    similarity = serializers.FloatField(help_text="Cosine of the commit's message and the task.")


class LocateVoterSerializer(LocatePastCommitSerializer):
    files = serializers.ListField(child=serializers.CharField(), help_text="The source files it changed.")
    functions = serializers.ListField(child=serializers.CharField(),
                                      help_text="The definitions it changed, as `path:qualname`.")


class LocateFileSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    path = serializers.CharField()
    repo = serializers.CharField(allow_blank=True)
    lang = serializers.CharField(allow_blank=True)
    dataset_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    score = serializers.FloatField(help_text="Aggregated from its chunks (the request's `aggregation`); where "
                                             "past commits voted, the merged reciprocal-rank score.")
    chunks = LocateEvidenceSerializer(many=True, help_text="The chunks that support it, best first (at most 5); "
                                                           "none for a file only past commits voted for.")
    history = LocatePastCommitSerializer(many=True, help_text="Similar past commits that changed it (at most 3).")


class LocateNeighbourSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="Callers: the definition the use sits in; callees: the one it resolves to.")
    path = serializers.CharField()
    line = serializers.IntegerField(help_text="The line of the use.")
    span = serializers.CharField()
    relation = serializers.CharField(help_text="call | reference | inherit")


class LocateWindowSerializer(serializers.Serializer):
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:start-end")
    similarity = serializers.FloatField(help_text="Cosine of the window and the task.")


class LocateFunctionSerializer(serializers.Serializer):
    rank = serializers.IntegerField()
    symbol = serializers.CharField(help_text="The qualified name (`Wallet.deduct`).")
    name = serializers.CharField()
    full_name = serializers.CharField(help_text="The module (from the path) and the qualified name.")
    kind = serializers.CharField(help_text="function | method | class")
    signature = serializers.CharField(allow_blank=True)
    path = serializers.CharField()
    dataset_id = serializers.IntegerField()
    start_line = serializers.IntegerField()
    end_line = serializers.IntegerField()
    span = serializers.CharField(help_text="path:start-end")
    score = serializers.FloatField()
    chunks = LocateEvidenceSerializer(many=True, help_text="None for a definition only the task's naming it "
                                                           "listed.")
    named_as = serializers.CharField(allow_null=True, help_text="How the task named it (`Plot.layout`), if it did.")
    window = LocateWindowSerializer(allow_null=True, help_text="With `windows`: its lines that read most like the "
                                                               "task (the best window of 24 lines), for the best "
                                                               "30 definitions, which were ranked again by them; "
                                                               "otherwise null.")
    callers = LocateNeighbourSerializer(many=True, help_text="Uses resolved to it (top 5 functions; at most 5).")
    callees = LocateNeighbourSerializer(many=True, help_text="Definitions it uses (top 5 functions; at most 5).")
    history = LocatePastCommitSerializer(many=True, help_text="Similar past commits that changed this definition "
                                                              "(at most 3).")


class LocateResponseSerializer(serializers.Serializer):
    search_session_id = serializers.CharField(allow_null=True)
    aggregation = serializers.CharField()
    files = LocateFileSerializer(many=True)
    functions = LocateFunctionSerializer(many=True, help_text="Innermost functions, methods and classes the "
                                                              "ranked chunks overlap, and the functions around "
                                                              "helpers defined inside them (code datasets).")
    candidates = serializers.IntegerField(help_text="Chunks the files and functions were aggregated from.")
    timings_ms = serializers.DictField()
    reranker = serializers.CharField(allow_null=True)
    history = LocateVoterSerializer(many=True, help_text="The past commits most like the task (at most 5), whose "
                                                         "changed files and functions voted; empty with `history` "
                                                         "off or no git history remembered.")
