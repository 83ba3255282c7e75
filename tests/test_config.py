"""Configuration: documented names and defaults; invalid values stop start-up with a clear message."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from navi_site import config
from navi_site.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def load(**env: str) -> dict:
    return config.load(environ=env, dotenv_path=Path("/nonexistent"))


def test_documented_defaults() -> None:
    values = load()
    assert values["OLLAMA_HOST"] == "http://localhost:11434"
    assert values["OLLAMA_NUM_CTX"] == 65536
    assert values["OLLAMA_THINK"] is True
    assert values["CONTEXT_COMPRESSION_THRESHOLD"] == 0.80
    assert values["CONTEXT_KEEP_RECENT"] == 10
    assert values["LLM_STREAM_FIRST_CHUNK_TIMEOUT"] == 120
    assert values["LLM_STREAM_CHUNK_TIMEOUT"] == 60
    assert values["SESSION_FILES_MAX_SIZE_MB"] == 200
    assert values["SESSION_FILES_TTL_HOURS"] == 24
    # DESIGN.md §8: the unsafe documented default "*" is replaced by safe lists.
    assert values["FS_ALLOWED_PATHS"] == []
    assert "*" not in values["TERMINAL_ALLOWED_COMMANDS"] and "ls" in values["TERMINAL_ALLOWED_COMMANDS"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"OLLAMA_NUM_CTX": "abc"}, "OLLAMA_NUM_CTX='abc' is not a whole number"),
        ({"OLLAMA_NUM_CTX": "10"}, "OLLAMA_NUM_CTX=10 is too small"),
        ({"OLLAMA_THINK": "maybe"}, "OLLAMA_THINK='maybe' is not a boolean"),
        ({"OLLAMA_HOST": "localhost:11434"}, "OLLAMA_HOST='localhost:11434' is not a valid URL"),
        ({"CONTEXT_COMPRESSION_THRESHOLD": "1.5"}, "CONTEXT_COMPRESSION_THRESHOLD=1.5 is out of range"),
        ({"LLM_STREAM_CHUNK_TIMEOUT": "soon"}, "LLM_STREAM_CHUNK_TIMEOUT='soon' is not a number"),
        ({"LOG_LEVEL": "LOUD"}, "LOG_LEVEL='LOUD' is not a log level"),
        ({"DATABASE_URL": "mysql://root@localhost/navi"}, "DATABASE_URL scheme 'mysql' is not supported"),
        ({"NAVI_PERSONA_FILE": "/nonexistent/persona.txt"}, "NAVI_PERSONA_FILE='/nonexistent/persona.txt' cannot be read"),
    ],
)
def test_invalid_values_name_the_variable(env: dict[str, str], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(**env)
    assert expected in str(err.value)


def test_persona_file_is_read(tmp_path: Path) -> None:
    persona = tmp_path / "persona.txt"
    persona.write_text("You are Navi.\nKind and brief.\n")
    assert load(NAVI_PERSONA_FILE=str(persona))["NAVI_PERSONA"] == "You are Navi.\nKind and brief."


def test_dotenv_is_read_and_environment_wins(tmp_path: Path) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("OLLAMA_NUM_CTX=4096\nOLLAMA_DEFAULT_MODEL=qwen3:4b\n")
    values = config.load(environ={"OLLAMA_DEFAULT_MODEL": "llama3.2"}, dotenv_path=dotenv)
    assert values["OLLAMA_NUM_CTX"] == 4096
    assert values["OLLAMA_DEFAULT_MODEL"] == "llama3.2"


def test_env_example_lists_every_variable() -> None:
    text = (ROOT / ".env.example").read_text()
    missing = [v.name for v in config.VARIABLES if f"\n{v.name}=" not in text]
    assert missing == []
    assert text == config.render_env_example(), "regenerate: python -m navi_site.config > .env.example"


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    full.update(env)
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=60)


def test_start_up_stops_on_invalid_value(tmp_path: Path) -> None:
    out = _manage("check", OLLAMA_NUM_CTX="abc", NAVI_DATA_DIR=str(tmp_path))
    assert out.returncode == 2
    assert "Navi configuration error: OLLAMA_NUM_CTX='abc' is not a whole number" in out.stderr
    assert "Traceback" not in out.stderr


def test_start_up_stops_on_unknown_database_scheme(tmp_path: Path) -> None:
    out = _manage("check", DATABASE_URL="oracle://x@y/z", NAVI_DATA_DIR=str(tmp_path))
    assert out.returncode == 2
    assert "DATABASE_URL scheme 'oracle' is not supported" in out.stderr


def test_check_deploy_is_clean_under_production_settings(tmp_path: Path) -> None:
    out = _manage(
        "check", "--deploy", "--fail-level", "WARNING",
        DEBUG="false", NAVI_SECURE_COOKIES="true", NAVI_DATA_DIR=str(tmp_path),
        SECRET_KEY="prod-" + "k9Xq2vLr8Tz4Wm6Yp1Hs3Jd5Nf7Bg0Ac" * 2, ALLOWED_HOSTS="navi.example.org",
    )
    assert out.returncode == 0, out.stderr + out.stdout
    assert "System check identified no issues" in out.stdout
