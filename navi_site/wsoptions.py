"""WebSocket options of the server: permessage-deflate (RFC 7692).

Daphne serves WebSockets with autobahn's ``WebSocketServerFactory`` and never sets
``perMessageCompressionAccept``, so compression is off and every ``stream_delta``
carries its ~40-byte JSON envelope (``{"type":"stream_delta","delta":…,"seq":N}``)
uncompressed. ``configure_factory`` accepts a client's permessage-deflate offer
(browsers and the Python ``websockets`` client send one automatically; a client
that offers nothing gets plain frames): with context takeover the repeated
envelope is a few back-references, so the wire cost of a delta approaches the
text itself. The JSON on the wire does not change.

Memory: zlib's defaults (32 KiB window, memLevel 8) cost ~256 KiB per connection
once the first message is compressed — 250 MB for 1 000 connections. Server-to-client
compression uses a 2 KiB window and memLevel 4 (~16 KiB a connection): the envelope
repeats within the last few hundred bytes, so a bigger window buys next to nothing. A
smaller window than the one negotiated is always valid for the peer's decompressor.
We ask the client for the same window for its (rare, small) frames when it allows it.

An idle socket gets only ``{"type":"session_sync"}`` when it connects and a heartbeat now and
then: those go out uncompressed (RFC 7692 lets any message be sent so) as long as the socket has
not compressed anything yet, so that its compressor (~22 KiB: zlib's state, window and hash)
exists only once a turn streams to it. 1 000 idle tabs: ~22 MB less.
"""
from __future__ import annotations

from typing import Any

IDLE_FRAMES = frozenset({b'{"type":"session_sync"}', b'{"type":"heartbeat"}'})
IDLE_FRAME_MAX = max(map(len, IDLE_FRAMES))
SERVER_WINDOW_BITS = 11  # 2 KiB history for server -> client messages
SERVER_MEM_LEVEL = 4  # zlib memLevel: 8 KiB hash + 16 KiB buffers at 4
CLIENT_WINDOW_BITS = 11


def accept_deflate(offers: list[Any]) -> Any:
    """autobahn ``perMessageCompressionAccept``: take the first permessage-deflate offer."""
    from autobahn.websocket.compress import PerMessageDeflateOffer, PerMessageDeflateOfferAccept

    for offer in offers:
        if not isinstance(offer, PerMessageDeflateOffer):
            continue
        window = SERVER_WINDOW_BITS
        if offer.request_max_window_bits:  # the client asked for at most this window
            window = min(window, offer.request_max_window_bits)
        return PerMessageDeflateOfferAccept(
            offer,
            request_max_window_bits=CLIENT_WINDOW_BITS if offer.accept_max_window_bits else 0,
            window_bits=window,
            mem_level=SERVER_MEM_LEVEL,
        )
    return None


def configure_factory(factory: Any, *, compression: bool = True) -> None:
    """Apply Navi's options to daphne's ``WebSocketFactory`` (call before the reactor runs)."""
    if compression:
        factory.setProtocolOptions(perMessageCompressionAccept=accept_deflate)
    plain_autobahn_log_arguments()
    eager_tcp_writes()
    idle_frames_uncompressed()


def idle_frames_uncompressed() -> None:
    """Send IDLE_FRAMES uncompressed until a socket's first compressed message (see the module
    docstring): autobahn builds a socket's compressor when it first compresses."""
    from daphne.ws_protocol import WebSocketProtocol

    send = WebSocketProtocol.sendMessage
    if getattr(send, "navi_idle_plain", False):
        return

    def sendMessage(self: Any, payload: bytes, isBinary: bool = False, fragmentSize: int | None = None,  # noqa: N802,N803
                    sync: bool = False, doNotCompress: bool = False) -> None:
        deflate = self._perMessageCompress
        if (deflate is not None and not doNotCompress and len(payload) <= IDLE_FRAME_MAX and payload in IDLE_FRAMES
                and getattr(deflate, "_compressor", True) is None):
            doNotCompress = True
        send(self, payload, isBinary, fragmentSize, sync, doNotCompress)

    sendMessage.navi_idle_plain = True  # type: ignore[attr-defined]
    WebSocketProtocol.sendMessage = sendMessage


def eager_tcp_writes() -> None:
    """Twisted's TCP ``write`` only buffers: it registers the socket for writability, sends on
    the next loop turn, then unregisters it — two ``epoll_ctl`` calls and a callback for every
    WebSocket frame (~6 % of the server's loop with 100 sessions streaming, where a frame goes
    out every 30 ms per socket). Like asyncio's transports, send at once when nothing is
    buffered; only what the kernel does not take is buffered, the Twisted way. TLS
    connections (Twisted's TLS layer) and errors (handled by the buffered path) are unchanged."""
    from twisted.internet import tcp

    buffered = tcp.Connection.write
    if getattr(buffered, "navi_eager", False):
        return

    def write(self: Any, data: bytes) -> None:
        if (data and self.connected and not self.TLS and not self._writeDisconnected
                and not self._tempDataBuffer and self.offset == len(self.dataBuffer)):
            sent = self.writeSomeData(data)
            if isinstance(sent, int):
                if sent == len(data):
                    return
                data = bytes(memoryview(data)[sent:])
        buffered(self, data)

    write.navi_eager = True  # type: ignore[attr-defined]
    tcp.Connection.write = write


def plain_autobahn_log_arguments() -> None:
    """autobahn builds the arguments of its debug log lines before the logger drops them, and
    colours them with click when click is installed (Celery brings it): four ``click.style``
    calls and an ``inspect`` of the method for every frame sent, ~3 % of the server's loop with
    100 sessions streaming. Without colour they are plain f-strings; nothing we log changes."""
    import autobahn.util

    if hasattr(autobahn.util, "_HAS_CLICK"):
        autobahn.util._HAS_CLICK = False


def raise_open_files_limit(want: int = 65536) -> int:
    """Raise the soft RLIMIT_NOFILE towards the hard limit (each WebSocket is a file descriptor)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            pass
    return soft
