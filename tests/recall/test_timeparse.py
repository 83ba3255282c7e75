"""parse_when / parse_interval: a table of accepted and refused inputs, including DST changes."""
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from recall_app.timeparse import WhenError, describe_delta, parse_interval, parse_when

# Saturday 2026-05-16 12:00 UTC.
NOW = datetime(2026, 5, 16, 12, 0, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


ACCEPTED = [
    # (when, timezone_offset, tz, now, expected UTC)
    ("30m", None, None, NOW, utc(2026, 5, 16, 12, 30)),
    ("45s", None, None, NOW, utc(2026, 5, 16, 12, 0, 45)),
    ("2h 15m", None, None, NOW, utc(2026, 5, 16, 14, 15)),
    ("2h15m", None, None, NOW, utc(2026, 5, 16, 14, 15)),
    ("1d", None, None, NOW, utc(2026, 5, 17, 12, 0)),
    ("1w", None, None, NOW, utc(2026, 5, 23, 12, 0)),
    ("in 3 hours", None, None, NOW, utc(2026, 5, 16, 15, 0)),
    ("in 90 minutes", None, None, NOW, utc(2026, 5, 16, 13, 30)),
    ("In 90 Minutes", None, None, NOW, utc(2026, 5, 16, 13, 30)),
    ("in an hour", None, None, NOW, utc(2026, 5, 16, 13, 0)),
    ("2 hours and 5 minutes", None, None, NOW, utc(2026, 5, 16, 14, 5)),
    ("1h, 30m", None, None, NOW, utc(2026, 5, 16, 13, 30)),
    ("1.5h", None, None, NOW, utc(2026, 5, 16, 13, 30)),
    ("  10   min ", None, None, NOW, utc(2026, 5, 16, 12, 10)),
    # counted from now, said the ways people (and models) say it
    ("now+3m", None, None, NOW, utc(2026, 5, 16, 12, 3)),
    ("now + 2 hours", None, None, NOW, utc(2026, 5, 16, 14, 0)),
    ("+45s", None, None, NOW, utc(2026, 5, 16, 12, 0, 45)),
    ("after 3 minutes", None, None, NOW, utc(2026, 5, 16, 12, 3)),
    ("5 minutes from now", None, None, NOW, utc(2026, 5, 16, 12, 5)),
    ("in 2 hours from now", None, None, NOW, utc(2026, 5, 16, 14, 0)),
    ("10 minutes later", None, None, NOW, utc(2026, 5, 16, 12, 10)),
    ("in three minutes", None, None, NOW, utc(2026, 5, 16, 12, 3)),
    ("twenty minutes", None, None, NOW, utc(2026, 5, 16, 12, 20)),
    ("in half an hour", None, None, NOW, utc(2026, 5, 16, 12, 30)),
    ("one hour and fifteen minutes", None, None, NOW, utc(2026, 5, 16, 13, 15)),
    ("tomorrow at 09:00", None, None, NOW, utc(2026, 5, 17, 9, 0)),
    ("tomorrow 9am", None, None, NOW, utc(2026, 5, 17, 9, 0)),
    ("9am tomorrow", None, None, NOW, utc(2026, 5, 17, 9, 0)),
    ("today at 18:30", None, None, NOW, utc(2026, 5, 16, 18, 30)),
    ("today 6:30 pm", None, None, NOW, utc(2026, 5, 16, 18, 30)),
    ("at 14:00", None, None, NOW, utc(2026, 5, 16, 14, 0)),
    # a bare time of day that has passed today means tomorrow
    ("at 11:00", None, None, NOW, utc(2026, 5, 17, 11, 0)),
    ("14:00", None, None, NOW, utc(2026, 5, 16, 14, 0)),
    ("noon", None, None, NOW, utc(2026, 5, 17, 12, 0)),
    ("midnight", None, None, NOW, utc(2026, 5, 17, 0, 0)),
    ("12am tomorrow", None, None, NOW, utc(2026, 5, 17, 0, 0)),
    ("monday at 17:00", None, None, NOW, utc(2026, 5, 18, 17, 0)),
    ("next monday 8am", None, None, NOW, utc(2026, 5, 18, 8, 0)),
    ("on friday at 9:30 pm", None, None, NOW, utc(2026, 5, 22, 21, 30)),
    # a weekday is today while its time is ahead, next week once it has passed
    ("saturday at 13:00", None, None, NOW, utc(2026, 5, 16, 13, 0)),
    ("saturday at 11:00", None, None, NOW, utc(2026, 5, 23, 11, 0)),
    # "next <weekday>" is never today
    ("next saturday at 13:00", None, None, NOW, utc(2026, 5, 23, 13, 0)),
    ("sun 10:00", None, None, NOW, utc(2026, 5, 17, 10, 0)),
    ("2026-05-16T14:00:00+02:00", None, None, utc(2026, 5, 16, 11, 0), utc(2026, 5, 16, 12, 0)),
    ("2026-05-17T14:00:00Z", None, None, NOW, utc(2026, 5, 17, 14, 0)),
    ("2026-05-17T14:00:00-05:00", "+09:00", None, NOW, utc(2026, 5, 17, 19, 0)),  # explicit offset wins
    ("2026-05-17 14:00", None, None, NOW, utc(2026, 5, 17, 14, 0)),  # no offset: UTC
    ("2026-05-17T14:00", "+02:00", None, NOW, utc(2026, 5, 17, 12, 0)),  # no offset: timezone_offset
    ("2026-05-17T14:00", "-0530", None, NOW, utc(2026, 5, 17, 19, 30)),
    ("2026-05-17T14:00", None, BERLIN, NOW, utc(2026, 5, 17, 12, 0)),  # no offset: tz
    ("tomorrow at 09:00", "+02:00", None, NOW, utc(2026, 5, 17, 7, 0)),
    ("tomorrow at 09:00", "+02:00", NEW_YORK, NOW, utc(2026, 5, 17, 7, 0)),  # offset wins over tz
    ("today at 18:30", "-04:00", None, NOW, utc(2026, 5, 16, 22, 30)),
    # local date differs from the UTC date: 23:30 UTC is already Sunday in Berlin
    ("tomorrow at 09:00", None, BERLIN, utc(2026, 5, 16, 23, 30), utc(2026, 5, 18, 7, 0)),
    # daylight saving: Berlin switches to CEST on 2026-03-29 and back to CET on 2026-10-25
    ("tomorrow at 09:00", None, BERLIN, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 7, 0)),
    ("tomorrow at 09:00", None, BERLIN, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 8, 0)),
    ("in 24 hours", None, BERLIN, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 12, 0)),
    ("1d", None, BERLIN, utc(2026, 10, 24, 12, 0), utc(2026, 10, 25, 12, 0)),
    ("sunday at 09:00", None, BERLIN, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 7, 0)),
    # a time in the spring-forward gap (02:30 does not exist) lands on a real instant
    ("tomorrow at 02:30", None, BERLIN, utc(2026, 3, 28, 12, 0), utc(2026, 3, 29, 1, 30)),
]


