"""Navi's configuration: the documented variables, read from the environment and `.env`.

Pure Python (no Django): settings.py calls ``load()`` and copies the values into
Django settings under the same names. An invalid value raises ``ConfigError``
naming the variable and what is wrong, and start-up stops with that message.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

BASE_DIR = Path(__file__).resolve().parent.parent


class ConfigError(Exception):
    """A configuration variable has a value Navi cannot use."""


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ConfigError(f"{name}={raw!r} is not a boolean: use true or false.")


def _int(minimum: int | None = None) -> Callable[[str, str], int]:
    def parse(name: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a whole number (for example {name}=60).") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{name}={value} is too small: it must be at least {minimum}.")
        return value

    return parse


def _float(minimum: float, maximum: float | None = None) -> Callable[[str, str], float]:
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw.strip())
        except ValueError:
            raise ConfigError(f"{name}={raw!r} is not a number (for example {name}=0.8).") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = f" and at most {maximum}" if maximum is not None else ""
            raise ConfigError(f"{name}={value} is out of range: it must be at least {minimum}{upper}.")
        return value

    return parse


def _str(name: str, raw: str) -> str:
    return raw.strip()


def _list(name: str, raw: str) -> list[str]:
    return [item.strip() for item in raw.split(",") if item.strip()]


def _url(*schemes: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = raw.strip()
        parsed = urlparse(value)
        if parsed.scheme not in schemes or not parsed.netloc:
            raise ConfigError(
                f"{name}={raw!r} is not a valid URL: expected {' or '.join(schemes)}://host[:port]."
            )
        return value.rstrip("/")

    return parse


def _optional_url(name: str, raw: str) -> str:
    return _url("http", "https")(name, raw) if raw.strip() else ""


def _level(name: str, raw: str) -> str:
    value = raw.strip().upper()
    if value not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ConfigError(f"{name}={raw!r} is not a log level: use DEBUG, INFO, WARNING or ERROR.")
    return value


def _choice(*options: str) -> Callable[[str, str], str]:
    def parse(name: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in options:
            raise ConfigError(f"{name}={raw!r} is not one of: {', '.join(options)}.")
        return value

    return parse


SAFE_TERMINAL_COMMANDS = (
    "ls,cat,head,tail,wc,grep,find,df,du,free,uptime,date,whoami,uname,ps,pwd,echo,sort,uniq,"
    "stat,file,git,hostname,id,env,which,diff,md5sum,sha256sum"
)


@dataclass(frozen=True, slots=True)
class Var:
    name: str
    default: str
    parse: Callable[[str, str], Any]
    help: str


VARIABLES: tuple[Var, ...] = (
    # LLM
    Var("OLLAMA_HOST", "http://localhost:11434", _url("http", "https"), "Ollama server URL"),
    Var("OLLAMA_DEFAULT_MODEL", "gemma4:31b-cloud", _str, "Default model (a profile may override it)"),
    Var("OLLAMA_NUM_CTX", "65536", _int(512), "Context window size in tokens"),
    Var("OLLAMA_THINK", "true", _bool, "Ask the model for extended reasoning when it supports it"),
    Var("OLLAMA_KEEP_ALIVE", "5m", _str, "How long Ollama keeps the model loaded after a request"),
    Var("OPENAI_BASE_URL", "http://localhost:8080/v1", _url("http", "https"),
        "Base URL of an OpenAI-compatible server (profiles with llm_backend=openai)"),
    Var("OPENAI_API_KEY", "", _str, "API key for the OpenAI-compatible server (empty: none sent)"),
    Var("LLM_STREAM_FIRST_CHUNK_TIMEOUT", "120", _float(0.1), "Max seconds to wait for the first token"),
    Var("LLM_STREAM_CHUNK_TIMEOUT", "60", _float(0.1), "Max seconds between tokens after the first"),
    Var("LLM_MAX_OUTPUT_TOKENS", "0", _int(0),
        "Cap on tokens generated per model call (Ollama num_predict / OpenAI max_tokens); 0 = no cap"),
    Var("NAVI_REAL_MODEL_DIR", "~/.cache/navi/real-model", _str,
        "Where `manage.py real_model` keeps the small local model, its server venv and logs"),
    Var("LLM_LOCAL_MODEL_AIDS", "true", _bool,
        "Default for the per-profile local-model aids (tool calls written as JSON text, repair, repeat guard)"),
    # Context compression
    Var("CONTEXT_COMPRESSION_ENABLED", "true", _bool, "Compress old turns when the context fills up"),
    Var("CONTEXT_COMPRESSION_THRESHOLD", "0.80", _float(0.05, 1.0), "Compress at this fraction of OLLAMA_NUM_CTX"),
    Var("CONTEXT_KEEP_RECENT", "10", _int(1), "Turns kept verbatim when compressing"),
    Var("CONTEXT_SUMMARY_TEMPERATURE", "0.3", _float(0.0, 2.0), "Temperature of the summary call"),
    # Security / sandboxing
    Var("FS_ALLOWED_PATHS", "", _list,
        "Comma-separated directories the filesystem tool may use besides the session's own directory; * = no limit"),
    Var("TERMINAL_ALLOWED_COMMANDS", SAFE_TERMINAL_COMMANDS, _list,
        "Comma-separated executables the terminal tool may run; * = any"),
    Var("HTTP_ALLOWED_PRIVATE_HOSTS", "", _list,
        "Private/LAN hosts or CIDRs http_request/web_view may reach (e.g. homeassistant.local,192.168.1.20)"),
    Var("SSH_HOSTS_FILE", "ssh_hosts.json", _str, "Named SSH connections (JSON)"),
    Var("SSH_IDLE_SECONDS", "300", _float(0.1), "Pooled SSH connections idle this long are closed"),
    Var("CODE_EXEC_MEMORY_MB", "512", _int(64), "Address-space limit for code_exec programs (MB)"),
    Var("WEB_SEARCH_BACKEND", "ddgs", _str,
        "Search backend: ddgs, or a dotted path to a callable (query, max_results) -> list of dicts"),
    Var("WEB_SEARCH_TIMEOUT", "20", _float(1), "Seconds before a web search gives up"),
    Var("SSH_KNOWN_HOSTS", "~/.ssh/known_hosts", _str, "known_hosts file used to verify SSH host keys"),
    Var("MCP_SERVERS_FILE", "mcp_servers.json", _str, "MCP servers (stdio or streamable HTTP), JSON"),
    # Persona
    Var("NAVI_PERSONA", "", _str, "Inline global personality prompt"),
    Var("NAVI_PERSONA_FILE", "", _str, "Path to a .txt file with the persona (wins over NAVI_PERSONA)"),
    # Storage and files
    Var("DATABASE_URL", "", _str, "Database URL: sqlite:///path/navi.db (default: data/navi.db) or postgres://..."),
    Var("REDIS_URL", "", _str, "Redis URL; set together with a PostgreSQL DATABASE_URL for scale-out mode"),
    Var("NAVI_DATA_DIR", "data", _str, "Where the SQLite database and other state live"),
    Var("TOOLS_DIR", "", _str,
        "Your own tools and the ones Navi writes (write_tool); empty: NAVI_DATA_DIR/tools. "
        "The bundled tools stay in tools/ of the source tree"),
    Var("SKILLS_DIR", "", _str, "The user's skills (SKILL.md folders) and their versions; empty = <NAVI_DATA_DIR>/skills"),
    Var("SKILLS_PROMPT_MAX_TOKENS", "1500", _int(100),
        "Most tokens (estimated) the enabled skills' names and descriptions may add to the system prompt"),
    Var("SKILLS_PROPOSE_MIN_TOOL_CALLS", "3", _int(1),
        "Successful tool calls a turn needs before the agent may propose a skill from it (skill_write)"),
    Var("SKILLS_UPLOAD_MAX_MB", "5", _float(0.01, 100), "Largest skill archive (.zip/.skill) that may be uploaded (MB)"),
    Var("NAVI_BACKUP_DIR", "", _str, "Where the daily backups go; empty = <NAVI_DATA_DIR>/backups"),
    Var("NAVI_BACKUP_KEEP", "7", _int(0), "Daily backups kept (older ones are deleted); 0 = no daily backup"),
    Var("SESSION_FILES_DIR", "session_files", _str, "Uploaded files and per-session working directories"),
    Var("SESSION_FILES_MAX_SIZE_MB", "200", _int(1), "Max upload size per file (MB)"),
    Var("SESSION_FILES_TTL_HOURS", "24", _int(1), "Uploaded file retention (hours)"),
    Var("SESSION_IMPORT_MAX_MB", "20", _int(1), "Largest Navi JSON export that POST /sessions/import accepts (MB)"),
    # Memory and recalls
    Var("MEMORY_IDLE_MINUTES", "30", _int(0), "Sessions idle this long are mined for memory facts"),
    Var("MEMORY_LLM_TIMEOUT", "180", _float(1), "Seconds a memory extraction or summary call may take"),
    Var("RECALL_MAX_CONCURRENT", "3", _int(1), "Headless recall runs at once"),
    Var("RECALL_MIN_INTERVAL_SECONDS", "60", _int(1), "Smallest interval of a recurring recall"),
    Var("RECALL_DEFER_SECONDS", "60", _int(1), "How long a recall waits when its session is busy"),
    Var("RECALL_CLAIM_LEASE_SECONDS", "120", _int(2),
        "Lease of a firing recall; renewed while the run lives, an expired lease marks the run interrupted"),
    Var("RECALL_SWEEP_SECONDS", "5", _int(1),
        "How often the beat sweep looks for overdue recalls and dead workers' claims"),
    Var("RECALL_SWEEP_GRACE_SECONDS", "2", _float(0), "The beat sweep fires recalls overdue by more than this"),
    Var("RECALL_MAX_SECONDS", "900", _int(10),
        "Seconds of work a recall run may take unless the recall sets its own max_seconds (approval waits not counted)"),
    Var("RECALL_ETA_HORIZON_SECONDS", "3000", _int(60),
        "Recalls due within this get a Celery ETA task; later ones are fired by the sweep"),
    # Notifications (e-mail settings are Django's own)
    Var("NAVI_PUBLIC_URL", "", _optional_url, "Navi's address as users reach it (links in e-mails, Telegram and "
        "push); empty: http://NAVI_HOST:NAVI_PORT"),
    Var("NOTIFY_LONG_TURN_SECONDS", "60", _float(1), "A turn longer than this that ends while no tab shows it "
        "notifies its user"),
    Var("NOTIFY_RETRY_BASE_SECONDS", "30", _float(0.01), "First retry of a failed delivery (SMTP down, ...) after "
        "this; doubled after every failure"),
    Var("NOTIFY_RETRY_MAX_SECONDS", "3600", _float(0.01), "Longest wait between two attempts of a delivery"),
    Var("NOTIFY_MAX_ATTEMPTS", "6", _int(1), "Attempts of a delivery before it is given up"),
    Var("WEBPUSH_CONTACT", "", _str, "Contact the push services see in VAPID (mailto:you@example.org or an https "
        "URL); empty: mailto:DEFAULT_FROM_EMAIL"),
    Var("WEBPUSH_ALLOW_PRIVATE_ENDPOINTS", "false", _bool, "Accept push endpoints on loopback/LAN addresses and "
        "plain http (development and tests only)"),
    Var("TELEGRAM_BOT_TOKEN", "", _str, "Token of your Telegram bot (from @BotFather); empty: no Telegram"),
    Var("TELEGRAM_API_URL", "https://api.telegram.org", _url("http", "https"),
        "Bot API server (a self-hosted telegram-bot-api server, or a local stand-in in tests)"),
    Var("TELEGRAM_EDIT_INTERVAL_SECONDS", "1.5", _float(0.05), "Fastest pace of the edits that stream a reply "
        "(Telegram limits edits; a 429 answer's retry_after is always respected)"),
    Var("TELEGRAM_POLL_TIMEOUT", "30", _int(0), "Long-polling timeout of getUpdates (seconds)"),
    Var("EMAIL_HOST", "", _str, "SMTP server for e-mail notifications (empty: no e-mail)"),
    Var("EMAIL_PORT", "25", _int(1), "SMTP port (587 with EMAIL_USE_TLS, 465 with EMAIL_USE_SSL)"),
    Var("EMAIL_HOST_USER", "", _str, "SMTP user name (empty: no login)"),
    Var("EMAIL_HOST_PASSWORD", "", _str, "SMTP password"),
    Var("EMAIL_USE_TLS", "false", _bool, "STARTTLS after connecting"),
    Var("EMAIL_USE_SSL", "false", _bool, "Implicit TLS from the start"),
    Var("EMAIL_TIMEOUT", "20", _float(0.1), "Seconds an SMTP connection or command may take"),
    Var("DEFAULT_FROM_EMAIL", "navi@localhost", _str, "Sender address of Navi's e-mails"),
    # Approvals and the audit log
    Var("APPROVAL_TIMEOUT_SECONDS", "600", _int(10),
        "How long a tool call waits for your approval in a live turn; then it counts as denied"),
    Var("RECALL_APPROVAL_WAIT_SECONDS", "1800", _int(10),
        "How long a parked recall run waits for your approval (recalls with on_approval=park)"),
    Var("AUDIT_RETENTION_DAYS", "90", _int(1), "Audit log entries and decided approvals older than this are purged"),
    # Server
    Var("SECRET_KEY", "", _str, "Django secret key (generated into data/secret_key when empty)"),
    Var("DEBUG", "false", _bool, "Django debug mode (never in production)"),
    Var("ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]", _list, "Host names Navi answers to"),
    Var("CSRF_TRUSTED_ORIGINS", "", _list, "Extra origins allowed for forms and WebSockets (https://navi.example)"),
    Var("NAVI_SECURE_COOKIES", "false", _bool, "Send cookies only over HTTPS (set behind a TLS proxy)"),
    Var("NAVI_HOST", "127.0.0.1", _str, "Address the embedded server listens on"),
    Var("NAVI_PORT", "8000", _int(1), "Port the embedded server listens on"),
    Var("WS_DELTA_COALESCE_MS", "30", _int(0), "Merge text deltas within this window (ms); 0 = off"),
    Var("WS_HEARTBEAT_SECONDS", "20", _float(0.05), "Send a heartbeat after this many seconds of silence on a WebSocket"),
    Var("WS_PING_SECONDS", "60", _float(1.0), "Protocol ping to each WebSocket client this often (seconds); a client "
        "that does not answer within 30 s more is disconnected. The heartbeat already keeps proxies awake"),
    Var("WS_MAX_MESSAGE_MB", "4", _float(0.01, 30), "Largest WebSocket frame a client may send (MB); bigger ones get an error"),
    Var("LOG_LEVEL", "INFO", _level, "DEBUG / INFO / WARNING / ERROR"),
    Var("LOG_FORMAT", "console", _choice("console", "json"), "console (development) or json"),
)


def read_dotenv(path: Path) -> dict[str, str]:
    """The variables of a .env file (values there never override the environment)."""
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def env_value(name: str, dotenv_path: Path | None = None) -> str | None:
    """A variable the way settings are read: the environment, else ``.env`` (e.g. the SSH password
    an ``ssh_hosts.json`` entry names in ``password_env``). None when neither has it."""
    value = os.environ.get(name)
    if value is not None:
        return value
    return read_dotenv(dotenv_path or BASE_DIR / ".env").get(name)


def load(environ: Mapping[str, str] | None = None, dotenv_path: Path | None = None) -> dict[str, Any]:
    """Parse every variable; raise ConfigError on the first invalid one."""
    env = dict(read_dotenv(dotenv_path or BASE_DIR / ".env"))
    env.update(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    for var in VARIABLES:
        raw = env.get(var.name)
        values[var.name] = var.parse(var.name, var.default if raw is None else raw)
    _check_persona_file(values)
    _check_database_url(values)
    if values["EMAIL_USE_TLS"] and values["EMAIL_USE_SSL"]:
        raise ConfigError("EMAIL_USE_TLS and EMAIL_USE_SSL are both true: choose one (TLS for port 587, "
                          "SSL for port 465).")
    return values


def _check_persona_file(values: dict[str, Any]) -> None:
    path = values["NAVI_PERSONA_FILE"]
    if not path:
        return
    file = Path(path).expanduser()
    try:
        values["NAVI_PERSONA"] = file.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(
            f"NAVI_PERSONA_FILE={path!r} cannot be read ({exc.strerror or exc}): "
            "point it at a readable UTF-8 text file or unset it."
        ) from None
    except UnicodeDecodeError:
        raise ConfigError(f"NAVI_PERSONA_FILE={path!r} is not UTF-8 text.") from None


def _check_database_url(values: dict[str, Any]) -> None:
    url = values["DATABASE_URL"]
    if not url:
        return
    scheme = urlparse(url).scheme
    if scheme not in {"sqlite", "postgres", "postgresql", "pgsql"}:
        raise ConfigError(
            f"DATABASE_URL scheme {scheme!r} is not supported: use sqlite:///path/to/navi.db "
            "or postgres://user@host:5432/dbname."
        )


_SECTIONS = {
    "OLLAMA_HOST": "LLM", "CONTEXT_COMPRESSION_ENABLED": "Context compression",
    "FS_ALLOWED_PATHS": "Security / sandboxing", "NAVI_PERSONA": "Persona", "DATABASE_URL": "Storage and files",
    "MEMORY_IDLE_MINUTES": "Memory and recalls", "APPROVAL_TIMEOUT_SECONDS": "Approvals and audit",
    "NAVI_PUBLIC_URL": "Notifications", "SECRET_KEY": "Server", "LOG_LEVEL": "Logging",
}


def render_env_example() -> str:
    """The text of .env.example (regenerate with `python -m navi_site.config > .env.example`)."""
    lines = ["# Navi configuration. Copy to .env and edit; the environment wins over this file.",
             "# Every variable is optional; the value shown is the default."]
    for var in VARIABLES:
        if var.name in _SECTIONS:
            lines += ["", f"# --- {_SECTIONS[var.name]} ---"]
        lines += [f"# {var.help}", f"{var.name}={var.default}"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_env_example(), end="")
