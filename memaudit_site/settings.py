"""MemAudit settings: one file, read from the environment through small typed helpers.

Defaults make a fresh checkout run with nothing else installed: SQLite (WAL) and a Celery
broker on kombu's filesystem transport under ``var/``. ``DATABASE_URL=postgres://...`` and
``CELERY_BROKER_URL=redis://...`` switch to PostgreSQL and Redis. Every variable is
documented in ``.env.example``.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from egress.client import parse_allow

BASE_DIR = Path(__file__).resolve().parent.parent
PLACEHOLDER_SECRET_KEY = "---insecure-dev-key-change-me---"


def envstr(name: str, default: str) -> str:
    """NAME's value, or the default when it is unset or empty (as in a copied .env.example)."""
    return os.getenv(name) or default


def envbool(name: str, default: str) -> bool:
    value = os.getenv(name, default)
    if value not in ("", "True", "False"):
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use 'True' or 'False'")
    return value == "True"


def envint(name: str, default: str) -> int:
    value = os.getenv(name, default)
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use an integer") from None


def envfloat(name: str, default: str) -> float:
    value = os.getenv(name, default)
    try:
        return float(value)
    except ValueError:
        raise ImproperlyConfigured(f"Unexpected value {name}={value}, use a number") from None


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


def envsecret(name: str, default: str) -> str:
    """A secret from NAME, or from the file named by NAME_FILE (Docker/K8s secrets)."""
    path = os.getenv(f"{name}_FILE")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"{name}_FILE={path} cannot be read: {exc}") from None
    return os.getenv(name, default)


def private_dir(path: Path) -> Path:
    """Create ``path`` owner-only (0700), tightening it if it exists with wider modes: the
    database, the broker's messages and the keys under it are for the service's user only."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o077:
        try:
            path.chmod(0o700)
        except PermissionError:  # not ours: the operator set it up, leave it as they chose
            pass
    return path


def private_file(path: Path) -> Path:
    """Create an empty ``path`` owner-only (0600) unless it exists; tighten an existing one.
    SQLite gives its -wal and -shm files the database file's mode, so they follow."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            try:
                path.chmod(0o600)
            except PermissionError:
                pass
    return path


DEBUG = envbool("DEBUG", "True")
SECRET_KEY = envsecret("SECRET_KEY", PLACEHOLDER_SECRET_KEY)
ALLOWED_HOSTS = envlist("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = envlist("CSRF_TRUSTED_ORIGINS", "")
SITE_ROOT = envstr("SITE_ROOT", "http://127.0.0.1:8000")
VAR_DIR = Path(envstr("VAR_DIR", str(BASE_DIR / "var")))
private_dir(VAR_DIR)  # the embedded database, broker folders and keys live here: owner-only

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "orgs",
    "ledger",
    "audits",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "orgs.middleware.CurrentOrganizationMiddleware",
    "orgs.middleware.SecurityHeadersMiddleware",
]

ROOT_URLCONF = "memaudit_site.urls"
WSGI_APPLICATION = "memaudit_site.wsgi.application"

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
                "orgs.context_processors.organization",
            ],
        },
    },
]

# Database: SQLite (WAL, set on connect in orgs.apps) unless DATABASE_URL says otherwise.
DATABASE_URL = os.getenv("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=envint("DB_CONN_MAX_AGE", "0"))}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"].setdefault("TEST", {})["NAME"] = envstr("DB_TEST_NAME", f"test_memaudit_{os.getpid()}")
else:
    SQLITE_PATH = Path(envstr("SQLITE_PATH", str(VAR_DIR / "memaudit.sqlite3")))
    if SQLITE_PATH.parent.is_dir():
        private_file(SQLITE_PATH)  # an empty file is a new SQLite database; created 0600, not 0644
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(SQLITE_PATH),
            "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE", "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"},
            # A file (not :memory:) so a worker subprocess can share it; per process so that
            # concurrent test runs on one checkout do not recreate each other's database.
            "TEST": {"NAME": envstr("SQLITE_TEST_PATH", str(VAR_DIR / f"test-{os.getpid()}.sqlite3"))},
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_AGE = envint("SESSION_COOKIE_AGE", str(12 * 3600))
CSRF_FAILURE_VIEW = "orgs.views.csrf_failure"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    # Plotly's browser bundle from the installed package: {% static 'vendor/plotly.min.js' %}.
    "memaudit_site.staticfinders.VendorFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

