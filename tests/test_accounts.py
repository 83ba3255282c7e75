"""First run, login/logout, API tokens (REST)."""
from __future__ import annotations

import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from sessions_app.models import ApiToken
from tests.support.users import PASSWORD, make_user, token_for

pytestmark = pytest.mark.django_db


def test_first_run_leads_to_account_creation_then_chat() -> None:
    client = Client()
    resp = client.get("/")
    assert resp.status_code == 302 and resp.url == "/setup/"
    page = client.get("/setup/")
    assert b"Create the first one" in page.content
    resp = client.post(
        "/setup/", {"username": "owner", "password1": "a-Long-pass-phrase-42", "password2": "a-Long-pass-phrase-42"}
    )
    assert resp.status_code == 302 and resp.url == "/"
    owner = get_user_model().objects.get(username="owner")
    assert owner.is_superuser and owner.is_staff
    chat = client.get("/")
    assert chat.status_code == 200 and b"Signed in as owner" in chat.content or b"owner" in chat.content
    # The setup page is gone once an account exists.
    assert Client().get("/setup/").url == "/"


def test_setup_refuses_weak_password_and_creates_nothing() -> None:
    resp = Client().post("/setup/", {"username": "owner", "password1": "123", "password2": "123"})
    assert resp.status_code == 200
    assert b"too short" in resp.content
    assert not get_user_model().objects.exists()


def test_anonymous_is_sent_to_login_once_a_user_exists() -> None:
    make_user("alice")
    resp = Client().get("/")
    assert resp.status_code == 302 and resp.url.startswith("/login/")


def test_wrong_password_and_unknown_user_get_the_same_answer() -> None:
    make_user("alice")
    wrong = Client().post("/login/", {"username": "alice", "password": "nope"})
    unknown = Client().post("/login/", {"username": "nobody", "password": "nope"})
    assert wrong.status_code == unknown.status_code == 200
    assert b"Wrong username or password" in wrong.content
    assert b"Wrong username or password" in unknown.content
    strip = lambda c: c.replace(b"alice", b"").replace(b"nobody", b"")  # noqa: E731
    assert strip(wrong.content).split(b"csrfmiddlewaretoken")[0] == strip(unknown.content).split(b"csrfmiddlewaretoken")[0]


def test_login_and_logout() -> None:
    make_user("alice")
    client = Client()
    resp = client.post("/login/", {"username": "alice", "password": PASSWORD})
    assert resp.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


def test_create_api_token_prints_a_working_token_stored_hashed() -> None:
    alice = make_user("alice")
    out, err = io.StringIO(), io.StringIO()
    call_command("create_api_token", "alice", stdout=out, stderr=err)
    raw = out.getvalue().strip()
    assert raw.startswith("navi_") and len(raw) > 30
    stored = ApiToken.objects.get(user=alice)
    assert raw not in (stored.key_hash, stored.prefix) and stored.prefix == raw[:12]
    resp = Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/sessions")
    assert resp.status_code == 200


def test_create_api_token_for_unknown_user_is_a_clear_error() -> None:
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        call_command("create_api_token", "ghost")


@pytest.mark.parametrize("header", ["Bearer navi_not-a-real-token", "Bearer ", "Token abc", ""])
def test_invalid_token_is_refused_with_401(header: str) -> None:
    make_user("alice")
    resp = Client(HTTP_AUTHORIZATION=header).get("/sessions")
    assert resp.status_code == 401
    assert "Authentication required" in resp.json()["detail"]


def test_revoked_token_is_refused() -> None:
    alice = make_user("alice")
    raw = token_for(alice)
    ApiToken.objects.filter(user=alice).update(revoked_at=timezone.now())
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/sessions").status_code == 401


def test_token_of_inactive_user_is_refused() -> None:
    alice = make_user("alice")
    raw = token_for(alice)
    alice.is_active = False
    alice.save()
    assert Client(HTTP_AUTHORIZATION=f"Bearer {raw}").get("/sessions").status_code == 401


def test_cookie_post_without_csrf_token_is_refused() -> None:
    make_user("alice")
    client = Client(enforce_csrf_checks=True)
    assert client.login(username="alice", password=PASSWORD)
    resp = client.post("/sessions", data={}, content_type="application/json")
    assert resp.status_code == 403
    # With the CSRF token it works.
    client.get("/")
    csrf = client.cookies["csrftoken"].value
    ok = client.post("/sessions", data={}, content_type="application/json", HTTP_X_CSRFTOKEN=csrf)
    assert ok.status_code == 201
