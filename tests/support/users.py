"""Users, tokens and authenticated clients."""
from __future__ import annotations

import functools
from typing import Any

import pytest
from django.test import Client

__all__ = ["user", "other_user", "token_for", "api", "other_api", "make_user"]


PASSWORD = "correct horse battery"


@functools.cache
def _password_hash() -> str:
    """The hash of PASSWORD, made once per process by the project's own hasher: PBKDF2 at Django's
    full strength takes about half a second, and nearly every test makes a user (it was a third of the
    suite's time). The hash is a real one, so a live server checks a login against it as in use."""
    from django.contrib.auth.hashers import make_password

    return make_password(PASSWORD)


def make_user(username: str, *, staff: bool = False) -> Any:
    from django.contrib.auth import get_user_model

    from profiles_app.default_profiles import install
    from profiles_app.models import AgentProfile

    if not AgentProfile.objects.exists():  # transactional tests flush the migration's rows
        install(AgentProfile)
    made = get_user_model()(username=username, password=_password_hash(), is_staff=staff, is_superuser=staff)
    made.save()
    return made


@pytest.fixture
def user(db: Any) -> Any:
    return make_user("alice", staff=True)


@pytest.fixture
def other_user(db: Any) -> Any:
    return make_user("mallory")


def token_for(u: Any) -> str:
    from sessions_app.models import ApiToken

    return ApiToken.issue(user=u)[1]


class ApiClient:
    """A REST client authenticated with a bearer token; JSON in, JSON out."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")

    def _call(self, method: str, path: str, json: Any = None, **kw: Any) -> Any:
        fn = getattr(self.client, method)
        if json is not None:
            return fn(path, data=json, content_type="application/json", **kw)
        return fn(path, **kw)

    def get(self, path: str, **kw: Any) -> Any:
        return self._call("get", path, **kw)

    def post(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self._call("post", path, json if json is not None else {}, **kw)

    def patch(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self._call("patch", path, json if json is not None else {}, **kw)

    def put(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self._call("put", path, json if json is not None else {}, **kw)

    def delete(self, path: str, json: Any = None, **kw: Any) -> Any:
        return self._call("delete", path, json, **kw)


@pytest.fixture
def api(user: Any) -> ApiClient:
    return ApiClient(token_for(user))


@pytest.fixture
def other_api(other_user: Any) -> ApiClient:
    return ApiClient(token_for(other_user))
