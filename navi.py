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
import threading
import time
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


class Tier:
    """One tier's pytest process; its output is printed line by line, each line marked with the tier."""

    _print_lock = threading.Lock()

    def __init__(self, name: str, extra_env: dict[str, str], args: list[str], markers: tuple[str, ...] = ()) -> None:
        env = {**os.environ, **extra_env, "NAVI_TEST_TIER": name, "NAVI_TEST_NETWORK_GUARD": "1"}
        say(f"== {name} tier started ==")
        # One -m expression: pytest keeps only the last -m given, so a tier's own marker filter is
        # joined to "not realmodel" here (a second -m once let the real-model tier run in scale-out).
        marks = "not realmodel" + "".join(f" and ({m})" for m in markers)
        self.name = name
        self.started = time.monotonic()
        self.process = subprocess.Popen([str(PY), "-m", "pytest", "-m", marks, *args], cwd=ROOT, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        errors="replace", bufsize=1)
        self.reader = threading.Thread(target=self._relay, daemon=True)
        self.reader.start()

    def _relay(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._print_lock:
                sys.stdout.write(f"[{self.name}] {line}")
                sys.stdout.flush()

    def wait(self) -> int:
        code = self.process.wait()
        self.reader.join()
        say(f"== {self.name} tier ended (exit {code}) after {time.monotonic() - self.started:.0f} s ==")
        if code == 5:
            say(f"{self.name} tier collected no tests — that is a failure, not a success.")
            return 1
        return code


def run_tests(args: list[str]) -> int:
    """Lint, then both tiers. The tiers run side by side (they share nothing: SQLite files and
    Chromium vs. PostgreSQL and Redis db 9, ports picked free): most of a tier's time is spent
    waiting for servers it starts, so two at once take little longer than one.
    NAVI_TEST_SERIAL=1 runs them one after the other."""
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
    serial = os.environ.get("NAVI_TEST_SERIAL") == "1"
    running: list[tuple[str, Tier]] = []

    def run(label: str, tier: Tier) -> None:
        if serial:
            if tier.wait() != 0:
                failures.append(label)
        else:
            running.append((label, tier))

    run("embedded tier", Tier("embedded", {}, args))
    pg = os.environ.get("NAVI_TEST_PG", "postgres://postgres@127.0.0.1:5432/test")
    redis = os.environ.get("NAVI_TEST_REDIS", "redis://127.0.0.1:6379/9")
    if reachable("127.0.0.1", 5432) and reachable("127.0.0.1", 6379):
        run("scale-out tier", Tier("scaleout", {"DATABASE_URL": pg, "REDIS_URL": redis}, args, ("not browser",)))
    elif os.environ.get("NAVI_REQUIRE_SCALEOUT") == "1":
        say("PostgreSQL (127.0.0.1:5432) or Redis (127.0.0.1:6379) is not reachable: the scale-out tier cannot run.")
        failures.append("scale-out tier (services down)")
    else:
        say("skipping the scale-out tier: PostgreSQL and Redis are not both reachable on 127.0.0.1.")
    for label, tier in running:
        if tier.wait() != 0:
            failures.append(label)
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
