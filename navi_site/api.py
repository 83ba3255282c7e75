"""The REST API: one NinjaAPI, a Router per app, one exception handler for our errors.

Mounted at the root so the paths are the documented ones (/health, /sessions, /agents/...);
OpenAPI at /api/openapi.json, docs at /api/docs (served from local files: it works offline).
"""
from __future__ import annotations

import structlog
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI, Swagger
from ninja.errors import AuthenticationError, HttpError, ValidationError

from navi_site.auth import api_auth
from navi_site.errors import NaviError

log = structlog.get_logger(__name__)

api = NinjaAPI(
    title="Navi API",
    version="1.0",
    description="Sessions, messages, profiles, tools, memory and recalls of a Navi server.",
    auth=api_auth,
    urls_namespace="api",
    openapi_url="/api/openapi.json",
    docs_url="/api/docs",
    # Offline: the Swagger UI files come from django-ninja's own static files ("ninja" is an installed
    # app), and the validator badge (an image from validator.swagger.io) is off.
    docs=Swagger(settings={"validatorUrl": None}),
)


def _error(request: HttpRequest, message: str, status: int, **extra: object) -> HttpResponse:
    return api.create_response(request, {"detail": message, **extra}, status=status)


@api.exception_handler(NaviError)
def _navi_error(request: HttpRequest, exc: NaviError) -> HttpResponse:
    return _error(request, exc.message, exc.status)


@api.exception_handler(AuthenticationError)
def _auth_error(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return _error(
        request,
        "Authentication required: log in, or send 'Authorization: Bearer <token>' "
        "(create one with `python manage.py create_api_token USERNAME`).",
        401,
    )


@api.exception_handler(ValidationError)
def _validation_error(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    problems = []
    for err in exc.errors:
        where = ".".join(str(p) for p in err.get("loc", ()) if p not in ("body", "payload"))
        problems.append(f"{where or 'request'}: {err.get('msg', 'invalid')}")
    return _error(request, "Invalid request: " + "; ".join(problems), 422, errors=exc.errors)


CSRF_HELP = (
    "CSRF check failed: a request authenticated by the browser's session cookie must send the "
    "X-CSRFToken header (its value is the csrftoken cookie). Scripts should authenticate with "
    "'Authorization: Bearer <token>' instead."
)


@api.exception_handler(HttpError)
def _http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    message = str(exc)
    if exc.status_code == 403 and "csrf" in message.lower():
        message = CSRF_HELP
    return _error(request, message, exc.status_code)


def _register_routers() -> None:
    from navi_site.health import router as health_router
    from profiles_app.api import router as agents_router
    from sessions_app.api import router as sessions_router
    from sessions_app.api_export import router as export_router
    from sessions_app.api_search import router as search_router

    api.add_router("", health_router)
    api.add_router("/agents", agents_router)
    api.add_router("/sessions", export_router)  # before the sessions router: /sessions/import is no session id
    api.add_router("/sessions", sessions_router)
    api.add_router("/search", search_router)
    for module in ("memory_app.api", "recall_app.api", "skills_app.api", "notify_app.api", "telegram_app.api",
                   "approvals_app.api", "local_models.api"):
        try:
            mod = __import__(module, fromlist=["router"])
        except ModuleNotFoundError:
            continue
        for prefix, router in getattr(mod, "ROUTERS", ((getattr(mod, "PREFIX", ""), mod.router),)):
            api.add_router(prefix, router)


_register_routers()
