"""Competence of Navi with a real small model (issues 11 and 24).

    python manage.py real_model start            # the model server (after `real_model setup`)
    .venv/bin/python bench/real_model.py --suite broad --half dev [--modes constrained,native,bare]
    .venv/bin/python bench/real_model.py [--runs 3] [--tasks what_time,read_file] [--modes on,off]
                                         [--budget-minutes 50] [--json FILE]

``--suite broad`` runs the broad everyday suite of ``tests/realmodel/broad.py`` (624 tasks: 12
intents × 52 phrasings, fixed halves: ``--half dev|test|fresh|fresh2|...|fresh24|both|all``, both = dev and test); ``--suite ten`` (the
default) the ten tasks of ``tests/realmodel/scenarios.py``. Modes: ``constrained`` (decisions
under a schema, aids on: the shipped local_small), ``native`` (the model's own tool calls, aids
on), ``bare`` (native, aids off), ``-<aid>`` (constrained with that one aid off, e.g. ``-doubts``: its
uplift); ``on``/``off`` are the aids with the profile's tool calling
unchanged (constrained since issue 24).

Starts a live Navi (``manage.py start`` in a subprocess, its own data directory) whose
``local_small`` profile talks to the model server at $NAVI_REAL_MODEL_URL (default
http://127.0.0.1:8089/v1), then runs every everyday task of ``tests/realmodel/scenarios.py``
``--runs`` times with the profile's local-model aids on and off. Prints one line per run
(with the tool calls and the answer, the evidence for what the aids buy) and a Markdown
table: success rate and median seconds per task and mode. ``--json FILE`` keeps every run.
``--budget-minutes`` stops starting tasks once the time is used up (a task always runs in
every mode, so the table stays a paired comparison).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.realmodel import broad  # noqa: E402
from tests.realmodel.scenarios import (  # noqa: E402
    MODES,
    TASKS,
    Env,
    default_model_url,
    model_aliases,
    set_mode,
    start_navi_for_model,
)


def _runners(args: argparse.Namespace) -> dict[str, Any]:
    """Task name → coroutine function of an Env, for the chosen suite."""
    if args.suite == "broad":
        chosen = broad.tasks(args.half)
        return {t.name: (lambda env, t=t: t.run(env, t.text)) for t in chosen}
    return dict(TASKS)


async def bench(args: argparse.Namespace) -> list[dict[str, Any]]:
    url = args.url.rstrip("/")
    aliases = model_aliases(url)
    if not aliases:
        sys.exit(f"no model server answers at {url}/models: run `python manage.py real_model start` first")
    alias = aliases[0]
    runners = _runners(args)
    tasks = args.tasks.split(",") if args.tasks else list(runners)
    modes = [m.strip() for m in args.modes.split(",")]
    unknown = [m for m in modes if m not in MODES and not (m.startswith("-") and len(m) > 1)]
    if unknown:
        sys.exit(f"unknown mode(s) {', '.join(unknown)}: use {', '.join(MODES)} or -<aid> (one aid off)")
    navi = start_navi_for_model(Path(tempfile.mkdtemp(prefix="navi-bench-realmodel-")), url, alias)
    results = RESULTS
    counter = 0
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(f"model {alias} at {url}; Navi at {navi.url}; {len(tasks)} tasks x {args.runs} runs x modes {modes}",
              flush=True)
        # Run-major (every task in both modes, then the next round): an interrupted benchmark still
        # compares the modes on the same tasks under the same machine load.
        aids: str | None = None
        began_all = time.monotonic()
        for run in range(args.runs):
            for task in tasks:
                if args.budget_minutes and time.monotonic() - began_all > args.budget_minutes * 60:
                    print(f"time budget of {args.budget_minutes:g} min used up: no further runs started", flush=True)
                    return results
                for mode in modes:
                    if mode != aids:
                        set_mode(navi, alias, mode)
                        aids = mode
                    counter += 1
                    env = Env(navi=navi, model_url=url, alias=alias, run=counter)
                    began = time.monotonic()
                    try:
                        outcome = await runners[task](env)
                        ok, core, detail, seconds = outcome.ok, outcome.core_ok, outcome.detail, outcome.seconds
                        events = [t.events for t in outcome.turns]
                    except Exception as exc:  # a harness failure counts as a failed run, and is shown
                        ok, core, detail = False, False, f"harness error {type(exc).__name__}: {exc}"
                        seconds, events = time.monotonic() - began, []
                    results.append({"task": task, "aids": mode, "run": run + 1, "ok": ok, "core_ok": core,
                                    "seconds": seconds, "detail": detail, "events": events})
                    if args.json:
                        await asyncio.to_thread(Path(args.json).write_text, json.dumps(results, indent=2))
                    print(f"[{task:18s} {mode:11s} #{run + 1}] {'PASS' if ok else 'FAIL'} {seconds:6.1f}s  {detail}",
                          flush=True)
    finally:
        navi.stop()
    return results


RESULTS: list[dict[str, Any]] = []  # module level: an interrupted run still prints its table


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def table(results: list[dict[str, Any]], modes: list[str]) -> str:
    """Per task and mode: success (the full check), the task's own check alone (ignoring stray
    tools and a raw call shown), and the median seconds."""
    tasks = list(dict.fromkeys(r["task"] for r in results))
    head = "| task | " + " | ".join(f"{m}: success | {m}: task check only | {m}: median s"
                                    for m in modes) + " |"
    sep = "|---|" + "---|---|---|" * len(modes)
    lines = [head, sep]
    totals = {m: [0, 0, 0] for m in modes}
    for task in tasks:
        cells = []
        for mode in modes:
            runs = [r for r in results if r["task"] == task and r["aids"] == mode]
            passed = sum(r["ok"] for r in runs)
            core = sum(r.get("core_ok", r["ok"]) for r in runs)
            totals[mode][0] += passed
            totals[mode][1] += core
            totals[mode][2] += len(runs)
            median = statistics.median(r["seconds"] for r in runs) if runs else float("nan")
            cells += [f"{passed}/{len(runs)}", f"{core}/{len(runs)}", f"{median:.0f}"]
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    cells = []
    for mode in modes:
        passed, core, total = totals[mode]
        all_runs = [r["seconds"] for r in results if r["aids"] == mode]
        cells += [f"**{passed}/{total} = {100 * passed / max(total, 1):.0f} %**",
                  f"{core}/{total} = {100 * core / max(total, 1):.0f} %",
                  f"{statistics.median(all_runs):.0f}" if all_runs else "-"]
    lines.append("| **all** | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--suite", choices=["ten", "broad"], default="ten")
    parser.add_argument("--half", choices=[*broad.HALVES, "both", "all"], default="both",
                        help="broad suite: which half (both: dev and test; all: every one)")
    parser.add_argument("--tasks", default="", help="comma-separated subset of the suite's task names")
    parser.add_argument("--modes", default="on,off",
                        help="comma-separated: constrained, native, bare (broad), or on, off (the aids)")
    parser.add_argument("--url", default=default_model_url())
    parser.add_argument("--json", default="", help="write every run (with its evidence) to this file")
    parser.add_argument("--budget-minutes", type=float, default=0,
                        help="start no further task (in either mode) once this much time has passed; 0 = no limit")
    args = parser.parse_args()
    started = time.monotonic()
    try:
        results = asyncio.run(bench(args))
    except KeyboardInterrupt:
        print("interrupted: the table covers the runs that finished", flush=True)
        results = RESULTS
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    print(f"\n{len(results)} runs in {(time.monotonic() - started) / 60:.1f} min\n")
    modes = [m.strip() for m in args.modes.split(",")]
    print(table(results, modes))
    if args.suite == "broad":
        print()
        print(halves(results, modes))


def halves(results: list[dict[str, Any]], modes: list[str]) -> str:
    """Success per half of the broad suite (dev: tuned on; the others: reported only) and mode."""
    split = {t.name: t.split for t in broad.TASKS}
    lines = ["| half | " + " | ".join(f"{m}: success | {m}: median s" for m in modes) + " |",
             "|---|" + "---|---|" * len(modes)]
    for half in broad.HALVES:
        cells = []
        for mode in modes:
            runs = [r for r in results if split.get(r["task"]) == half and r["aids"] == mode]
            passed = sum(r["ok"] for r in runs)
            median = statistics.median(r["seconds"] for r in runs) if runs else float("nan")
            cells += [f"{passed}/{len(runs)} = {100 * passed / max(len(runs), 1):.0f} %", f"{median:.0f}"]
        lines.append(f"| {half} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
