"""Where the notify app enqueues its Celery tasks (by name: see navi_site.enqueue)."""
from __future__ import annotations

from navi_site.enqueue import send_after_commit


def on_commit_deliver(delivery_id: int) -> None:
    """Send the first attempt of a delivery once the notification is committed (a failing broker is
    logged; ``notify.sweep`` sends what was lost)."""
    send_after_commit("notify.deliver", delivery_id, 0)
