"""/api/docs works offline: the page names no other host and every file it loads comes from Navi itself
(django-ninja's own Swagger UI files), served by the live server like any other static file."""
from __future__ import annotations

import json
import re
import urllib.request
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

from tests.support.live import LiveNavi


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.settings = ""
        self._in_settings = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]
        self._in_settings = tag == "script" and values.get("id") == "swagger-settings"

    def handle_data(self, data: str) -> None:
        if self._in_settings:
            self.settings += data

    def handle_endtag(self, tag: str) -> None:
        self._in_settings = False


def _get(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, resp.headers.get("Content-Type", ""), resp.read()


def test_docs_page_loads_only_local_files(navi: LiveNavi) -> None:
    status, ctype, body = _get(navi.url + "/api/docs")
    assert status == 200 and ctype.startswith("text/html")
    html = body.decode()
    assert not re.search(r"(?i)\b(?:https?:)?//[a-z0-9.-]+", html.replace(navi.url, "")), \
        "the docs page names another host"
    parser = _Refs()
    parser.feed(html)
    scripts_and_styles = [r for r in parser.refs if r.endswith((".js", ".css"))]
    assert len(scripts_and_styles) >= 3, parser.refs  # swagger-ui.css, swagger-ui-bundle.js, swagger-ui-init.js
    for ref in parser.refs:
        url = urljoin(navi.url + "/api/docs", ref)
        assert urlsplit(url).netloc == urlsplit(navi.url).netloc, ref
        status, _, asset = _get(url)
        assert status == 200 and len(asset) > 100, ref
    swagger = json.loads(parser.settings)
    assert swagger["url"] == "/api/openapi.json"
    assert swagger["validatorUrl"] is None  # the default badge is an image from validator.swagger.io
    status, _, spec = _get(navi.url + "/api/openapi.json")
    assert status == 200 and json.loads(spec)["info"]["title"] == "Navi API"
