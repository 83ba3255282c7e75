"""Export a conversation as Markdown, JSON or a self-contained HTML page, and import Navi's own
JSON export as a new session (issue 22).

Exports stream: ``export_chunks`` reads the display history in pages of ``PAGE`` rows (keyset on
``seq``) and yields one rendered chunk per page, so a session of any length costs the memory of
one page. ``import_session`` validates the whole document first and then writes the session and
its messages in one transaction: a refused import creates nothing.
"""
from __future__ import annotations

from sessions_app.export.importer import import_session, parse_import
from sessions_app.export.reader import EXPORT_FORMAT, EXPORT_VERSION, ExportContext, export_filename
from sessions_app.export.stream import export_chunks

__all__ = ["EXPORT_FORMAT", "EXPORT_VERSION", "ExportContext", "export_chunks", "export_filename", "import_session",
           "parse_import"]
