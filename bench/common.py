"""Shared set-up for benchmarks: a throw-away data directory and Django."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup_django(**env: str) -> Path:
    """Point Navi at a fresh data directory (unless DATABASE_URL is given), migrate, return the directory."""
    data = Path(tempfile.mkdtemp(prefix="navi-bench-"))
    os.environ.setdefault("NAVI_DATA_DIR", str(data))
    os.environ.setdefault("SESSION_FILES_DIR", str(data / "session_files"))
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "navi_site.settings"
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)
    return data


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": statistics.median(values),
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "mean": statistics.fmean(values),
    }
