"""URL policy: schemes, private/loopback/metadata addresses in every spelling, allowlist, pinning."""
from __future__ import annotations

import ipaddress

import httpcore
import pytest

from tools_app.safety.network import NetworkPolicyError, PinnedBackend, Vetted, non_public_reason, vet_url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://localhost/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "link-local"),
        ("http://[::ffff:7f00:1]/", "embeds 127.0.0.1"),
        ("http://[::1]/", "loopback"),
        ("http://[fd00:ec2::254]/", "private"),
        ("http://2130706433/", "loopback"),
        ("http://0x7f000001/", "loopback"),
        ("http://0177.0.0.1/", "loopback|not a valid URL"),  # httpx itself rejects octal
        ("http://10.1.2.3/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://224.0.0.1/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://[64:ff9b::7f00:1]/", "embeds 127.0.0.1"),
        ("http://[2002:7f00:1::]/", "embeds 127.0.0.1"),
    ],
)
async def test_non_public_addresses_refused(tool_ctx, url: str, reason: str) -> None:
    with pytest.raises(NetworkPolicyError, match=reason) as err:
        await vet_url(url)
    assert "HTTP_ALLOWED_PRIVATE_HOSTS" in str(err.value) or "valid URL" in str(err.value)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "gopher://127.0.0.1:70/", "ftp://example.com/", "dict://x/"])
async def test_other_schemes_refused(tool_ctx, url: str) -> None:
    with pytest.raises(NetworkPolicyError, match="only http:// and https://"):
        await vet_url(url)


async def test_allowlist_by_ip_cidr_and_name(tool_ctx, settings) -> None:
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = ["127.0.0.1"]
    assert (await vet_url("http://127.0.0.1:8080/x")).addresses == ("127.0.0.1",)
    with pytest.raises(NetworkPolicyError):
        await vet_url("http://127.0.0.2/")  # not covered by the single address
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = ["127.0.0.0/8"]
    assert (await vet_url("http://127.0.0.2/")).addresses == ("127.0.0.2",)
    settings.HTTP_ALLOWED_PRIVATE_HOSTS = ["localhost"]
    vetted = await vet_url("http://localhost:9/")
    assert vetted.host == "localhost"
    with pytest.raises(NetworkPolicyError):
        await vet_url("http://169.254.169.254/")


async def test_unresolvable_host(tool_ctx) -> None:
    with pytest.raises(NetworkPolicyError, match="could not be resolved"):
        await vet_url("http://does-not-exist.invalid/")


def test_public_addresses_pass() -> None:
    assert non_public_reason(ipaddress.ip_address("93.184.216.34")) is None
    assert non_public_reason(ipaddress.ip_address("2606:4700::1111")) is None


async def test_pinned_backend_refuses_unvetted_host() -> None:
    backend = PinnedBackend()
    with pytest.raises(httpcore.ConnectError, match="not vetted"):
        await backend.connect_tcp("example.com", 80)


async def test_pinned_backend_connects_to_vetted_address_not_dns(http_server) -> None:
    """A name that DNS does not know still connects: only the vetted address is used (no second lookup)."""
    backend = PinnedBackend()
    backend.pin(Vetted(url=None, host="rebind.invalid", port=http_server.port, addresses=("127.0.0.1",)))  # type: ignore[arg-type]
    stream = await backend.connect_tcp("rebind.invalid", http_server.port, timeout=2)
    await stream.aclose()
