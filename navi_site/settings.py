"""Django settings for Navi. Every documented variable comes from navi_site.config."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import dj_database_url

from navi_site import config as _config

BASE_DIR = _config.BASE_DIR
NAVI_DOTENV = BASE_DIR / ".env"  # read with the environment (which wins): config.load, config.env_value

try:
    _VALUES = _config.load()
except _config.ConfigError as _exc:  # stop start-up with the message, not a traceback
    sys.stderr.write(f"Navi configuration error: {_exc}\n")
    raise SystemExit(2) from None

# Every documented variable, under its own name (explicit so type checkers see them).
OLLAMA_HOST: str = _VALUES["OLLAMA_HOST"]
OLLAMA_DEFAULT_MODEL: str = _VALUES["OLLAMA_DEFAULT_MODEL"]
OLLAMA_NUM_CTX: int = _VALUES["OLLAMA_NUM_CTX"]
OLLAMA_THINK: bool = _VALUES["OLLAMA_THINK"]
OLLAMA_KEEP_ALIVE: str = _VALUES["OLLAMA_KEEP_ALIVE"]
OPENAI_BASE_URL: str = _VALUES["OPENAI_BASE_URL"]
OPENAI_API_KEY: str = _VALUES["OPENAI_API_KEY"]
LLM_STREAM_FIRST_CHUNK_TIMEOUT: float = _VALUES["LLM_STREAM_FIRST_CHUNK_TIMEOUT"]
LLM_STREAM_CHUNK_TIMEOUT: float = _VALUES["LLM_STREAM_CHUNK_TIMEOUT"]
LLM_LOCAL_MODEL_AIDS: bool = _VALUES["LLM_LOCAL_MODEL_AIDS"]
LLM_MAX_OUTPUT_TOKENS: int = _VALUES["LLM_MAX_OUTPUT_TOKENS"]
CONTEXT_COMPRESSION_ENABLED: bool = _VALUES["CONTEXT_COMPRESSION_ENABLED"]
CONTEXT_COMPRESSION_THRESHOLD: float = _VALUES["CONTEXT_COMPRESSION_THRESHOLD"]
CONTEXT_KEEP_RECENT: int = _VALUES["CONTEXT_KEEP_RECENT"]
CONTEXT_SUMMARY_TEMPERATURE: float = _VALUES["CONTEXT_SUMMARY_TEMPERATURE"]
FS_ALLOWED_PATHS: list[str] = _VALUES["FS_ALLOWED_PATHS"]
TERMINAL_ALLOWED_COMMANDS: list[str] = _VALUES["TERMINAL_ALLOWED_COMMANDS"]
HTTP_ALLOWED_PRIVATE_HOSTS: list[str] = _VALUES["HTTP_ALLOWED_PRIVATE_HOSTS"]
SSH_IDLE_SECONDS: float = _VALUES["SSH_IDLE_SECONDS"]
CODE_EXEC_MEMORY_MB: int = _VALUES["CODE_EXEC_MEMORY_MB"]
WEB_SEARCH_BACKEND: str = _VALUES["WEB_SEARCH_BACKEND"]
WEB_SEARCH_TIMEOUT: float = _VALUES["WEB_SEARCH_TIMEOUT"]
NAVI_PERSONA: str = _VALUES["NAVI_PERSONA"]
NAVI_PERSONA_FILE: str = _VALUES["NAVI_PERSONA_FILE"]
NAVI_DATA_DIR: str = _VALUES["NAVI_DATA_DIR"]
SESSION_FILES_MAX_SIZE_MB: int = _VALUES["SESSION_FILES_MAX_SIZE_MB"]
SESSION_FILES_TTL_HOURS: int = _VALUES["SESSION_FILES_TTL_HOURS"]
SESSION_IMPORT_MAX_MB: int = _VALUES["SESSION_IMPORT_MAX_MB"]
MEMORY_IDLE_MINUTES: int = _VALUES["MEMORY_IDLE_MINUTES"]
MEMORY_LLM_TIMEOUT: float = _VALUES["MEMORY_LLM_TIMEOUT"]
RECALL_MAX_CONCURRENT: int = _VALUES["RECALL_MAX_CONCURRENT"]
RECALL_MIN_INTERVAL_SECONDS: int = _VALUES["RECALL_MIN_INTERVAL_SECONDS"]
NAVI_SECURE_COOKIES: bool = _VALUES["NAVI_SECURE_COOKIES"]
NAVI_HOST: str = _VALUES["NAVI_HOST"]
NAVI_PORT: int = _VALUES["NAVI_PORT"]
WS_DELTA_COALESCE_MS: int = _VALUES["WS_DELTA_COALESCE_MS"]
WS_HEARTBEAT_SECONDS: float = _VALUES["WS_HEARTBEAT_SECONDS"]
WS_PING_SECONDS: float = _VALUES["WS_PING_SECONDS"]
WS_MAX_MESSAGE_MB: float = _VALUES["WS_MAX_MESSAGE_MB"]
SKILLS_PROMPT_MAX_TOKENS: int = _VALUES["SKILLS_PROMPT_MAX_TOKENS"]
SKILLS_PROPOSE_MIN_TOOL_CALLS: int = _VALUES["SKILLS_PROPOSE_MIN_TOOL_CALLS"]
SKILLS_UPLOAD_MAX_MB: float = _VALUES["SKILLS_UPLOAD_MAX_MB"]
LOG_LEVEL: str = _VALUES["LOG_LEVEL"]
LOG_FORMAT: str = _VALUES["LOG_FORMAT"]
for _name, _value in _VALUES.items():  # a variable added to config.py but not listed above still works
    globals().setdefault(_name, _value)

DATA_DIR = Path(_VALUES["NAVI_DATA_DIR"]).expanduser()
if not DATA_DIR.is_absolute():
    DATA_DIR = BASE_DIR / DATA_DIR
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _resolve(path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else BASE_DIR / p


# Tools shipped with Navi live in the source tree; tools the user or the agent writes live with the
# data, so that `git pull` never meets a file Navi wrote (DESIGN.md §1).
BUNDLED_TOOLS_DIR = BASE_DIR / "tools"
TOOLS_DIR = _resolve(_VALUES["TOOLS_DIR"]) if _VALUES["TOOLS_DIR"] else DATA_DIR / "tools"
# Skills live in the data directory by default, never in the source tree (bundled ones are in skills/).
SKILLS_DIR = _resolve(_VALUES["SKILLS_DIR"]) if _VALUES["SKILLS_DIR"] else DATA_DIR / "skills"
SKILLS_BUNDLED_DIR = BASE_DIR / "skills"
SESSION_FILES_DIR = _resolve(_VALUES["SESSION_FILES_DIR"])
SSH_HOSTS_FILE = _resolve(_VALUES["SSH_HOSTS_FILE"])
SSH_KNOWN_HOSTS = Path(_VALUES["SSH_KNOWN_HOSTS"]).expanduser()
MCP_SERVERS_FILE = _resolve(_VALUES["MCP_SERVERS_FILE"])
NAVI_BACKUP_DIR = str(_resolve(_VALUES["NAVI_BACKUP_DIR"])) if _VALUES["NAVI_BACKUP_DIR"] else ""
NAVI_BACKUP_KEEP: int = _VALUES["NAVI_BACKUP_KEEP"]


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
    "ninja",  # its templates and static files: /api/docs serves Swagger UI from here, not from a CDN
    "navi_site",
    "profiles_app",
    "local_models",
    "sessions_app",
    "memory_app",
    "recall_app",
    "tools_app",
    "skills_app",
    "notify_app",
    "telegram_app",
    "approvals_app",
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
    # Connections close after each request (Django's advice under ASGI), except in the HTTP
    # workers and asgiref's sync thread, which keep theirs (navi_site/db_connections.py); health
    # checks make such a kept connection that died (a PostgreSQL restart) reconnect quietly.
    DATABASES = {"default": dj_database_url.parse(_VALUES["DATABASE_URL"], conn_max_age=0, conn_health_checks=True)}
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
    # Keep each thread's connection: with the default (0) every ORM call from async code opened a
    # new one (file open, the PRAGMAs above), ~9 % of the server's CPU with 100 streaming sessions.
    DATABASES["default"]["CONN_MAX_AGE"] = None
DB_CONNECTION_KEEP_S = 60.0  # see navi_site/db_connections.py
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
            # Pub/sub: a group message is one PUBLISH, and each ASGI process reads every group it
            # serves from one subscribed connection. The list-based core layer cost ~4 sequential
            # round trips per message and consumer behind one receive lock per process: at 5 x 50
            # events/s it fell behind, and at scale its expiry/capacity silently dropped events
            # (stream_end, session_sync included). Pub/sub keeps nothing for a subscriber that is
            # (re)connecting; the consumer fills such gaps from the run's replay log
            # (sessions_app/consumers.py), and nothing else here needs queued delivery: the layer
            # carries only session-group events (no channel-name sends, no workers).
            # channels_redis' pub/sub layer with a pipelined group_send (sessions_app/layers.py).
            "BACKEND": "sessions_app.layers.NaviRedisPubSubChannelLayer",
            # socket_timeout bounds a PUBLISH (the subscriber reads with its own 0.1 s poll);
            # health checks find a half-open subscriber connection within a minute.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 10, "socket_connect_timeout": 5,
                                  "health_check_interval": 30}]},
        }
    }
    CELERY_BROKER_URL = REDIS_URL
else:
    CHANNEL_LAYERS = {  # Channels' in-memory layer with an O(members) group_send (sessions_app/layers.py)
        "default": {"BACKEND": "sessions_app.layers.NaviInMemoryChannelLayer", "CONFIG": {"capacity": 1500}}
    }
    CELERY_BROKER_URL = "memory://"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = False
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"
CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {"visibility_timeout": 3600}
if not REDIS_URL:
    # kombu's memory transport polls its queues once a second: a task sent now (an immediate
    # recall, one handed a freed run slot, a title) waited up to 1 s (bench/recall_lateness.py).
    CELERY_BROKER_TRANSPORT_OPTIONS["polling_interval"] = 0.05

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
