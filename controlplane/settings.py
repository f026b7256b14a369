"""Django settings for Berth, read from environment variables.

With no variables set Berth runs *embedded*: SQLite under the data dir, Celery
tasks run in-process, and the simulated cluster backend. Every variable is
documented in README.md ("Settings"). A bad value raises ``ConfigError`` naming
the variable; ``manage.py`` turns that into a one-line message and exit code 2.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta
from pathlib import Path

from accounts.sso_config import SettingError, authentication_backends, read_account_settings
from cluster.fairness_shares import DEFAULT_STARVED_BELOW, parse_fraction
from controlplane.env import (
    ConfigError,
    Env,
    parse_broker_url,
    parse_database_url,
    sqlite_database,
)

env = Env(os.environ)

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env.text("BERTH_DATA_DIR", str(BASE_DIR / "var"))).resolve()

CLUSTER_BACKENDS = ("simulated", "kubernetes")
BERTH_CLUSTER = env.choice("BERTH_CLUSTER", "simulated", CLUSTER_BACKENDS)
# On the simulated cluster, jobs work this many times faster than real time (and
# arrive that much more often), stepped every BERTH_SIMULATED_TICK_MS; its load
# generator keeps the demo busy (BERTH_DEMO_LOAD, on by default when simulated).
BERTH_SIMULATED_SPEEDUP = float(env.number("BERTH_SIMULATED_SPEEDUP", 60, minimum=1))
BERTH_SIMULATED_TICK = float(env.number("BERTH_SIMULATED_TICK_MS", 2000, minimum=100)) / 1000
BERTH_DEMO_LOAD = env.flag("BERTH_DEMO_LOAD", BERTH_CLUSTER == "simulated")
# Read by the kubernetes backend; empty means in-cluster config, then ~/.kube/config.
BERTH_KUBE_CONTEXT = env.text("BERTH_KUBE_CONTEXT", "")

DEBUG = env.flag("BERTH_DEBUG", False)
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]"]
_hosts = env.items("BERTH_ALLOWED_HOSTS", LOOPBACK_HOSTS)
if not _hosts:
    raise ConfigError(
        "BERTH_ALLOWED_HOSTS is empty: every request would be refused; list the host names "
        "Berth answers to, e.g. berth.example.com"
    )
# Loopback names always work, so health checks from inside the container or pod
# keep answering whatever public names are configured.
ALLOWED_HOSTS = [*_hosts, *(host for host in LOOPBACK_HOSTS if host not in _hosts)]
CSRF_TRUSTED_ORIGINS = env.items("BERTH_CSRF_TRUSTED_ORIGINS", [])
# Behind TLS (the production overlay in deploy/ and docker-compose.yml turn these
# on): cookies only over HTTPS, HTTP redirected, HSTS, and the proxy's header
# that says a request came in over HTTPS. `manage.py check --deploy` passes
# with them (tests/controlplane/test_production_settings.py).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env.flag("BERTH_SECURE_COOKIES", False)
SECURE_SSL_REDIRECT = env.flag("BERTH_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env.number("BERTH_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.flag("BERTH_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env.flag("BERTH_HSTS_PRELOAD", True)
_proxy_header = env.text("BERTH_PROXY_SSL_HEADER", "")
if _proxy_header:
    # e.g. X-Forwarded-Proto: only when the proxy always sets (or strips) it.
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
# Health probes come over plain HTTP from inside the pod: never redirected.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^metrics$"]
LOG_LEVEL = env.choice(
    "BERTH_LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")
).upper()
BERTH_AUDIT_RETENTION_DAYS = env.number("BERTH_AUDIT_RETENTION_DAYS", 90, minimum=1)
# Brute-force protection (accounts/lockout.py): failed logins on any login form
# lock that username, and that address, out for a while; so do refused API
# tokens from one address. Both answer 429 with Retry-After and are logged.
BERTH_LOGIN_FAILURE_LIMIT = env.number("BERTH_LOGIN_FAILURE_LIMIT", 5, minimum=1)
BERTH_LOGIN_LOCKOUT_MINUTES = env.number("BERTH_LOGIN_LOCKOUT_MINUTES", 15, minimum=1)
BERTH_TOKEN_FAILURE_LIMIT = env.number("BERTH_TOKEN_FAILURE_LIMIT", 20, minimum=1)
BERTH_TOKEN_LOCKOUT_MINUTES = env.number("BERTH_TOKEN_LOCKOUT_MINUTES", 15, minimum=1)
AXES_FAILURE_LIMIT = BERTH_LOGIN_FAILURE_LIMIT
AXES_COOLOFF_TIME = timedelta(minutes=BERTH_LOGIN_LOCKOUT_MINUTES)
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "accounts.lockout.locked_out_response"
AXES_VERBOSE = False
# Single sign-on with OpenID Connect and local accounts (accounts/sso_config.py,
# docs/sso.md): BERTH_OIDC_ISSUER turns it on, BERTH_OIDC_GROUP_MAP maps the
# provider's groups to roles, BERTH_LOCAL_ACCOUNTS=false turns passwords off.
try:
    _accounts = read_account_settings(env)
except SettingError as exc:
    raise ConfigError(str(exc)) from None
BERTH_SSO = _accounts.sso
BERTH_LOCAL_ACCOUNTS = _accounts.local_accounts
# Team memberships live in the policy app, above accounts: the single sign-on
# backend applies the team roles of the group map through this (queues/sso.py).
BERTH_SSO_TEAM_ROLES = "queues.sso.follow_identity_provider"
# How long recorded history is kept (cluster/retention.py): snapshots thinned
# as they age, ended workloads, hourly rollups, reconcile runs.
BERTH_SNAPSHOTS_FULL_HOURS = env.number("BERTH_SNAPSHOTS_FULL_HOURS", 1, minimum=1)
BERTH_SNAPSHOTS_5MIN_HOURS = env.number("BERTH_SNAPSHOTS_5MIN_HOURS", 48, minimum=1)
BERTH_SNAPSHOTS_HOURLY_DAYS = env.number("BERTH_SNAPSHOTS_HOURLY_DAYS", 90, minimum=1)
BERTH_WORKLOAD_RETENTION_DAYS = env.number("BERTH_WORKLOAD_RETENTION_DAYS", 90, minimum=1)
BERTH_ROLLUP_RETENTION_DAYS = env.number("BERTH_ROLLUP_RETENTION_DAYS", 400, minimum=1)
BERTH_RECONCILE_RETENTION_DAYS = env.number("BERTH_RECONCILE_RETENTION_DAYS", 90, minimum=1)
# Reconcile after every policy change (and every BERTH_RECONCILE_INTERVAL s anyway).
BERTH_RECONCILE_ON_CHANGE = env.flag("BERTH_RECONCILE_ON_CHANGE", True)
BERTH_RECONCILE_INTERVAL = env.number("BERTH_RECONCILE_INTERVAL", 60, minimum=5)
# First wait before retrying a transient cluster error; doubles with jitter, 5 tries.
BERTH_RECONCILE_RETRY_BASE = float(env.number("BERTH_RECONCILE_RETRY_MS", 500, minimum=1)) / 1000
# Seconds between workload list syncs and queue/capacity snapshots.
BERTH_SYNC_INTERVAL = env.number("BERTH_SYNC_INTERVAL", 30, minimum=5)
# Seconds the dashboard's cluster-wide figures (capacity, waits, queue rows, all
# from the sync's snapshots) are built once and shown to every viewer; 0 builds
# them for each page view.
BERTH_SHARED_FIGURES_SECONDS = env.number("BERTH_SHARED_FIGURES_SECONDS", 5, minimum=0)
# GPUs a node of a flavor is taken to have until sync has seen that flavor's nodes.
BERTH_NODE_GPUS = env.number("BERTH_NODE_GPUS", 8, minimum=1)
# Checkpoint interval assumed for jobs that checkpoint but do not say how often.
BERTH_CHECKPOINT_INTERVAL = env.number("BERTH_CHECKPOINT_INTERVAL", 1800, minimum=60)
# The currency of every flavor's GPU-hour price and the showback costs (docs/showback.md):
# one ISO 4217 code for the whole installation; prices are not converted.
BERTH_CURRENCY = env.text("BERTH_CURRENCY", "USD").strip().upper()
if not (len(BERTH_CURRENCY) == 3 and BERTH_CURRENCY.isascii() and BERTH_CURRENCY.isalpha()):
    raise ConfigError(
        f"BERTH_CURRENCY={BERTH_CURRENCY!r} is not a currency code: give three letters "
        "of ISO 4217, e.g. USD, EUR or GBP"
    )
# Attempts to create a job on the cluster while it answers with transient errors
# (429, 5xx, timeouts, refused connections) before the job is rejected saying so.
# A worker tries six times with backoff (about half a minute), then the sweeper
# queues another round a minute or two later: 20 attempts ride out roughly five
# to eight minutes of outage (20 to 40 embedded, one attempt per sweep).
BERTH_JOB_CREATE_ATTEMPTS = env.number("BERTH_JOB_CREATE_ATTEMPTS", 20, minimum=1)
if BERTH_JOB_CREATE_ATTEMPTS > 1000:
    raise ConfigError(
        f"BERTH_JOB_CREATE_ATTEMPTS={BERTH_JOB_CREATE_ATTEMPTS} is too large: it must be at "
        "most 1000 (past that, a job would wait hours to be told the cluster keeps failing)"
    )
# A job's create that no worker has taken up this many seconds after it was queued,
# or whose attempt has not finished (nor said it will retry) this long after it
# began, is queued again by the sweeper (every 5 s), once: its message was lost (a
# worker killed after taking it holds it unacknowledged, and Redis hands it out
# again only after the 2 h visibility timeout). Only while fewer than
# BERTH_JOB_REDRIVE_QUEUE_LIMIT messages wait in Berth's queue: with a longer one it
# is probably just waiting in line, and the one-minute sweep applies. Creates are
# idempotent: a duplicate message finds the object it made and creates nothing more.
BERTH_JOB_CREATE_REDRIVE_SECONDS = env.number("BERTH_JOB_CREATE_REDRIVE_SECONDS", 10, minimum=1)
BERTH_JOB_REDRIVE_QUEUE_LIMIT = env.number("BERTH_JOB_REDRIVE_QUEUE_LIMIT", 20, minimum=0)
# A what-if replaying at least BERTH_REPLAY_SPLIT_MIN workloads, in more than one
# independent cohort tree, is shared out among the Celery workers (whatif.scaleout),
# and so are a capacity plan's replays (whatif.plan_scaleout): among
# BERTH_REPLAY_WORKERS, or, at 0, the worker processes that answer (pool sizes).
BERTH_REPLAY_SPLIT_MIN = env.number("BERTH_REPLAY_SPLIT_MIN", 5_000, minimum=1)
BERTH_REPLAY_WORKERS = env.number("BERTH_REPLAY_WORKERS", 0, minimum=0)
# The engine reads this itself as it is imported (queues.engine.compiled): checked
# here so that a value it would not understand stops start-up instead.
BERTH_PURE_ENGINE = env.flag("BERTH_PURE_ENGINE", False)
# Approvals (the urgent-release AdmissionCheck): how long a request may wait for a
# decision before it is rejected as expired, and how soon an approved workload that
# Kueue evicted must be back (quota reserved again) to keep its approval.
BERTH_APPROVAL_TIMEOUT = env.number("BERTH_APPROVAL_TIMEOUT", 4 * 60 * 60, minimum=60)
BERTH_APPROVAL_GRACE = env.number("BERTH_APPROVAL_GRACE", 15 * 60, minimum=0)
# Seconds between approval controller passes (raise, expire, re-drive decisions).
BERTH_APPROVAL_INTERVAL = env.number("BERTH_APPROVAL_INTERVAL", 15, minimum=1)
# Optional Slack-compatible incoming webhook told of every new request.
BERTH_APPROVAL_WEBHOOK_URL = env.text("BERTH_APPROVAL_WEBHOOK_URL", "").strip()
if BERTH_APPROVAL_WEBHOOK_URL and not BERTH_APPROVAL_WEBHOOK_URL.startswith(
    ("http://", "https://")
):
    raise ConfigError(
        f"BERTH_APPROVAL_WEBHOOK_URL={BERTH_APPROVAL_WEBHOOK_URL!r} is not an http(s) URL: "
        "give the webhook's full URL, e.g. https://hooks.slack.com/services/..., or unset it"
    )
# A team getting less than this share of what it deserves while it waits is
# starved (docs/fairness.md): shown, exported and announced; a team may have its own.
BERTH_FAIR_SHARE_STARVED_BELOW, _problem = parse_fraction(
    env.text("BERTH_FAIR_SHARE_STARVED_BELOW", str(DEFAULT_STARVED_BELOW))
)
if BERTH_FAIR_SHARE_STARVED_BELOW is None:
    raise ConfigError(f"BERTH_FAIR_SHARE_STARVED_BELOW: {_problem}")
# Links in notifications point here (the address people open Berth at).
BERTH_PUBLIC_URL = env.text("BERTH_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Mail: Django's settings; the console backend (mail printed to the log) by default.
EMAIL_BACKEND = env.text("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env.text("EMAIL_HOST", "localhost")
EMAIL_PORT = env.number("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = env.text("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = env.text("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = env.flag("EMAIL_USE_TLS", False)
DEFAULT_FROM_EMAIL = env.text("DEFAULT_FROM_EMAIL", "berth@localhost")
# Prometheus with the DCGM exporter's metrics, for real GPU utilisation.
BERTH_PROMETHEUS_URL = env.text("PROMETHEUS_URL", "").strip()
if BERTH_PROMETHEUS_URL and not BERTH_PROMETHEUS_URL.startswith(("http://", "https://")):
    raise ConfigError(
        f"PROMETHEUS_URL={BERTH_PROMETHEUS_URL!r} is not an http(s) URL: give the server's "
        "address, e.g. http://prometheus.monitoring:9090"
    )
# Bearer token Prometheus sends to GET /metrics. Unset: /metrics answers only
# loopback (not proxied) requests and signed-in platform admins.
BERTH_METRICS_TOKEN = env.text("BERTH_METRICS_TOKEN", "").strip()
if BERTH_METRICS_TOKEN and len(BERTH_METRICS_TOKEN) < 16:
    raise ConfigError(
        "BERTH_METRICS_TOKEN is too short: use at least 16 random characters, "
        "e.g. $(openssl rand -hex 32)"
    )


def _data_dir(*parts: str) -> Path:
    """The data dir (or a directory below it), created if needed."""
    path = DATA_DIR.joinpath(*parts)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"BERTH_DATA_DIR={str(DATA_DIR)!r}: {str(path)!r} cannot be created "
            f"({exc.strerror}); point BERTH_DATA_DIR at a writable directory"
        ) from exc
    return path


def _secret_key() -> str:
    """BERTH_SECRET_KEY(_FILE), else a key generated once and kept in the data dir."""
    configured = env.raw("BERTH_SECRET_KEY")
    if configured is not None:
        if len(configured) < 32:
            raise ConfigError("BERTH_SECRET_KEY is too short: use at least 32 random characters")
        return configured
    key_file = _data_dir() / "secret_key"
    try:
        if not key_file.exists():
            key_file.write_text(secrets.token_urlsafe(50), encoding="utf-8")
            key_file.chmod(0o600)
        return key_file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"BERTH_DATA_DIR={str(DATA_DIR)!r}: the secret key file cannot be written "
            f"({exc.strerror}); make the directory writable or set BERTH_SECRET_KEY"
        ) from exc


SECRET_KEY = _secret_key()

_database_url = env.raw("DATABASE_URL")
DATABASES = {
    "default": (
        sqlite_database(_data_dir() / "berth.sqlite3")
        if _database_url is None
        else parse_database_url("DATABASE_URL", _database_url)
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "accounts",
    "queues",
    "cluster",
    "jobs",
    "approvals",
    "whatif",
    "grants",
    "frontend",
    # Last: its embedded loop and run_embedded command drive every app above.
    "controlplane",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "controlplane.content_security.ContentSecurityPolicy",
    "controlplane.text_guard.RefuseNulCharacters",
    "controlplane.body_limit.RefuseOversizedApiBodies",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A database that does not answer (a restart, a failover) is a 503 with
    # Retry-After, not a 500 (controlplane/database_outage.py).
    "controlplane.database_outage.AnswerDatabaseOutages",
    # Last, as django-axes asks: it turns a locked-out login into a 429.
    "axes.middleware.AxesMiddleware",
]

# axes' lockout check first, then passwords (unless local accounts are off), then
# single sign-on (when configured): accounts.sso_config.authentication_backends.
AUTHENTICATION_BACKENDS = authentication_backends(_accounts)

ROOT_URLCONF = "controlplane.urls"
WSGI_APPLICATION = "controlplane.wsgi.application"
ASGI_APPLICATION = "controlplane.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# A form posted with a stale token gets the styled 403 page, saying to reload.
CSRF_FAILURE_VIEW = "frontend.views.errors.csrf_failure"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
# Created because WhiteNoise warns about a missing STATIC_ROOT even when it serves
# from the finders.
STATIC_ROOT = _data_dir("static")
# Serve app static files straight from the installed packages, so the embedded
# mode needs no collectstatic step and plotly/swagger assets never come from a CDN.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First, so that an anonymous request is answered 401 with WWW-Authenticate.
        "accounts.authentication.ApiTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "queues.api.conventions.Pagination",
    "DEFAULT_FILTER_BACKENDS": [
        "accounts.api.strict_query.StrictFilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_SCHEMA_CLASS": "queues.api.error_schema.BerthAutoSchema",
    "EXCEPTION_HANDLER": "queues.api.conventions.exception_handler",
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "queues.api.conventions.ContentNegotiation",
    # JSON only: a form or multipart body is a 415, not read as something else.
    "DEFAULT_PARSER_CLASSES": ["queues.api.conventions.JSONParser"],
    # DRF's browsable HTML only when debugging: its scripts set inline event
    # handlers, which Berth's Content-Security-Policy refuses. People read the
    # API at /api/docs/.
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        *(["rest_framework.renderers.BrowsableAPIRenderer"] if DEBUG else []),
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Berth API",
    "DESCRIPTION": (
        "Policy (teams, flavors, cohorts, quotas, priorities, queue classes) for a shared "
        "GPU cluster run by Kueue. Authenticate with a session or `Authorization: Bearer <token>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # One schema name per choice set, whichever serializer uses it.
    "ENUM_NAME_OVERRIDES": {
        name: f"queues.choices.{name}"
        for name in (
            "CapacityType",
            "QueueingStrategy",
            "WithinClusterQueue",
            "ReclaimWithinCohort",
            "BorrowWithinCohortPolicy",
            "FungibilityAction",
            "FungibilityPreference",
            "StopPolicy",
            "TeamRole",
            "AdmissionMode",
            "PreemptionStrategy",
            "RequeuingTimestamp",
        )
    }
    | {name: f"jobs.models.requests.{name}" for name in ("JobKind", "JobState")}
    | {name: f"approvals.models.{name}" for name in ("ApprovalState", "ApprovalAction")}
    | {name: f"grants.models.{name}" for name in ("GrantKind", "GrantState")},
}

# Celery. No broker configured means embedded: tasks run in-process, eagerly.
_broker = env.raw("CELERY_BROKER_URL")
CELERY_EMBEDDED = not _broker
CELERY_BROKER_URL = (
    parse_broker_url("CELERY_BROKER_URL", _broker) if _broker else "memory://localhost/"
)
CELERY_TASK_ALWAYS_EAGER = CELERY_EMBEDDED
# Berth's own queue name, so two installations can share one Redis.
CELERY_TASK_DEFAULT_QUEUE = env.text("BERTH_CELERY_QUEUE", "berth")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Above the longest task, so Redis does not hand a running task to a second worker.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 2 * 60 * 60}
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULE = {
    "prune-access-denials": {
        "task": "accounts.tasks.prune_access_denials",
        "schedule": 6 * 60 * 60,
    },
    # Snapshots thinned as they age; ended workloads, old rollups and runs dropped.
    "prune-history": {"task": "cluster.tasks.prune_history", "schedule": 60 * 60},
    # Level-based: repairs drift and catches anything a lost task missed.
    "reconcile-policy": {
        "task": "queues.tasks.reconcile_policy",
        "schedule": BERTH_RECONCILE_INTERVAL,
        "args": ["periodic"],
    },
    # The cluster behind the policy (lost task, killed worker): queue a reconcile.
    "sweep-reconcile": {"task": "queues.tasks.sweep_reconcile", "schedule": 30},
    # Workload list sync and queue/capacity snapshots; `manage.py sync_watch`
    # adds a watch for changes within seconds.
    # A sync not started within its interval is dropped: the next one covers it,
    # and a backlog of them (a slow or stopped worker) never piles up in Redis.
    "sync-cluster": {
        "task": "jobs.tasks.sync_cluster",
        "schedule": BERTH_SYNC_INTERVAL,
        "options": {"expires": BERTH_SYNC_INTERVAL},
    },
    # The approval controller: raise requests, expire them, re-drive decisions.
    "drive-approvals": {
        "task": "jobs.tasks.drive_approvals",
        "schedule": BERTH_APPROVAL_INTERVAL,
    },
    # What-if runs and capacity plans whose task was lost: sent again.
    "redrive-whatif": {"task": "whatif.tasks.redrive_queued", "schedule": 5 * 60},
    # Quota grants whose end has passed (also while Berth was down): reverted.
    "revert-ended-grants": {"task": "grants.tasks.revert_ended_grants", "schedule": 60},
    # Jobs whose create or delete task was lost: queue it again.
    # Every 5 s: a create that could not be queued goes as soon as the broker is
    # back; one no worker took up, or whose attempt never finished (lost with a
    # killed worker), after BERTH_JOB_CREATE_REDRIVE_SECONDS; anything else left
    # behind after a minute.
    # A sweep that finds nothing to do costs two indexed queries.
    "sweep-jobs": {"task": "jobs.tasks.sweep_jobs", "schedule": 5},
    # Fair shares: each team's figures, and a notice when one starts or stops starving.
    "fair-shares": {"task": "approvals.tasks.evaluate_fair_shares", "schedule": 60},
}
if BERTH_CLUSTER == "simulated":
    CELERY_BEAT_SCHEDULE["step-simulated-cluster"] = {
        "task": "queues.tasks.step_simulated_cluster",
        "schedule": BERTH_SIMULATED_TICK,
    }

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # axes logs every failed sign-in at INFO; Berth's access log already has them.
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}
