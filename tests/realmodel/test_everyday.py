"""Everyday tasks with a real small model (issue 11). Each check reads what the user sees or what was stored."""
from __future__ import annotations

import pytest

from tests.realmodel.scenarios import TASKS, Env

pytestmark = [pytest.mark.realmodel, pytest.mark.slow]


@pytest.mark.parametrize("task", list(TASKS))
async def test_everyday_task(real_env: Env, task: str) -> None:
    outcome = await TASKS[task](real_env)
    assert outcome.ok, f"{task} failed after {outcome.seconds:.0f} s: {outcome.detail}"
