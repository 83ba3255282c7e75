"""URL policy and a pinned, size- and time-capped HTTP fetch for http_request / web_view / image_view.

Policy:
- Schemes http and https only.
- The host is resolved (all addresses) and every address must be public: private,
  loopback, link-local (incl. the cloud metadata address 169.254.169.254),
  multicast, reserved, unspecified, CGNAT (100.64/10), and IPv6 forms embedding
  such an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo) are refused, unless the
  host name or an IP/CIDR covering the address is in HTTP_ALLOWED_PRIVATE_HOSTS.
  Numeric forms (``2130706433``, ``0x7f000001``, ``0177.0.0.1``) are judged by
  the address they resolve to.
- Redirects are followed by hand (at most 5) and each hop is checked again.
- The connection goes to the vetted address only: a network backend maps each
  vetted host name to its checked addresses, so a second DNS answer (rebinding)
  is never used. The URL keeps its host name, so the Host header and TLS SNI /
  certificate check are unchanged.
- The body is streamed and reading stops at the byte cap; one overall deadline
  covers connect, redirects and body (a slow drip cannot stretch it).
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import httpcore
import httpx
import structlog
from django.conf import settings

from tools_app.base import ToolError

log = structlog.get_logger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_REDIRECTS = 5
DNS_TIMEOUT = 5.0
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_REDIRECTS = {301, 302, 303, 307, 308}


class NetworkPolicyError(ToolError):
    """A URL or address the policy refuses."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Allowlist:
    hosts: frozenset[str]
    networks: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

    def allows(self, host: str, ip: IPAddress) -> bool:
        return host.lower() in self.hosts or any(ip in net for net in self.networks if net.version == ip.version)


def allowlist() -> Allowlist:
    hosts: set[str] = set()
    nets: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
    for entry in getattr(settings, "HTTP_ALLOWED_PRIVATE_HOSTS", []) or []:
        text = str(entry).strip().strip("[]")
        try:
            nets.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            hosts.add(text.lower())
    return Allowlist(hosts=frozenset(hosts), networks=tuple(nets))


def _embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    return None


def non_public_reason(ip: IPAddress) -> str | None:
    """Why ``ip`` is not a public unicast address, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = _embedded_v4(ip)
        if inner is not None:
            reason = non_public_reason(inner)
            return f"embeds {inner}, which is {reason}" if reason else None
    checks = (
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address (this includes cloud metadata services)"),
        (ip.is_multicast, "a multicast address"),
        (isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT, "a carrier-grade NAT address"),
        (ip.is_private, "a private network address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "not a public address"),
    )
    return next((why for bad, why in checks if bad), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Vetted:
    url: httpx.URL
    host: str
    port: int
    addresses: tuple[str, ...]


def parse_url(raw: str) -> httpx.URL:
    try:
        url = httpx.URL(raw)
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise NetworkPolicyError(f"{raw!r} is not a valid URL ({exc}).") from None
    if url.scheme not in {"http", "https"}:
        raise NetworkPolicyError(
            f"The URL scheme {url.scheme or '(none)'!r} is not allowed: only http:// and https:// URLs can be fetched."
        )
    if not url.host:
        raise NetworkPolicyError(f"The URL {raw!r} has no host.")
    return url


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), timeout=DNS_TIMEOUT
        )
    except TimeoutError:
        raise NetworkPolicyError(f"Looking up {host!r} took longer than {DNS_TIMEOUT:.0f} s.") from None
    except (socket.gaierror, UnicodeError) as exc:
        raise NetworkPolicyError(f"The host {host!r} could not be resolved ({exc}).") from None
    # The scope id of a link-local IPv6 answer is dropped: it is refused anyway.
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def vet_url(raw: str | httpx.URL) -> Vetted:
    """Check a URL against the policy; return it with the addresses a connection may use."""
    url = parse_url(str(raw))
    host = url.host
    port = url.port or (443 if url.scheme == "https" else 80)
    ips = await _resolve(host, port)
    allowed = allowlist()
    for ip in ips:
        reason = non_public_reason(ip)
        if reason and not allowed.allows(host, ip):
            raise NetworkPolicyError(
                f"Refusing to connect to {host} ({ip}): it is {reason}. Only public internet addresses "
                "can be reached; an admin can allow a private host in HTTP_ALLOWED_PRIVATE_HOSTS."
            )
    return Vetted(url=url, host=host, port=port, addresses=tuple(dict.fromkeys(str(ip) for ip in ips)))


class PinnedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to addresses vetted for a host name; anything else is refused."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._pins: dict[str, tuple[str, ...]] = {}

    def pin(self, vetted: Vetted) -> None:
        self._pins[vetted.host.lower()] = vetted.addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = self._pins.get(host.lower().strip("[]"))
        if not addresses:
            raise httpcore.ConnectError(f"{host} was not vetted by the network policy")
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout, OSError) as exc:
                last = exc
        raise httpcore.ConnectError(str(last))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx transport whose connection pool uses a PinnedBackend (no proxies, no env)."""

    def __init__(self, backend: PinnedBackend) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False), network_backend=backend, max_connections=4
        )


