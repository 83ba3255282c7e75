"""Built-in tools that touch the outside world (files, network, processes, SSH, images)."""
from __future__ import annotations

from tools_app.base import Tool
from tools_app.builtins.code_exec import CodeExecTool
from tools_app.builtins.filesystem import FilesystemTool
from tools_app.builtins.http_request import HttpRequestTool
from tools_app.builtins.image_view import ImageViewTool
from tools_app.builtins.ssh_exec import SshExecTool
from tools_app.builtins.terminal import TerminalTool
from tools_app.builtins.web_search import WebSearchTool
from tools_app.builtins.web_view import WebViewTool

WORLD_TOOLS: tuple[type[Tool], ...] = (
    WebSearchTool,
    WebViewTool,
    FilesystemTool,
    HttpRequestTool,
    CodeExecTool,
    TerminalTool,
    SshExecTool,
    ImageViewTool,
)

__all__ = [
    "WORLD_TOOLS", "CodeExecTool", "FilesystemTool", "HttpRequestTool", "ImageViewTool", "SshExecTool",
    "TerminalTool", "WebSearchTool", "WebViewTool",
]
