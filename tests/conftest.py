"""Shared fixtures: users, API clients, the live server, WebSocket helpers, the test tiers.

Tiers: the suite runs once embedded (SQLite, in-memory layer/broker) and once
scale-out (NAVI_TEST_TIER=scaleout: PostgreSQL + Redis, set up by navi.py test).
"""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.agent_env import agent_env, stop_after  # noqa: F401 - fixtures
from tests.support.live import *  # noqa: F401,F403 - fixtures
from tests.support.users import *  # noqa: F401,F403 - fixtures

try:  # the fake LLM servers are fixtures too
    from tests.fakes.fixtures import *  # noqa: F401,F403
except ImportError:  # pragma: no cover - while the fakes are being written
    pass

TIER = os.environ.get("NAVI_TEST_TIER", "embedded")


@pytest.fixture
def registry(settings: Any) -> Iterator[Any]:
    """A run registry of the test's own (LocalStore embedded, RedisStore in scale-out), events
    unbatched; a module that means another kind of registry defines its own fixture of this name."""
    from sessions_app.runs import RunRegistry, set_run_registry

    settings.WS_DELTA_COALESCE_MS = 0
    reg = RunRegistry()
    set_run_registry(reg)
    yield reg
    set_run_registry(None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_scaleout = pytest.mark.skip(reason="scale-out tier only (NAVI_TEST_TIER=scaleout: PostgreSQL + Redis)")
    skip_embedded = pytest.mark.skip(reason="embedded tier only")
    for item in items:
        if "scaleout" in item.keywords and TIER != "scaleout":
            item.add_marker(skip_scaleout)
        if "embedded_only" in item.keywords and TIER == "scaleout":
            item.add_marker(skip_embedded)


@pytest.fixture(scope="session", autouse=True)
def _no_permission_rows_after_each_flush() -> None:
    """A transactional test ends in a flush, and Django then sends post_migrate, whose auth and
    contenttypes handlers write every model's ContentType and Permission rows again: a quarter to a
    third of a second each time, for rows nearly no test reads (a superuser needs none; ContentTypes
    are made when first asked for). A test that needs permission rows makes them itself
    (``create_permissions``). Navi's own post_migrate handler (the search index repair) stays."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db.models.signals import post_migrate

    post_migrate.disconnect(create_permissions, dispatch_uid="django.contrib.auth.management.create_permissions")
    post_migrate.disconnect(create_contenttypes)


@pytest.fixture(scope="session", autouse=True)
def _no_kept_connections_in_this_process() -> None:
    """This process's threads close their PostgreSQL connections after each request: a kept one
    would hold the test database open, and dropping it at the end would fail. Live servers
    (subprocesses) keep theirs (navi_site/db_connections.py)."""
    from django.conf import settings

    settings.DB_CONNECTION_KEEP_S = 0


@pytest.fixture(autouse=True)
def _close_connections_of_other_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    """Scale-out tier: an async test's ORM calls run in asgiref's one sync thread and in its event
    loop's executor threads (``sync_to_async(thread_sensitive=False)``). Their PostgreSQL connections
    never reach a request boundary, so nothing closed them: asgiref's thread kept one for the whole
    run, and an ended executor thread's stayed open until the garbage collector found it, so the test
    database could not be dropped at the end ("is being accessed by other users"). Close them after
    each test that may have opened them."""
    yield
    if TIER != "scaleout" or "transactional_db" not in request.fixturenames:
        return
    import gc

    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)
    gc.collect()  # the executor threads have ended with the test's loop; collecting closes what they held


@pytest.fixture(autouse=True)
def _isolated_files(settings, tmp_path):
    """Every test gets its own session-files, skills and user-tools directories (the bundled tools of
    the source tree stay: fixtures that want no tools at all empty BUNDLED_TOOLS_DIR)."""
    settings.SESSION_FILES_DIR = tmp_path / "session_files"
    settings.SESSION_FILES_DIR.mkdir()
    settings.SKILLS_DIR = tmp_path / "skills"
    settings.TOOLS_DIR = tmp_path / "user_tools"
    settings.DATA_DIR = tmp_path / "navi_data"  # never the checkout's data/ (a running Navi's server.json)
    settings.DATA_DIR.mkdir()
    yield


@pytest.fixture(autouse=True)
def _fresh_model_styles():
    """What the aids learnt about a model (text or structured calls) never leaks between tests."""
    from agent import aids

    aids._STYLES.clear()
    yield
    aids._STYLES.clear()