@pytest.mark.parametrize(("when", "offset", "tz", "now", "expected"), ACCEPTED, ids=[f"{c[0]}|{c[1]}|{c[2]}" for c in ACCEPTED])
def test_accepted(when: str, offset: str | None, tz: ZoneInfo | None, now: datetime, expected: datetime) -> None:
    result = parse_when(when, now=now, timezone_offset=offset, tz=tz)
    assert result == expected
    assert result.tzinfo is UTC


REFUSED = [
    ("", "empty"),
    ("   ", "empty"),
    ("soon", "do not understand"),
    ("later today", "do not understand"),
    ("30", "ambiguous"),
    ("-5m", "do not understand"),
    ("0m", "not a positive duration"),
    ("0s 0m", "not a positive duration"),
    ("30ms", "do not understand"),
    ("now", "do not understand"),
    ("+", "do not understand"),
    ("now+", "do not understand"),
    ("3 minutes ago", "do not understand"),
    ("from now", "do not understand"),
    ("now-3m", "do not understand"),
    ("tomorrow", "do not understand"),
    ("at 9", "ambiguous"),
    ("tomorrow 9", "ambiguous"),
    ("25:00", "not a valid time"),
    ("13:60", "not a valid time"),
    ("13pm", "not a valid hour"),
    ("blursday at 9am", "not a day"),
    ("next next monday 9am", "do not understand"),
    ("today at 09:00", "not in the future"),
    ("2026-01-01T00:00:00Z", "not in the future"),
    ("2026-05-16T12:00:00+00:00", "not in the future"),
    ("2026-05-20", "no time of day"),
    ("2026-13-40T10:00", "not a valid ISO"),
    ("99999999999d", "too far"),
]


