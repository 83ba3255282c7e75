"""ssh_exec against a real OpenSSH server started on a loopback port (Debian: openssh-server)."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.ctx import current_session_id, current_user_role
from tools_app.base import ToolError
from tools_app.builtins.ssh_exec import POOL, SshExecTool, close_session_connections

SSHD = "/usr/sbin/sshd"
ssh = SshExecTool()

pytestmark = [
    pytest.mark.skipif(not Path(SSHD).exists(), reason="OpenSSH server not installed (apt-get install openssh-server)"),
    pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed (openssh-client)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="the test sshd needs root (privilege separation)"),
]


@dataclass
class Sshd:
    port: int
    dir: Path
    client_key: Path
    host_pub: str


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, timeout=20)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("sshd did not start listening")


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    base = tmp_path_factory.mktemp("sshd")
    _keygen(base / "host_key")
    _keygen(base / "client_key")
    (base / "authorized_keys").write_text((base / "client_key.pub").read_text())
    port = _free_port()
    config = base / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {base / 'host_key'}\nPidFile {base / 'sshd.pid'}\n"
        f"AuthorizedKeysFile {base / 'authorized_keys'}\nStrictModes no\nUsePAM no\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\nPermitRootLogin prohibit-password\n"
        "LogLevel ERROR\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory (tmpfs, absent in containers)
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE)
    try:
        _wait_listening(port, proc)
        host_pub = " ".join((base / "host_key.pub").read_text().split()[0:2])
        yield Sshd(port=port, dir=base, client_key=base / "client_key", host_pub=host_pub)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def ssh_ctx(tool_ctx, settings, sshd: Sshd, tmp_path: Path):
    hosts = tmp_path / "ssh_hosts.json"
    hosts.write_text(json.dumps({"local": {"host": "127.0.0.1", "port": sshd.port, "username": "root",
                                           "key_file": str(sshd.client_key)}}))
    known = tmp_path / "known_hosts"
    known.write_text(f"[127.0.0.1]:{sshd.port} {sshd.host_pub}\n")
    settings.SSH_HOSTS_FILE = hosts
    settings.SSH_KNOWN_HOSTS = known
    settings.SSH_IDLE_SECONDS = 300
    sid = f"ssh-test-{time.monotonic_ns()}"
    current_session_id.set(sid)
    # Tests close their connections themselves: a connection belongs to the test's event loop.
    return {"known": known, "hosts": hosts, "session": sid}


async def test_happy_path(ssh_ctx) -> None:
    result = await ssh.execute({"host": "local", "command": "echo hello; echo oops >&2"})
    assert result.success, result.for_model()
    assert "exit status: 0" in result.output and "hello" in result.output and "oops" in result.output
    failed = await ssh.execute({"host": "local", "command": "exit 3"})
    assert not failed.success and "exit status: 3" in failed.output
    await close_session_connections(ssh_ctx["session"])


async def test_unknown_host_name(ssh_ctx) -> None:
    with pytest.raises(ToolError, match="Unknown SSH host 'nope'. Configured hosts: local."):
        await ssh.execute({"host": "nope", "command": "id"})


async def test_unknown_host_key_refused(ssh_ctx, sshd) -> None:
    ssh_ctx["known"].write_text("")
    with pytest.raises(ToolError, match=r"is unknown.*ssh-keyscan -p \d+ 127.0.0.1 >>"):
        await ssh.execute({"host": "local", "command": "id"})


async def test_changed_host_key_refused(ssh_ctx, sshd, tmp_path) -> None:
    _keygen(tmp_path / "other")
    other = " ".join((tmp_path / "other.pub").read_text().split(" ")[0:2])
    ssh_ctx["known"].write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    with pytest.raises(ToolError, match="has CHANGED.*man-in-the-middle.*ssh-keygen -R"):
        await ssh.execute({"host": "local", "command": "id"})


async def test_missing_known_hosts_file(ssh_ctx, settings, tmp_path) -> None:
    settings.SSH_KNOWN_HOSTS = tmp_path / "absent_known_hosts"
    with pytest.raises(ToolError, match="known_hosts file .* does not exist"):
        await ssh.execute({"host": "local", "command": "id"})


async def test_pool_reuses_the_connection(ssh_ctx) -> None:
    key = (ssh_ctx["session"], "local")
    await ssh.execute({"host": "local", "command": "true"})
    first = POOL.entry(key).conn  # type: ignore[union-attr]
    await ssh.execute({"host": "local", "command": "true"})
    assert POOL.entry(key).conn is first  # type: ignore[union-attr]
    assert await close_session_connections(ssh_ctx["session"]) == 1
    assert POOL.entry(key) is None and first.is_closed()


async def test_idle_connections_are_closed(ssh_ctx, settings) -> None:
    settings.SSH_IDLE_SECONDS = 0.2
    key = (ssh_ctx["session"], "local")
    await ssh.execute({"host": "local", "command": "true"})
    first = POOL.entry(key).conn  # type: ignore[union-attr]
    await asyncio.sleep(0.4)
    assert await POOL.reap_idle() >= 1
    assert first.is_closed() and POOL.entry(key) is None
    await ssh.execute({"host": "local", "command": "true"})  # reconnects lazily
    assert POOL.entry(key).conn is not first  # type: ignore[union-attr]
    await close_session_connections(ssh_ctx["session"])


async def test_command_timeout(ssh_ctx) -> None:
    result = await ssh.execute({"host": "local", "command": "sleep 5", "timeout": 1})
    assert not result.success and "timed out after 1 s" in result.output
    await close_session_connections(ssh_ctx["session"])


async def test_staff_only(ssh_ctx) -> None:
    current_user_role.set("user")
    with pytest.raises(ToolError, match="only available to staff users"):
        await ssh.execute({"host": "local", "command": "id"})


@pytest.mark.parametrize(("content", "match"), [
    ("{not json", "is not valid JSON"),
    ("[]", "must contain a JSON object"),
    ('{"x": {"host": "h"}}', "host 'x' needs a 'username'"),
    ('{"x": {"host": "h", "username": "u", "port": "22"}}', "'port' must be a number"),
    ('{"x": {"host": "h", "username": "u", "pasword": "p"}}', "unknown field"),
])
async def test_bad_hosts_file(ssh_ctx, content: str, match: str) -> None:
    ssh_ctx["hosts"].write_text(content)
    with pytest.raises(ToolError, match=match) as err:
        await ssh.execute({"host": "x", "command": "id"})
    assert str(ssh_ctx["hosts"]) in str(err.value)


async def test_missing_hosts_file(ssh_ctx) -> None:
    ssh_ctx["hosts"].unlink()
    with pytest.raises(ToolError, match="No SSH hosts are configured: the SSH hosts file .* does not exist"):
        await ssh.execute({"host": "local", "command": "id"})
