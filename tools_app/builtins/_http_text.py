"""Turning a fetched HTTP body into text for the model (shared by http_request and web_view)."""
from __future__ import annotations

from tools_app.safety.network import Fetched

TEXT_TYPES = ("application/json", "application/xml", "application/javascript", "application/xhtml+xml",
              "application/ld+json", "application/x-yaml", "application/yaml", "application/rss+xml",
              "application/atom+xml", "application/x-www-form-urlencoded", "application/problem+json")


def is_textual(fetched: Fetched) -> bool:
    """True when the body is text by its content type, or untyped and free of NUL bytes."""
    ctype = fetched.content_type
    if ctype.startswith("text/") or ctype in TEXT_TYPES or ctype.endswith(("+json", "+xml")):
        return True
    return not ctype and b"\x00" not in fetched.body[:4096]


def decode_body(fetched: Fetched) -> str:
    """The body as text, using the declared charset (UTF-8 when none or unknown)."""
    charset = "utf-8"
    for part in fetched.headers.get("content-type", "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip("\"' ")
    try:
        return fetched.body.decode(charset, errors="replace")
    except LookupError:
        return fetched.body.decode("utf-8", errors="replace")


def binary_hint(fetched: Fetched) -> str:
    ctype = fetched.content_type or "unknown type"
    size = fetched.declared_length or len(fetched.body)
    hint = " Use image_view with the URL to look at an image." if ctype.startswith("image/") else ""
    return f"The response is binary ({ctype}, about {size} bytes) and is not shown as text.{hint}"
