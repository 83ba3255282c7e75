#!/usr/bin/env python3
"""Set up and run Navi with nothing but Python 3.11+ and git.

    python3.11 navi.py            run Navi (embedded mode) at http://127.0.0.1:8000
    python3.11 navi.py test       run the test suite (lint, embedded tier, scale-out tier)

The first run creates .venv/ and installs the pinned requirements; later runs
reuse it (reinstalling only when a requirements file changed). Arguments after
`run` go to `manage.py start` (e.g. --port 8080); after `test`, to pytest.
"""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def say(msg: str) -> None:
    print(f"navi: {msg}", flush=True)


def ensure_venv(requirements: str) -> None:
    if sys.version_info < (3, 11):  # noqa: UP036 - this script may be started by an older python3
        sys.exit(f"navi: Python 3.11 or newer is needed (this is {sys.version.split()[0]}).")
    if not PY.exists():
        say(f"creating the virtual environment in {VENV} …")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    req = ROOT / requirements
    digest = hashlib.sha256(b"".join((ROOT / f).read_bytes() for f in ("requirements.txt", requirements))).hexdigest()
    stamp = VENV / f".installed-{req.stem}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    say(f"installing {requirements} (first run takes a minute) …")
    subprocess.run([str(PY), "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", str(req)],
                   check=True, cwd=ROOT)
    stamp.write_text(digest)


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def pytest_tier(name: str, extra_env: dict[str, str], args: list[str], markers: tuple[str, ...] = ()) -> int:
    env = {**os.environ, **extra_env, "NAVI_TEST_TIER": name, "NAVI_TEST_NETWORK_GUARD": "1"}
    say(f"== {name} tier ==")
    # One -m expression: pytest keeps only the last -m given, so a tier's own marker filter is
    # joined to "not realmodel" here (a second -m once let the real-model tier run in scale-out).
    marks = "not realmodel" + "".join(f" and ({m})" for m in markers)
    code = subprocess.run([str(PY), "-m", "pytest", "-m", marks, *args], cwd=ROOT, env=env).returncode
    if code == 5:
        say(f"{name} tier collected no tests — that is a failure, not a success.")
        return 1
    return code


def run_tests(args: list[str]) -> int:
    ensure_venv("requirements-dev.txt")
    failures: list[str] = []
    say("== ruff check ==")
    if subprocess.run([str(PY), "-m", "ruff", "check", "."], cwd=ROOT).returncode != 0:
        failures.append("ruff")
    say("== mypy agent tools_app skills_app ==")
    if subprocess.run([str(PY), "-m", "mypy", "agent", "tools_app", "skills_app"], cwd=ROOT).returncode != 0:
        failures.append("mypy")
    base = {k: v for k, v in os.environ.items() if k in {"DATABASE_URL", "REDIS_URL"}}
    for key in base:
        os.environ.pop(key)
    if pytest_tier("embedded", {}, args) != 0:
        failures.append("embedded tier")
    pg = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
    redis = os.environ.get("NAVI_TEST_REDIS", "redis://127.0.0.1:6379/9")
    if reachable("127.0.0.1", 5432) and reachable("127.0.0.1", 6379):
        if pytest_tier("scaleout", {"DATABASE_URL": pg, "REDIS_URL": redis}, args, ("not browser",)) != 0:
            failures.append("scale-out tier")
    elif os.environ.get("NAVI_REQUIRE_SCALEOUT") == "1":
        say("PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379) is not reachable: the scale-out tier cannot run.")
        failures.append("scale-out tier (services down)")
    else:
        say("skipping the scale-out tier: PostgreSQL and Redis are not both reachable on 127.0.0.1.")
    if failures:
        say("FAILED: " + ", ".join(failures))
        return 1
    say("all green.")
    return 0


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv and not argv[0].startswith("-") else ("run", argv)
    if command == "test":
        return run_tests(rest)
    if command == "run":
        ensure_venv("requirements.txt")
        os.execv(str(PY), [str(PY), str(ROOT / "manage.py"), "start", *rest])
    sys.exit(f"navi: unknown command {command!r}: use `navi.py` (run) or `navi.py test`.")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
