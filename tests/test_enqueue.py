"""The apps enqueue their Celery tasks by name (navi_site.enqueue): a misspelt name would only fail
in a worker, so every name an app's ``enqueue.py`` sends must be a registered task."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from celery.exceptions import NotRegistered

from navi_site.enqueue import task_named

ROOT = Path(__file__).resolve().parent.parent


def enqueued_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for path in sorted(ROOT.glob("*/enqueue.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                    and node.func.id in {"send", "send_after_commit"} and node.args
                    and isinstance(node.args[0], ast.Constant)):
                names[node.args[0].value] = str(path.relative_to(ROOT))
    return names


def test_every_task_an_app_enqueues_is_registered():
    names = enqueued_names()
    assert {"memory.extract_session", "recall.fire", "sessions.generate_title"} <= set(names)
    for name, where in names.items():
        assert task_named(name).name == name, where


def test_an_unknown_task_name_is_refused():
    with pytest.raises(NotRegistered):
        task_named("memory.no_such_task")