# Cache: shared between web processes (login rate limiting). Redis when configured, else files.
CACHE_URL = os.getenv("CACHE_URL", "")
if CACHE_URL.startswith("redis://"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": CACHE_URL}}
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.filebased.FileBasedCache", "LOCATION": str(VAR_DIR / "cache")}}
LOGIN_MAX_FAILURES = envint("LOGIN_MAX_FAILURES", "5")
# One password failing on this many logins (any usernames, any addresses) is refused for the
# lockout period: password spraying.
LOGIN_MAX_PASSWORD_FAILURES = envint("LOGIN_MAX_PASSWORD_FAILURES", "10")
LOGIN_LOCKOUT_SECONDS = envint("LOGIN_LOCKOUT_SECONDS", "900")
# Password-reset mails per client address per hour.
PASSWORD_RESET_MAX_PER_HOUR = envint("PASSWORD_RESET_MAX_PER_HOUR", "5")
PASSWORD_RESET_TIMEOUT = envint("PASSWORD_RESET_TIMEOUT", str(3 * 3600))

# Accounts: invitation links and agent tokens expire.
INVITATION_MAX_AGE_SECONDS = envint("INVITATION_MAX_AGE_SECONDS", str(7 * 24 * 3600))
AGENT_TOKEN_DEFAULT_DAYS = envint("AGENT_TOKEN_DEFAULT_DAYS", "90")

# Mail (invitations, password resets): printed to the console unless configured.
EMAIL_BACKEND = envstr("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = envstr("EMAIL_HOST", "localhost")
EMAIL_PORT = envint("EMAIL_PORT", "25")
EMAIL_HOST_USER = envstr("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = envsecret("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = envbool("EMAIL_USE_TLS", "False")
DEFAULT_FROM_EMAIL = envstr("DEFAULT_FROM_EMAIL", "MemAudit <memaudit@localhost>")

# Uploads: memory stores can be large; anything bigger than this is refused with a clear error.
MAX_UPLOAD_BYTES = envint("MAX_UPLOAD_BYTES", str(200 * 1024 * 1024))
# Uploads larger than this are staged under IMPORT_STAGING_DIR and parsed by a worker (the
# request answers with the import job at once); smaller ones are parsed in the request.
IMPORT_INLINE_MAX_BYTES = envint("IMPORT_INLINE_MAX_BYTES", str(2 * 1024 * 1024))
IMPORT_STAGING_DIR = Path(envstr("IMPORT_STAGING_DIR", str(VAR_DIR / "imports")))
DATA_UPLOAD_MAX_MEMORY_SIZE = envint("DATA_UPLOAD_MAX_MEMORY_SIZE", str(10 * 1024 * 1024))
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024

# Celery. The embedded default needs no server: kombu's filesystem transport under var/.
CELERY_BROKER_URL = envstr("CELERY_BROKER_URL", "filesystem://")
BROKER_DIR = VAR_DIR / "broker"
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Owner-only: whoever can write a message here can ask the housekeeper for work (it signs
    # only recorded decisions, ledger.decisions, but the queue is still nobody else's).
    private_dir(BROKER_DIR)
    for _sub in ("queue", "control"):
        private_dir(BROKER_DIR / _sub)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # An unacknowledged task (its worker died) comes back after this long; every task is
    # idempotent, so an early redelivery of a slow one costs time, never correctness.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": envint("REDIS_VISIBILITY_TIMEOUT", "900")}
CELERY_RESULT_BACKEND = os.getenv("CELERY_RESULT_BACKEND", "") or None
CELERY_TASK_ALWAYS_EAGER = envbool("CELERY_TASK_ALWAYS_EAGER", "False")
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "audit"
CELERY_TASK_ROUTES = {
    "audits.tasks.*replay*": {"queue": "replay"},
    "audits.tasks.*": {"queue": "audit"},
    # ledger/import_tasks.py under its tasks' historical names: parsing, embeddings, the classifier
    # and sync, no signing key.
    "ledger.recall_tasks.*": {"queue": "audit"},
    "ledger.tasks.*": {"queue": "housekeeper"},
}
CELERY_IMPORTS = ("ledger.import_tasks",)  # autodiscovery finds only <app>.tasks

# Continuous sync (``manage.py sync_store`` on a schedule, run by ``celery beat``):
# MEMAUDIT_SYNC="<store id>:<mem0-history|langgraph-sqlite>:<path>;..." every SYNC_INTERVAL_SECONDS.
SYNC_INTERVAL_SECONDS = envint("SYNC_INTERVAL_SECONDS", "300")


def _sync_schedule(spec: str) -> dict:
    out = {}
    for n, item in enumerate(x for x in spec.split(";") if x.strip()):
        store_id, source, path = (item.split(":", 2) + ["", ""])[:3]
        if not store_id.strip().isdigit() or source not in ("mem0-history", "langgraph-sqlite") or not path:
            raise ImproperlyConfigured(f"MEMAUDIT_SYNC item {item!r}: use <store id>:<source>:<path>")
        out[f"sync-store-{n}"] = {"task": "ledger.recall_tasks.store_sync_task", "schedule": SYNC_INTERVAL_SECONDS,
                                  "args": (int(store_id), source, path)}
    return out


CELERY_BEAT_SCHEDULE = _sync_schedule(envstr("MEMAUDIT_SYNC", ""))
CELERY_WORKER_QUEUES = ("audit", "replay", "housekeeper")

# The housekeeper's private keys live here, never in the database; only the housekeeper
# worker (and management commands run by an operator) read this directory.
HOUSEKEEPER_KEY_DIR = Path(envstr("HOUSEKEEPER_KEY_DIR", str(VAR_DIR / "keys")))
# Tree heads on their own: every TREE_HEAD_INTERVAL_S the housekeeper (Celery beat, started by
# bin/run) signs a tree head for each organization whose log grew since its last one.
TREE_HEAD_INTERVAL_S = envint("TREE_HEAD_INTERVAL_S", "60")
# C2SP checkpoints are served with origin "<CHECKPOINT_ORIGIN_PREFIX>/<org slug>" (a schema-less
# URL naming this deployment; witnesses key their state by it, so keep it stable).
CHECKPOINT_ORIGIN_PREFIX = envstr("CHECKPOINT_ORIGIN_PREFIX",
                                  SITE_ROOT.split("://", 1)[-1].rstrip("/") + "/memaudit")
CELERY_BEAT_SCHEDULE = {**CELERY_BEAT_SCHEDULE,  # keeps the MEMAUDIT_SYNC entries set above
    "tree-heads": {"task": "ledger.tasks.tree_heads_issue_due_task", "schedule": float(TREE_HEAD_INTERVAL_S)},
    # The review queue's pages only read: signed decisions and classifier flags are synced here.
    "review-queue-sync": {"task": "audits.tasks.review_queue_sync_task",
                          "schedule": float(envint("REVIEW_SYNC_INTERVAL_S", "15"))},
}
RECEIPT_KEY_DIR = Path(envstr("RECEIPT_KEY_DIR", str(VAR_DIR / "receipt-keys")))
# Where the epoch keys' private halves live: "file" (seeds under HOUSEKEEPER_KEY_DIR; development)
# or "pkcs11" (non-extractable Ed25519 keys generated on the token; python-pkcs11 + an HSM, a
# cloud KMS's PKCS#11 bridge, or SoftHSM2). The public epoch records stay in HOUSEKEEPER_KEY_DIR.
HOUSEKEEPER_SIGNER = envstr("HOUSEKEEPER_SIGNER", "file")
PKCS11_MODULE = envstr("PKCS11_MODULE", "/usr/lib/softhsm/libsofthsm2.so")
PKCS11_TOKEN_LABEL = envstr("PKCS11_TOKEN_LABEL", "memaudit")
PKCS11_PIN = envsecret("PKCS11_PIN", "")
if HOUSEKEEPER_SIGNER not in ("file", "pkcs11"):
    raise ImproperlyConfigured(f"HOUSEKEEPER_SIGNER={HOUSEKEEPER_SIGNER}: use 'file' or 'pkcs11'")
# The epoch key (file or HSM) endorses a short-lived online Ed25519 key that lives only in the
# housekeeper's memory and signs entries and tree heads; a new one every this many hours
# (0: sign every entry with the epoch key itself). See docs/bundle.md, "Endorsed keys".
ONLINE_KEY_VALIDITY_HOURS = envint("ONLINE_KEY_VALIDITY_HOURS", "24")
# A recall-receipt key is endorsed by the epoch key for this long, then replaced.
RECEIPT_KEY_VALIDITY_DAYS = envint("RECEIPT_KEY_VALIDITY_DAYS", "30")
EMBEDDING_MODEL_PATH = os.getenv("EMBEDDING_MODEL_PATH", "")
# A dotted embedder class overriding the model choice for every store (tests and load benches
# use "ledger.embeddings.HashingEmbedder", a labelled test double); empty = the real model.
EMBEDDING_BACKEND = os.getenv("EMBEDDING_BACKEND", "")
LLM_BASE_URL = envstr("LLM_BASE_URL", "http://127.0.0.1:8088/v1")


def envallow(name: str, default: str) -> str:
    """An egress allow-list (``127.0.0.1:8088,10.0.0.0/8,[::1]:8088,llm.internal:443``), checked here
    so a typo stops the process at start instead of silently refusing every agent."""
    value = os.getenv(name, default)
    try:
        parse_allow(value)
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from None
    return value


# Egress (egress.client: agent connectors, LLM judges, notification webhooks): the internal
# addresses/networks/host:ports they may reach. Empty = public addresses only; `make run` allows
# the local LLM only.
AGENT_EGRESS_ALLOW = envallow("AGENT_EGRESS_ALLOW", "")
AGENT_MAX_RESPONSE_BYTES = envint("AGENT_MAX_RESPONSE_BYTES", "2097152")
# Replays a worker process keeps in flight per agent endpoint (openai-chat, webhook).
AGENT_MAX_IN_FLIGHT = envint("AGENT_MAX_IN_FLIGHT", "16")
if AGENT_MAX_IN_FLIGHT < 1:
    raise ImproperlyConfigured("AGENT_MAX_IN_FLIGHT must be at least 1")
# Fernet key(s) encrypting stored secrets (agent endpoint API keys, webhook signing secrets:
# orgs.secret_box); a comma list rotates (the first encrypts).
# Empty = a random key generated once into AGENT_SECRETS_KEY_PATH (mode 600).
AGENT_SECRETS_KEY = envsecret("AGENT_SECRETS_KEY", "")
AGENT_SECRETS_KEY_PATH = Path(envstr("AGENT_SECRETS_KEY_PATH", str(VAR_DIR / "agent-secrets.key")))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
        "rest_framework.authentication.TokenAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PARSER_CLASSES": [
        "orgs.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "orgs.api.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
    "EXCEPTION_HANDLER": "orgs.api.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "MemAudit API",
    "DESCRIPTION": "Memory stores, recall with signed receipts, incidents, audits, reviews and the ledger.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# Production hardening; `manage.py check --deploy` passes with DEBUG=False and TLS on.
SECURE_TLS = envbool("SECURE_TLS", "False")
SESSION_COOKIE_SECURE = SECURE_TLS
CSRF_COOKIE_SECURE = SECURE_TLS
SECURE_SSL_REDIRECT = SECURE_TLS
SECURE_HSTS_SECONDS = 31536000 if SECURE_TLS else 0
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_TLS
SECURE_HSTS_PRELOAD = SECURE_TLS
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if envbool("BEHIND_PROXY", "False") else None
SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": envstr("LOG_LEVEL", "WARNING")},
}

# Review: an account a proposer invited cannot approve that proposer's proposals for this many
# hours after joining (four-eyes organizations; audits.services.review_ineligibility).
REVIEW_INVITE_COOLDOWN_HOURS = envint("REVIEW_INVITE_COOLDOWN_HOURS", "72")
