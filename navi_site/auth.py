"""Authentication for REST and WebSocket: the Django session cookie or a personal API token."""
from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer, SessionAuth

from sessions_app.models import ApiToken


def user_for_token(raw: str) -> User | None:
    """The active user of an active token, or None. Records when the token was used."""
    token = ApiToken.lookup(raw)
    if token is None:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user  # type: ignore[no-any-return]


class BearerTokenAuth(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = user_for_token(token)
        if user is not None:
            request.user = user
        return user


class CookieAuth(SessionAuth):
    """Django session cookie; unsafe methods need the CSRF token (ninja checks it)."""

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = getattr(request, "user", AnonymousUser())
        return user if user.is_authenticated and user.is_active else None


api_auth = [BearerTokenAuth(), CookieAuth(csrf=True)]
