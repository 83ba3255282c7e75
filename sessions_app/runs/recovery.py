"""Closing the turns of dead processes (``sessions_app.turns.turns_recover``), then freeing their
run locks (scale-out: a killed server's Redis lock would keep the session busy for up to 30 s) and
telling their open clients to reload (``session_sync``)."""
from __future__ import annotations

import structlog

from sessions_app.runs import drafts
from sessions_app.turns import Recovered, turns_recover

log = structlog.get_logger(__name__)


def recover_turns() -> list[Recovered]:
    """Call from sync code: ``manage.py start`` and the beat task ``sessions.recover_turns``."""
    from sessions_app.bus import publish
    from sessions_app.hooks import run_turn_recovered_hooks
    from sessions_app.runs.instance import get_run_registry

    closed = turns_recover(live_run_ids=drafts.live_run_ids())
    if not closed:
        return closed
    store = get_run_registry().store
    for turn in closed:
        try:
            store.release_sync(turn.session_id, turn.run_id)
            if not run_turn_recovered_hooks(turn.session_id, turn.started_at):
                publish(turn.session_id, {"type": "session_sync"})
        except Exception:  # noqa: BLE001 - the lock expires by itself; clients reload on connect
            log.warning("turn_recover_release_failed", session_id=turn.session_id, exc_info=True)
    return closed
