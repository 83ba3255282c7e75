"""Error messages at the edge say what to do."""
from __future__ import annotations


def test_csrf_failure_says_what_to_do(db, client) -> None:
    from django.test import Client

    from tests.support.users import PASSWORD, make_user

    make_user("alice")
    c = Client(enforce_csrf_checks=True)
    c.login(username="alice", password=PASSWORD)
    resp = c.post("/sessions", data={}, content_type="application/json")
    assert resp.status_code == 403
    assert "X-CSRFToken" in resp.json()["detail"] and "Bearer" in resp.json()["detail"]
