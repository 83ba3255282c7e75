"""Binds a request id to every log line of a request (and returns it as X-Request-ID)."""
from __future__ import annotations

import uuid

import structlog
from asgiref.sync import iscoroutinefunction, markcoroutinefunction


class RequestIdMiddleware:
    async_capable = True
    sync_capable = True

    def __init__(self, get_response):  # type: ignore[no-untyped-def]
        self.get_response = get_response
        self._async = iscoroutinefunction(get_response)
        if self._async:
            markcoroutinefunction(self)

    def __call__(self, request):  # type: ignore[no-untyped-def]
        if self._async:
            return self._acall(request)
        request_id = self._bind(request)
        try:
            response = self.get_response(request)
        finally:
            structlog.contextvars.unbind_contextvars("request_id")
        response["X-Request-ID"] = request_id
        return response

    async def _acall(self, request):  # type: ignore[no-untyped-def]
        request_id = self._bind(request)
        try:
            response = await self.get_response(request)
        finally:
            structlog.contextvars.unbind_contextvars("request_id")
        response["X-Request-ID"] = request_id
        return response

    @staticmethod
    def _bind(request) -> str:  # type: ignore[no-untyped-def]
        request_id = uuid.uuid4().hex[:16]
        request.request_id = request_id
        structlog.contextvars.bind_contextvars(request_id=request_id)
        return request_id
