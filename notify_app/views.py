"""The service worker, served from the site's root so that its scope covers the chat page."""
from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET


@require_GET
def service_worker(request: HttpRequest) -> HttpResponse:
    path = settings.BASE_DIR / "static" / "sw.js"
    response = HttpResponse(path.read_bytes(), content_type="text/javascript; charset=utf-8")
    response["Service-Worker-Allowed"] = "/"
    response["Cache-Control"] = "no-cache"  # browsers check for a new worker on every registration
    return response
