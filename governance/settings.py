"""Settings for Context Governance, read from the environment with safe defaults.

With no variable set the app runs on SQLite with background tasks in-process.
`DATABASE_URL` and `CELERY_BROKER_URL` switch it to PostgreSQL and a Celery
worker without any change of code. See the README's configuration table.
"""

import os
import secrets
from pathlib import Path

import dj_database_url
from csp.constants import NONE, SELF
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    lowered = value.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


VAR_DIR = Path(os.environ.get("GOVERNANCE_VAR_DIR", BASE_DIR / "var"))

DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    """The key from the environment, else one generated once and kept in var/ (mode 0600)."""
    from_env = os.environ.get("DJANGO_SECRET_KEY")
    if from_env:
        return from_env
    key_file = VAR_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(64)
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
CSRF_FAILURE_VIEW = "governance.views.csrf_failure"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "csp",
    "governance",
    "traces",
    "traces.analytics",
    "traces.annotations",
    "traces.audit",
    "traces.pricing",
    "qualification",
    "qualification.contextfiles",
    "specs",
    "artifacts",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "governance.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "governance.middleware.MultipartFileLimitMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "governance.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

ROOT_URLCONF = "governance.urls"
WSGI_APPLICATION = "governance.wsgi.application"
ASGI_APPLICATION = "governance.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "builtins": [
                "template_partials.templatetags.partials",
                "django.contrib.humanize.templatetags.humanize",
                "governance.templatetags.governance",
            ],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "governance.context_processors.workspace",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'db.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # WAL lets the in-process worker write while pages read.
    DATABASES["default"].setdefault("OPTIONS", {})["init_command"] = (
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=20000;"
    )
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"
SESSION_COOKIE_AGE = env_int("DJANGO_SESSION_COOKIE_AGE", 60 * 60 * 24 * 14)

LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "governance.staticfinders.PlotlyJsFinder",
]
WHITENOISE_USE_FINDERS = DEBUG
MEDIA_ROOT = Path(os.environ.get("GOVERNANCE_MEDIA_ROOT", VAR_DIR / "media"))

# Raw uploads and artifacts go through Django storage: a local folder by default,
# S3-compatible object storage when GOVERNANCE_STORAGE=s3.
_storage_backend = os.environ.get("GOVERNANCE_STORAGE", "local")
if _storage_backend == "s3":
    _default_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": os.environ.get("GOVERNANCE_S3_BUCKET", ""),
            "endpoint_url": os.environ.get("GOVERNANCE_S3_ENDPOINT_URL") or None,
            "default_acl": None,
            "file_overwrite": False,
        },
    }
elif _storage_backend == "local":
    _default_storage = {"BACKEND": "django.core.files.storage.FileSystemStorage"}
else:
    raise ImproperlyConfigured("GOVERNANCE_STORAGE must be 'local' or 's3'")
