"""``manage.py fire_recall ID``: fire a pending recall now, synchronously, through the normal claim.

Embedded mode: when the server of this data directory is running, the run happens *in the server*
(its in-memory channel layer is where open tabs listen), so they watch it live; otherwise, and in
scale-out mode (the channel layer is Redis), it runs in this process.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from navi_site.errors import NaviError

HANDOVER_TIMEOUT_S = 3600.0  # the server answers when the run has ended


class Command(BaseCommand):
    help = "Fire a pending recall now (same claim, capacity and bookkeeping as the scheduler)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("recall_id")

    def handle(self, *args: Any, **opts: Any) -> None:
        from navi_site import serverfile
        from recall_app.firing import fire_now

        recall_id = _uuid(opts["recall_id"])
        server = serverfile.running() if settings.NAVI_MODE == "embedded" else None
        if server is not None:
            self.stderr.write(f"Navi is running (pid {server.pid}): the recall runs there, open tabs see it live.")
            out = _fire_in_server(server, recall_id)
        else:
            try:
                out = fire_now(recall_id, worker="manage.py fire_recall")
            except NaviError as exc:
                raise CommandError(exc.message) from None
        result = out["result"]
        self.stdout.write(f"{result}: recall {recall_id} is now {out['status']}, next {out['trigger_at']}")
        if result in {"at_capacity", "not_claimable"}:
            raise CommandError("The recall was not fired (" + result.replace("_", " ") + ").")


def _fire_in_server(server: Any, recall_id: str) -> dict[str, Any]:
    from navi_site import serverfile

    req = urllib.request.Request(f"{server.url}/internal/recalls/{recall_id}/fire", data=b"", method="POST",
                                 headers={"X-Navi-Signature": serverfile.sign(recall_id), "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=HANDOVER_TIMEOUT_S) as resp:
            return json.loads(resp.read())  # type: ignore[no-any-return]
    except urllib.error.HTTPError as exc:
        try:
            detail = json.loads(exc.read()).get("detail")
        except ValueError:
            detail = None
        raise CommandError(detail or f"The running Navi refused the request (HTTP {exc.code}).") from None
    except OSError as exc:
        raise CommandError(f"The running Navi at {server.url} did not answer ({exc}). Is it still starting? "
                           "Try again, or stop it to fire the recall from here.") from None


def _uuid(value: str) -> str:
    import uuid

    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise CommandError(f"{value!r} is not a recall id (a UUID).") from None
