"""Named SSH hosts (SSH_HOSTS_FILE) and host-key verification messages (SSH_KNOWN_HOSTS).

SSH_HOSTS_FILE is JSON::

    {"web1": {"host": "10.0.0.5", "port": 22, "username": "deploy",
              "key_file": "~/.ssh/navi_ed25519", "password_env": "WEB1_SSH_PASSWORD"}}

``port`` defaults to 22; ``key_file`` (relative paths: next to the hosts file)
and ``password_env`` (the *name* of an environment variable holding the
password) are optional. Only hosts named there can be reached.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from tools_app.base import ToolError

_FIELDS = {"host", "port", "username", "key_file", "password_env"}


@dataclass(frozen=True, slots=True, kw_only=True)
class SshHost:
    name: str
    host: str
    port: int
    username: str
    key_file: Path | None
    password_env: str | None


def hosts_file() -> Path:
    return Path(settings.SSH_HOSTS_FILE).expanduser()


def known_hosts_file() -> Path:
    return Path(settings.SSH_KNOWN_HOSTS).expanduser()


def _entry(name: str, raw: Any, path: Path) -> SshHost:
    where = f"SSH hosts file {path}: host {name!r}"
    if not isinstance(raw, dict):
        raise ToolError(f"{where} must be an object with host, port, username.")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ToolError(f"{where} has unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(_FIELDS))}.")
    host, username, port = raw.get("host"), raw.get("username"), raw.get("port", 22)
    if not isinstance(host, str) or not host:
        raise ToolError(f"{where} needs a 'host' (string).")
    if not isinstance(username, str) or not username:
        raise ToolError(f"{where} needs a 'username' (string).")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ToolError(f"{where}: 'port' must be a number between 1 and 65535.")
    key_file = raw.get("key_file")
    password_env = raw.get("password_env")
    if key_file is not None and not isinstance(key_file, str):
        raise ToolError(f"{where}: 'key_file' must be a path string.")
    if password_env is not None and not isinstance(password_env, str):
        raise ToolError(f"{where}: 'password_env' must be the name of an environment variable.")
    key_path = None
    if key_file:
        key_path = Path(key_file).expanduser()
        key_path = key_path if key_path.is_absolute() else path.parent / key_path
    return SshHost(name=name, host=host, port=port, username=username, key_file=key_path, password_env=password_env)


def load_hosts() -> dict[str, SshHost]:
    """All configured hosts; ToolError naming the file and the problem when it is missing or invalid."""
    path = hosts_file()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ToolError(f"No SSH hosts are configured: the SSH hosts file {path} does not exist.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolError(f"The SSH hosts file {path} cannot be read: {exc}.") from None
    except json.JSONDecodeError as exc:
        raise ToolError(f"The SSH hosts file {path} is not valid JSON: {exc.msg} at line {exc.lineno}.") from None
    if not isinstance(data, dict):
        raise ToolError(f"The SSH hosts file {path} must contain a JSON object of name -> host settings.")
    return {str(name): _entry(str(name), raw, path) for name, raw in data.items()}


def get_host(name: str) -> SshHost:
    hosts = load_hosts()
    if name not in hosts:
        known = ", ".join(sorted(hosts)) or "(none)"
        raise ToolError(f"Unknown SSH host {name!r}. Configured hosts: {known}.")
    return hosts[name]


def _target(host: SshHost) -> str:
    return host.host if host.port == 22 else f"[{host.host}]:{host.port}"


def host_key_message(host: SshHost) -> str:
    """Why the host key was not accepted (unknown vs. changed) and how to fix it."""
    known = known_hosts_file()
    recorded = False
    if known.is_file():
        import asyncssh  # loaded on first use

        matches = asyncssh.read_known_hosts(str(known)).match(host.host, host.host, host.port)
        recorded = bool(matches[0] or matches[1])
    scan = f"ssh-keyscan -p {host.port} {host.host} >> {known}"
    if recorded:
        return (
            f"The host key of SSH host {host.name!r} ({_target(host)}) has CHANGED: it does not match the key "
            f"recorded in {known}. This can mean a man-in-the-middle attack; the connection was refused. If the "
            f"server was legitimately reinstalled, verify its new key fingerprint out of band, then replace the "
            f"entry: ssh-keygen -R '{_target(host)}' -f {known} && {scan}"
        )
    return (
        f"The host key of SSH host {host.name!r} ({_target(host)}) is unknown: it is not in {known}, so the "
        f"connection was refused. Verify the server's key fingerprint out of band, then add it with: {scan}"
    )
