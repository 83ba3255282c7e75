"""E-mail notifications through Django's e-mail framework, against a local SMTP server (aiosmtpd):
delivery, retry with backoff when SMTP fails, a refused address, and what is never lost."""
from __future__ import annotations

from typing import Any

import pytest

from notify_app import kinds
from notify_app.delivery import backoff, delivery_attempt
from notify_app.dispatch import notify
from notify_app.models import Delivery
from tests.support.live import free_port

pytestmark = pytest.mark.django_db


@pytest.fixture
def mail_user(user: Any, settings: Any) -> Any:
    user.email = "alice@example.org"
    user.save()
    settings.NOTIFY_RETRY_BASE_SECONDS = 30
    settings.NOTIFY_MAX_ATTEMPTS = 3
    settings.NAVI_PUBLIC_URL = "https://navi.example"
    return user


def _email_delivery(user: Any, kind: str = kinds.RECALL_FAILED, **fields: Any) -> Delivery:
    notification = notify(user_id=user.pk, kind=kind, title="Recall failed · Build watch",
                          body="The build log could not be read.", **fields)
    assert notification is not None
    return notification.deliveries.get(channel=kinds.EMAIL)


def test_a_notification_arrives_as_an_email(mail_user, smtp_server):
    delivery = _email_delivery(mail_user)
    result = delivery_attempt(delivery.pk, attempt=0)
    assert result.status == "sent"
    [mail] = smtp_server.received
    assert mail.recipients == ["alice@example.org"]
    assert mail.subject == "[Navi] Recall failed · Build watch"
    assert "The build log could not be read." in mail.text
    assert "Open it in Navi: https://navi.example/" in mail.text
    assert mail.message["Auto-Submitted"] == "auto-generated"
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("sent", 1, "")


def test_the_link_opens_the_session(mail_user, smtp_server):
    from sessions_app.services import session_create

    session = session_create(owner=mail_user)
    delivery = _email_delivery(mail_user, session_id=str(session.id))
    delivery_attempt(delivery.pk, attempt=0)
    assert f"https://navi.example/#{session.id}" in smtp_server.received[0].text


def test_smtp_down_is_retried_with_backoff_then_given_up(mail_user, settings):
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens there
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    delivery = _email_delivery(mail_user)
    first = delivery_attempt(delivery.pk, attempt=0)
    assert first.status == "retry" and first.retry_in == 30
    assert "ConnectionRefusedError" in first.error
    second = delivery_attempt(delivery.pk, attempt=1)
    assert second.status == "retry" and second.retry_in == 60
    third = delivery_attempt(delivery.pk, attempt=2)
    assert third.status == "failed"
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 3
    assert delivery.last_error.startswith("gave up after 3 attempts: SMTP 127.0.0.1:")


def test_a_deferred_recipient_is_retried_and_then_delivered(mail_user, smtp_server):
    smtp_server.rcpt_replies = ["451 4.3.0 Mailbox busy, try again later"]
    delivery = _email_delivery(mail_user)
    first = delivery_attempt(delivery.pk, attempt=0)
    assert first.status == "retry" and "451" in first.error
    assert smtp_server.received == []
    assert delivery_attempt(delivery.pk, attempt=1).status == "sent"
    assert len(smtp_server.received) == 1


def test_a_refused_address_fails_at_once(mail_user, smtp_server):
    smtp_server.rcpt_replies = ["550 5.1.1 No such user here"]
    delivery = _email_delivery(mail_user)
    result = delivery_attempt(delivery.pk, attempt=0)
    assert result.status == "failed"
    assert "refused alice@example.org: 550" in result.error


def test_a_redelivered_task_sends_once(mail_user, smtp_server):
    delivery = _email_delivery(mail_user)
    assert delivery_attempt(delivery.pk, attempt=0).status == "sent"
    assert delivery_attempt(delivery.pk, attempt=0).status == "not_claimed"
    assert len(smtp_server.received) == 1


def test_the_task_schedules_the_retry(mail_user, settings, monkeypatch, django_capture_on_commit_callbacks):
    """notify.deliver runs one attempt and sends itself again with the backoff as countdown."""
    from notify_app import tasks

    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", free_port()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    sent: list[dict[str, Any]] = []

    def record(args: Any = (), kwargs: Any = None, **options: Any) -> None:
        sent.append({"args": list(args), "countdown": options.get("countdown")})

    monkeypatch.setattr(tasks.deliver, "apply_async", record)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = _email_delivery(mail_user)
    assert tasks.deliver.apply(args=[delivery.pk, 0]).get() == "retry"
    # the first send (after the notification committed), then the retry with the backoff
    assert sent == [{"args": [delivery.pk, 0], "countdown": None}, {"args": [delivery.pk, 1], "countdown": 30.0}]


def test_backoff_doubles_up_to_the_cap(settings):
    settings.NOTIFY_RETRY_BASE_SECONDS, settings.NOTIFY_RETRY_MAX_SECONDS = 30, 100
    assert [backoff(n) for n in (1, 2, 3, 4)] == [30, 60, 100, 100]


def test_no_email_channel_without_smtp_settings_or_address(user, settings):
    settings.EMAIL_HOST = ""
    user.email = "alice@example.org"
    user.save()
    notification = notify(user_id=user.pk, kind=kinds.RECALL_FAILED, title="t")
    assert kinds.EMAIL not in {d.channel for d in notification.deliveries.all()}
    settings.EMAIL_HOST = "127.0.0.1"
    user.email = ""
    user.save()
    notification = notify(user_id=user.pk, kind=kinds.RECALL_FAILED, title="t")
    assert kinds.EMAIL not in {d.channel for d in notification.deliveries.all()}


def test_the_sweep_resends_a_delivery_whose_task_was_lost(mail_user, settings, monkeypatch):
    """A restart drops the in-memory broker's countdowns: the beat sweep sends what waited too long."""
    from datetime import timedelta

    from django.utils import timezone

    from notify_app import tasks

    settings.NOTIFY_RETRY_MAX_SECONDS = 60
    settings.EMAIL_HOST = "127.0.0.1"
    fresh, lost = _email_delivery(mail_user), _email_delivery(mail_user)
    Delivery.objects.filter(pk=lost.pk).update(attempts=2)
    Delivery.objects.filter(pk=lost.pk).update(updated_at=timezone.now() - timedelta(seconds=400))  # > 60 + 300
    sent: list[list[Any]] = []
    monkeypatch.setattr(tasks.deliver, "apply_async", lambda args=(), **kw: sent.append(list(args)))
    assert tasks.sweep.apply().get() == {"resent": 1}
    assert sent == [[lost.pk, 2]]
    assert fresh.pk not in [s[0] for s in sent]
