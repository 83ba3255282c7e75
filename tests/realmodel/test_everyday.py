"""Everyday tasks with a real small model (issue 11). Each check reads what the user sees or what was stored."""
from __future__ import annotations

import pytest

from tests.realmodel.scenarios import TASKS, Env

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


# Qwen2.5-Coder 0.5B sets its todo list, then writes the todo call again instead of the next step,
# whatever the aids tell it (0/3 in docs/benchmarks.md): a known failure, reported, not hidden.
KNOWN_FAILURES = {"todo_two_steps": "Qwen 0.5B repeats its todo call instead of doing the steps (docs/benchmarks.md)"}


@pytest.mark.parametrize("task", [pytest.param(t, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[t], strict=False))
                                  if t in KNOWN_FAILURES else t for t in TASKS])
async def test_everyday_task(real_env: Env, task: str) -> None:
    outcome = await TASKS[task](real_env)
    assert outcome.ok, f"{task} failed after {outcome.seconds:.0f} s: {outcome.detail}"
