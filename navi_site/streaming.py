"""A streamed response whose source is closed the moment the client goes away.

Django's ``StreamingHttpResponse`` wraps an async iterator in two generators of its own and, when the
request is cancelled (the client disconnected), closes only the outer one. If the cancel lands while a
part is on its way to the client (a full socket, a busy server loop), the view's generator stays
suspended at its ``yield``, holding whatever it has open: a model pull kept downloading gigabytes for
nobody until the server stopped. Here the response iterates its source itself and closes it on the way
out, whatever the way out is; a source that wraps another generator closes that one the same way
(``contextlib.aclosing``).
"""
from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse


class ClosingStreamingResponse(StreamingHttpResponse):
    """``StreamingHttpResponse`` for an async source that must be closed when the client leaves."""

    async def __aiter__(self) -> AsyncIterator[bytes]:  # type: ignore[override]
        source: Any = self._iterator  # type: ignore[attr-defined]  # set by StreamingHttpResponse
        try:
            async for part in source:
                yield self.make_bytes(part)
        finally:
            aclose = getattr(source, "aclose", None)
            if aclose is not None:
                await aclose()
