"""Django settings for Navi. Every documented variable comes from navi_site.config."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import dj_database_url

from navi_site import config as _config

BASE_DIR = _config.BASE_DIR

try:
    _VALUES = _config.load()
except _config.ConfigError as _exc:  # stop start-up with the message, not a traceback
    sys.stderr.write(f"Navi configuration error: {_exc}\n")
    raise SystemExit(2) from None

globals().update(_VALUES)

DATA_DIR = Path(_VALUES["NAVI_DATA_DIR"]).expanduser()
if not DATA_DIR.is_absolute():
    DATA_DIR = BASE_DIR / DATA_DIR
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _resolve(path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else BASE_DIR / p


TOOLS_DIR = _resolve(_VALUES["TOOLS_DIR"])
SESSION_FILES_DIR = _resolve(_VALUES["SESSION_FILES_DIR"])
SSH_HOSTS_FILE = _resolve(_VALUES["SSH_HOSTS_FILE"])
SSH_KNOWN_HOSTS = Path(_VALUES["SSH_KNOWN_HOSTS"]).expanduser()
MCP_SERVERS_FILE = _resolve(_VALUES["MCP_SERVERS_FILE"])


def _secret_key() -> str:
    if _VALUES["SECRET_KEY"]:
        return str(_VALUES["SECRET_KEY"])
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = _VALUES["DEBUG"]
ALLOWED_HOSTS = _VALUES["ALLOWED_HOSTS"]
CSRF_TRUSTED_ORIGINS = _VALUES["CSRF_TRUSTED_ORIGINS"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_celery_beat",
    "navi_site",
    "agent",
    "sessions_app",
    "memory_app",
    "recall_app",
    "tools_app",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "navi_site.middleware.RequestIdMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "navi_site.urls"
ASGI_APPLICATION = "navi_site.asgi.application"

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

# --- database ---------------------------------------------------------------
if _VALUES["DATABASE_URL"]:
    DATABASES = {"default": dj_database_url.parse(_VALUES["DATABASE_URL"], conn_max_age=0)}
else:
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": str(DATA_DIR / "navi.db")}}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL + busy timeout + BEGIN IMMEDIATE: concurrent writers wait instead of
    # failing with "database is locked" (DESIGN.md §2).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
# Test databases are per process, so concurrent test runs never share one.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"].setdefault("TEST", {})["NAME"] = f"/tmp/navi-test-{os.getpid()}.db"
else:
    DATABASES["default"].setdefault("TEST", {})["NAME"] = f"test_navi_{os.getpid()}"
DATABASE_VENDOR = "postgresql" if "postgresql" in DATABASES["default"]["ENGINE"] else "sqlite"

# --- runtime mode: embedded (default) or scale-out (REDIS_URL set) ----------
REDIS_URL = _VALUES["REDIS_URL"]
NAVI_MODE = "scale-out" if REDIS_URL else "embedded"
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1500, "expiry": 30},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1500}}}
    CELERY_BROKER_URL = "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}

# --- auth ---------------------------------------------------------------------
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 8}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "/login/"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/login/"

SESSION_COOKIE_SECURE = _VALUES["NAVI_SECURE_COOKIES"]
CSRF_COOKIE_SECURE = _VALUES["NAVI_SECURE_COOKIES"]
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
if _VALUES["NAVI_SECURE_COOKIES"]:
    SECURE_SSL_REDIRECT = os.environ.get("NAVI_SSL_REDIRECT", "true").lower() == "true"
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_HSTS_SECONDS = 31536000
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024  # larger uploads stream to a temp file

# --- logging --------------------------------------------------------------------
from navi_site.logging import configure as _configure_logging  # noqa: E402

LOGGING_CONFIG = None
_configure_logging(level=_VALUES["LOG_LEVEL"], fmt=_VALUES["LOG_FORMAT"])
