"""Schemathesis against the live server's OpenAPI: no operation may answer 5xx.

A bounded number of generated requests per operation (hypothesis, derandomized),
authenticated with a token, against the real server: async views, auth, the upload
handler and the run registry all take part. The fake model gives its default reply.
(schemathesis' own pytest plugin does not support pytest 9 yet, so the operations are
driven from one test.)
"""
from __future__ import annotations

import time
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings

from tests.support.live import LiveNavi

EXAMPLES_PER_OPERATION = 15


def test_no_server_errors(navi: LiveNavi) -> None:
    schema = schemathesis.openapi.from_url(f"{navi.url}/api/openapi.json")
    schema.config.update(base_url=navi.url)
    auth = {"Authorization": f"Bearer {navi.token}"}
    failures: list[str] = []
    calls = 0
    started = time.monotonic()
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_OPERATION, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            nonlocal calls
            calls += 1
            response = case.call(headers=auth, timeout=20)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: "
                                f"{response.text[:300]}")

        run()
    assert not failures, "\n".join(failures[:20])
    assert calls > 0 and time.monotonic() - started < 60
