"""The real-model tier: a live Navi against a running llama.cpp server (opt-in: ``-m realmodel``).

Start the model first: ``python manage.py real_model setup`` once, then
``python manage.py real_model start``. The server is found at $NAVI_REAL_MODEL_URL
(default http://127.0.0.1:8089/v1); when nothing answers there, every test is skipped.
"""
from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.realmodel.scenarios import Env, default_model_url, model_aliases, start_navi_for_model


@pytest.fixture(scope="session")
def real_model() -> tuple[str, str]:
    url = default_model_url()
    aliases = model_aliases(url)
    if not aliases:
        pytest.skip(f"no model server answers at {url}/models: run `python manage.py real_model setup` and "
                    "`python manage.py real_model start` (or set NAVI_REAL_MODEL_URL)")
    return url, aliases[0]


@pytest.fixture(scope="session")
def real_env(real_model: tuple[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url, alias = real_model
    navi = start_navi_for_model(tmp_path_factory.mktemp("realmodel"), url, alias)
    yield Env(navi=navi, model_url=url, alias=alias)
    navi.stop()