@pytest.mark.parametrize(("when", "message"), REFUSED)
def test_refused(when: str, message: str) -> None:
    with pytest.raises(WhenError, match=message) as info:
        parse_when(when, now=NOW)
    assert info.value.status == 400


def test_errors_for_nonsense_list_the_accepted_forms() -> None:
    with pytest.raises(WhenError) as info:
        parse_when("whenever", now=NOW)
    assert "Accepted forms" in info.value.message and "tomorrow at 09:00" in info.value.message


@pytest.mark.parametrize("offset", ["2", "+2", "+25:00", "+02:75", "CEST", "02:00"])
def test_bad_timezone_offset(offset: str) -> None:
    with pytest.raises(WhenError, match="timezone_offset"):
        parse_when("tomorrow at 09:00", now=NOW, timezone_offset=offset)


def test_naive_now_is_a_bug() -> None:
    with pytest.raises(ValueError):
        parse_when("30m", now=datetime(2026, 5, 16, 12, 0))


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(300, 300), (60.0, 60), ("300", 300), ("5m", 300), ("1h 30m", 5400), ("every 2h", 7200), (" 90 s ", 90)],
)
def test_parse_interval(value: object, seconds: int) -> None:
    assert parse_interval(value) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [0, -5, "0", "x", True, 1.5, None, "", "5 parsecs"])
def test_parse_interval_refuses(value: object) -> None:
    with pytest.raises(WhenError):
        parse_interval(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("delta", "text"),
    [(1800, "in 30 minutes"), (8100, "in 2 hours 15 minutes"), (90061, "in 1 day 1 hour"), (0, "now"),
     (-300, "5 minutes ago")],
)
def test_describe_delta(delta: int, text: str) -> None:
    assert describe_delta(NOW + timedelta(seconds=delta), now=NOW) == text


GRAMMAR_FORMS = ["30m", "45s", "2h 15m", "1h30m", "in 3 hours", "in 90 minutes", "in an hour", "in three minutes",
                 "now+3m", "now + 2 hours", "+45s", "after 3 minutes", "5 minutes from now", "10 minutes later",
                 "2 hours and 5 minutes", "1h, 30m", "at 14:00", "14:00", "today at 18:30", "tomorrow at 09:00",
                 "tomorrow 9am", "9am tomorrow", "today 6:30 pm", "monday at 17:00", "next monday 8am",
                 "on friday at 9:30 pm", "noon", "midnight", "2026-05-17T14:00:00Z", "2026-05-17T14:00+02:00",
                 "2026-05-17T14:00"]


@pytest.mark.parametrize("when", GRAMMAR_FORMS)
def test_what_the_grammar_lets_a_model_write_is_read(when: str) -> None:
    import re

    from recall_app.timeparse import WHEN_PATTERN

    assert re.fullmatch(WHEN_PATTERN, when), when
    assert parse_when(when, now=NOW) > NOW


@pytest.mark.parametrize("when", ["0 0 * * *", "soon", "now", "3 minutes ago", "2026-11-25 14:30", "every hour",
                                  "tomorrow", "in a bit", "14", "25:00", "13pm", "PT3M"])
def test_the_grammar_rules_out_what_is_not_read(when: str) -> None:
    import re

    from recall_app.timeparse import WHEN_PATTERN

    assert not re.fullmatch(WHEN_PATTERN, when)
