"""`python manage.py doctor`: check this installation, print each finding with its fix, exit 1 on errors."""
from __future__ import annotations

import json as jsonlib
import sys
import time

from django.core.management.base import BaseCommand

from navi_site import doctor

MARK = {"ok": "ok     ", "warning": "WARNING", "error": "ERROR  "}


class Command(BaseCommand):
    help = ("Check the configuration, database and migrations, broker and channel layer, model servers and "
            "each profile's model, SSH hosts, MCP servers, the tools directory, disk space and HTTPS settings. "
            "Exits 1 when something is an error.")

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("--json", action="store_true", help="Print the findings as JSON")

    def handle(self, *args, json: bool = False, **opts) -> None:  # type: ignore[no-untyped-def]
        started = time.monotonic()
        findings = doctor.run_checks()
        status = doctor.worst(findings)
        if json:
            self._print_json(findings, status)
        else:
            for f in findings:
                line = f"{MARK[f.status]} {f.check}: {f.message}"
                self.stdout.write(line if f.status == "ok" else
                                  (self.style.ERROR if f.status == "error" else self.style.WARNING)(line))
                if f.fix and f.status != "ok":
                    self.stdout.write(f"        fix: {f.fix}")
            errors = sum(f.status == "error" for f in findings)
            warnings = sum(f.status == "warning" for f in findings)
            self.stdout.write(f"\n{errors} error(s), {warnings} warning(s) in {time.monotonic() - started:.1f} s.")
        sys.stdout.flush()
        if status == "error":
            sys.exit(1)

    def _print_json(self, findings: list[doctor.Finding], status: str) -> None:
        self.stdout.write(jsonlib.dumps({"status": status, "findings": [
            {"check": f.check, "status": f.status, "message": f.message, "fix": f.fix} for f in findings]}, indent=2))