STORAGES = {
    "default": _default_storage,
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if env_bool("DJANGO_STATIC_MANIFEST", not DEBUG)
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# Upload limits. Large trace files are streamed to disk, never held in memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = None
GOVERNANCE_MAX_UPLOAD_BYTES = env_int("GOVERNANCE_MAX_UPLOAD_BYTES", 2 * 1024**3)
# Files in one multipart upload (Django's default is 100): a dragged projects folder holds
# many. Over it, MultipartFileLimitMiddleware answers with a message suggesting an archive.
DATA_UPLOAD_MAX_NUMBER_FILES = env_int("GOVERNANCE_MAX_UPLOAD_FILES", 2000)
# An ingest that adds at least this many calls refreshes PostgreSQL's table statistics.
GOVERNANCE_ANALYZE_AFTER_CALLS = env_int("GOVERNANCE_ANALYZE_AFTER_CALLS", 10_000)

# Background tasks: with no broker, tasks run in-process (eagerly) after commit.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "")
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
# Instruction-visibility text extracts after each ingest: with a broker a worker makes them;
# without one they would run inside the ingest (about a third slower), so they are left to
# the counting job, and a request extracts what it needs in memory.
GOVERNANCE_EXTRACT_AFTER_INGEST = env_bool(
    "GOVERNANCE_EXTRACT_AFTER_INGEST", bool(CELERY_BROKER_URL)
)
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_TASK_ROUTES = {
    "traces.compute_analytics": {"queue": "analysis"},
    "analytics.*": {"queue": "analysis"},
    "audit.*": {"queue": "analysis"},
    "traces.derive_pending_sweep": {"queue": "maintenance"},
    "qualification.load_trials": {"queue": "ingest"},
    "traces.*": {"queue": "ingest"},
    "qualification.*": {"queue": "analysis"},
    "contextfiles.*": {"queue": "analysis"},
    "artifacts.*": {"queue": "maintenance"},
    "governance.*": {"queue": "maintenance"},
}
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Redis cannot tell a running task from a lost one: it delivers a message again once it has
# gone unacknowledged for the visibility timeout. Tasks acknowledge late (when they end, so
# that a killed worker's task is not lost), so the timeout must exceed the longest task time
# limit (traces.ingest_uploads: 4 h), or a healthy long task would be handed to a second
# worker while it runs (a test checks every task's limit). The price: the broker gives back
# the message of a worker killed mid-task only after 5 h; the stale-job sweep below requeues
# its job within minutes.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 5 * 3600}

# A running job writes Job.heartbeat_at every GOVERNANCE_JOB_HEARTBEAT_SECONDS. The beat task
# governance.requeue_stale_jobs (every minute) requeues a job silent for longer than
# GOVERNANCE_JOB_STALE_SECONDS (its worker was killed), until it has started
# GOVERNANCE_JOB_MAX_ATTEMPTS times; then it fails it with the reason. Every 5 minutes,
# traces.derive_pending_sweep queues the derive step of sessions a killed worker left marked.
GOVERNANCE_JOB_HEARTBEAT_SECONDS = env_int("GOVERNANCE_JOB_HEARTBEAT_SECONDS", 15)
GOVERNANCE_JOB_STALE_SECONDS = env_int("GOVERNANCE_JOB_STALE_SECONDS", 120)
GOVERNANCE_JOB_MAX_ATTEMPTS = env_int("GOVERNANCE_JOB_MAX_ATTEMPTS", 3)
if GOVERNANCE_JOB_STALE_SECONDS < 2 * GOVERNANCE_JOB_HEARTBEAT_SECONDS:
    raise ImproperlyConfigured(
        "GOVERNANCE_JOB_STALE_SECONDS must be at least twice GOVERNANCE_JOB_HEARTBEAT_SECONDS, "
        "or a live job whose heartbeat is a little late would be run a second time"
    )
CELERY_BEAT_SCHEDULE = {
    "governance.requeue_stale_jobs": {
        "task": "governance.requeue_stale_jobs",
        "schedule": 60.0,
        # Sweeps missed while no worker consumed are not worth running late, one after another.
        "options": {"expires": 55},
    },
    "traces.derive_pending_sweep": {
        "task": "traces.derive_pending_sweep",
        "schedule": 300.0,
        "options": {"expires": 290},
    },
}

_cache_url = os.environ.get("CACHE_URL", "")
if _cache_url.startswith("redis"):
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _cache_url,
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.api.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["governance.api.permissions.WorkspaceRolePermission"],
    "DEFAULT_FILTER_BACKENDS": [
        "governance.api.filters.FilterBackend",
        "governance.api.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "governance.api.pagination.StandardPagination",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": [
        "rest_framework.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    "EXCEPTION_HANDLER": "governance.api.exceptions.exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Context Governance API",
    "DESCRIPTION": (
        "Ingest agent traces, measure what context cost, qualify models, approve operating "
        "limits, govern specifications and keep bulk output behind costed pointers. "
        "Authenticate with `Authorization: Bearer <token>`; a token belongs to one user in "
        "one workspace, and every object you can reach belongs to that workspace. With a "
        "browser session, pick the workspace with the `X-Workspace: <slug>` header."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": r"/api/v1",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "InstructionCategoryEnum": "qualification.contextfiles.models.CategoryChoices",
        "InstructionCategoryValueEnum": "qualification.contextfiles.api.serializers.CATEGORIES",
        "AuditStatusEnum": "traces.audit.models.AuditStatus",
        "HarnessEnum": "traces.models.Harness",
        "HookHarnessEnum": "traces.api.serializers.HOOK_HARNESSES",
    },
}

# Security. DEBUG off means production hardening; each switch can be turned off
# explicitly (for example behind a proxy that already redirects to HTTPS).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", not DEBUG)
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

# Content-Security-Policy (django-csp) on every response: scripts, styles, fonts and fetches
# come from this origin only, and no inline script runs. Plotly's and htmx's own <style>
# injections are turned off (see templates/includes/plotly_js.html and base.html), so no
# <style> element needs 'unsafe-inline' or a nonce either; app.js routes plotly's few
# setAttribute("style") calls through CSSOM. Chart exports draw through data: and blob:
# images. The one exception, style attributes on DRF's browsable API pages, is in
# governance.middleware. tests/governance/test_csp_browser.py walks every page under it.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF],
        "img-src": [SELF, "data:", "blob:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [SELF],
        "frame-ancestors": [NONE],
        "form-action": [SELF],
    }
}

# Every handler carries the secrets filter. Django's own handlers (DEFAULT_LOGGING's
# "console" for django.* under DEBUG, "django.server" for runserver) are replaced by
# naming those loggers here, and Celery workers keep this configuration instead of
# installing their own handlers (see governance/celery.py).
_LOG_LEVEL = os.environ.get("GOVERNANCE_LOG_LEVEL", "INFO")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"redact_secrets": {"()": "governance.logging.RedactSecretsFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "django.server": {
            "()": "django.utils.log.ServerFormatter",
            "format": "[{server_time}] {message}",
            "style": "{",
        },
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": "plain",
            "filters": ["redact_secrets"],
        },
        "django.server": {
            "class": "logging.StreamHandler",
            "formatter": "django.server",
            "filters": ["redact_secrets"],
        },
    },
    "root": {"handlers": ["console"], "level": _LOG_LEVEL},
    "loggers": {
        "django": {"handlers": ["console"], "level": _LOG_LEVEL, "propagate": False},
        "django.server": {"handlers": ["django.server"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "WARNING"},
        "celery": {"level": "INFO"},
    },
}
# Celery workers must not replace the root logger's handlers (and with them the filter).
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
