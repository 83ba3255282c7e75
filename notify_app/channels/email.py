"""E-mail through Django's e-mail framework (SMTP settings from the environment: EMAIL_HOST, …).

Available to a user with an e-mail address when EMAIL_HOST is set. Every SMTP or network failure
is a ``DeliveryRetry`` (the dispatcher retries with backoff) except a refused recipient address,
which retrying cannot fix.
"""
from __future__ import annotations

import smtplib
from typing import Any

from django.conf import settings
from django.core.mail import EmailMessage, get_connection

from notify_app.channels import ChannelStatus, DeliveryFailed, DeliveryGone, DeliveryRetry
from notify_app.kinds import EMAIL
from notify_app.links import absolute_url
from notify_app.models import Notification


class EmailChannel:
    name = EMAIL

    def status(self, user: Any) -> ChannelStatus:
        if not getattr(settings, "EMAIL_HOST", ""):
            return ChannelStatus(False, "The server has no SMTP settings: the administrator sets EMAIL_HOST.")
        if not getattr(user, "email", ""):
            return ChannelStatus(False, "Add your e-mail address above.")
        return ChannelStatus(True, f"To {user.email}")

    def send(self, notification: Notification, user: Any) -> None:
        state = self.status(user)
        if not state.available:
            raise DeliveryGone(state.detail)
        link = absolute_url(notification.url)
        body = "\n\n".join(part for part in (notification.body, f"Open it in Navi: {link}") if part)
        message = EmailMessage(
            subject=f"[Navi] {notification.title}"[:200],
            body=body,
            from_email=settings.DEFAULT_FROM_EMAIL,
            to=[user.email],
            headers={"Auto-Submitted": "auto-generated", "X-Navi-Notification": str(notification.pk)},
            connection=get_connection(timeout=settings.EMAIL_TIMEOUT),
        )
        try:
            message.send(fail_silently=False)
        except smtplib.SMTPRecipientsRefused as exc:
            codes = [code for code, _ in exc.recipients.values()]
            if all(500 <= code < 600 for code in codes):
                raise DeliveryFailed(f"the SMTP server refused {user.email}: {_first_reason(exc)}") from None
            raise DeliveryRetry(f"the SMTP server deferred {user.email}: {_first_reason(exc)}") from None
        except (TimeoutError, smtplib.SMTPException, OSError) as exc:
            raise DeliveryRetry(f"SMTP {settings.EMAIL_HOST}:{settings.EMAIL_PORT} failed: "
                                f"{type(exc).__name__}: {exc}") from None


def _first_reason(exc: smtplib.SMTPRecipientsRefused) -> str:
    for code, reason in exc.recipients.values():
        text = reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)
        return f"{code} {text}"
    return "refused"