@dataclass(slots=True, kw_only=True)
class Fetched:
    url: str
    status: int
    reason: str
    headers: httpx.Headers
    body: bytes = b""
    truncated: bool = False
    timed_out: bool = False
    broken: str | None = None
    redirects: list[str] = field(default_factory=list)

    @property
    def declared_length(self) -> int | None:
        value = self.headers.get("content-length", "")
        return int(value) if value.isdigit() else None

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def cut_note(self) -> str:
        """A sentence saying how much of the body was left out, or ''."""
        if self.timed_out:
            return (
                f"[stopped: the time limit ran out while the server was still sending; "
                f"{len(self.body)} bytes received]"
            )
        if self.broken:
            return f"[the connection broke after {len(self.body)} bytes: {self.broken}]"
        if not self.truncated:
            return ""
        total = self.declared_length
        rest = f" of {total} bytes ({total - len(self.body)} bytes left out)" if total else "; the rest was not downloaded"
        return f"[body cut at {len(self.body)} bytes{rest}]"


def _next_request(request: httpx.Request, response: httpx.Response) -> tuple[str, str, bytes | None] | None:
    location = response.headers.get("location")
    if response.status_code not in _REDIRECTS or not location:
        return None
    target = urljoin(str(request.url), location)
    method = request.method
    if response.status_code == 303 or (response.status_code in {301, 302} and method == "POST"):
        return target, ("HEAD" if method == "HEAD" else "GET"), None
    return target, method, request.content


async def _read_body(response: httpx.Response, fetched: Fetched, max_bytes: int, deadline: float) -> None:
    chunks: list[bytes] = []
    size = 0
    iterator = response.aiter_bytes()
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            fetched.timed_out = True
            break
        try:
            chunk = await asyncio.wait_for(anext(iterator), timeout=remaining)
        except StopAsyncIteration:
            break
        except TimeoutError:
            fetched.timed_out = True
            break
        except httpx.HTTPError as exc:
            fetched.broken = f"{type(exc).__name__}: {exc}"
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            fetched.truncated = True
            break
    fetched.body = b"".join(chunks)[:max_bytes]


async def fetch(
    method: str,
    url: str,
    *,
    headers: dict[str, str] | None = None,
    params: dict[str, str] | None = None,
    content: bytes | None = None,
    max_bytes: int = 1_000_000,
    total_timeout: float = 30.0,
) -> Fetched:
    """One request under the policy, redirects followed by hand, body capped by size and time."""
    deadline = time.monotonic() + total_timeout
    backend = PinnedBackend()
    timeout = httpx.Timeout(min(total_timeout, 30.0))
    hdrs = {"accept-encoding": "identity", "user-agent": "Navi/1.0 (+self-hosted assistant)"}
    hdrs.update(headers or {})
    redirects: list[str] = []
    async with httpx.AsyncClient(transport=PinnedTransport(backend), timeout=timeout, follow_redirects=False,
                                 trust_env=False) as client:
        request = client.build_request(method, url, headers=hdrs, params=params, content=content)
        for _hop in range(MAX_REDIRECTS + 1):
            backend.pin(await _within(vet_url(request.url), deadline))
            response = await _within(client.send(request, stream=True), deadline)
            try:
                follow = _next_request(request, response)
                if follow is None:
                    fetched = Fetched(url=str(request.url), status=response.status_code,
                                      reason=response.reason_phrase, headers=response.headers, redirects=redirects)
                    await _read_body(response, fetched, max_bytes, deadline)
                    return fetched
            finally:
                await response.aclose()
            target, method, body = follow
            redirects.append(target)
            request = _redirect_request(client, request, target, method, body)
    raise NetworkPolicyError(f"Too many redirects (more than {MAX_REDIRECTS}): {' -> '.join(redirects)}")


def _redirect_request(
    client: httpx.AsyncClient, previous: httpx.Request, target: str, method: str, body: bytes | None
) -> httpx.Request:
    headers = httpx.Headers(previous.headers)
    new_url = parse_url(target)
    headers.pop("host", None)
    if new_url.host != previous.url.host or new_url.scheme != previous.url.scheme:
        for name in ("authorization", "cookie", "proxy-authorization"):
            headers.pop(name, None)
    if body is None:
        for name in ("content-length", "content-type", "transfer-encoding"):
            headers.pop(name, None)
    return client.build_request(method, new_url, headers=headers, content=body)


async def _within(awaitable: Any, deadline: float) -> Any:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        awaitable.close()
        raise ToolError("The request ran out of time (overall time limit reached).")
    try:
        return await asyncio.wait_for(awaitable, timeout=remaining)
    except TimeoutError:
        raise ToolError("The request ran out of time (overall time limit reached).") from None
    except httpx.HTTPError as exc:
        raise ToolError(f"The request failed: {type(exc).__name__}: {exc}") from None
