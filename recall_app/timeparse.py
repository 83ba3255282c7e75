"""``parse_when``: the trigger times a model may write (spec 004 ``schedule_recall.when``).

Strict: a small grammar, no fuzzy guessing. Accepted forms (case-insensitive):

* durations from now: ``30m``, ``45s``, ``2h 15m``, ``1d``, ``1h30m``, ``in 3 hours``,
  ``in 90 minutes``, ``in an hour``, ``in three minutes``, ``half an hour``; marked as from now
  or not (``now+3m``, ``+3m``, ``after 3 minutes``, ``5 minutes from now``, ``10 minutes later``). Added to ``now`` as absolute time, so ``in 24 hours``
  is exactly 24 h even across a daylight-saving change.
* wall-clock times: ``[today|tomorrow|<weekday>|next <weekday>] [at] <time>`` (the day
  may also follow the time: ``9am tomorrow``); ``<time>`` is ``14:00``, ``9:05``,
  ``9am``, ``9:30 pm``, ``noon`` or ``midnight``. A bare time (``at 14:00``) that has
  passed today means tomorrow; ``today at ...`` in the past is an error. ``<weekday>``
  is its next occurrence, today included while the time is ahead; ``next <weekday>``
  is the first one after today.
* ISO 8601: ``2026-05-16T14:00:00+02:00``, ``...Z``; without an offset the time is local.

Local time is ``timezone_offset`` (``±HH:MM``) when given, else ``tz``, else UTC.
Wall-clock arithmetic happens in that zone, so ``tomorrow at 09:00`` in
Europe/Berlin is 09:00 Berlin time whatever the offset that day.
The result is an aware UTC datetime strictly after ``now``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo

from dateutil import parser as du_parser
from dateutil.relativedelta import relativedelta
from dateutil.relativedelta import weekday as du_weekday

from navi_site.errors import BadRequest

ACCEPTED_FORMS = (
    "Accepted forms: durations '30m', '45s', '2h 15m', '1d', 'in 3 hours', 'in 90 minutes'; "
    "clock times 'at 14:00', 'today at 18:30', 'tomorrow at 09:00', 'tomorrow 9am', 'monday at 17:00', "
    "'next monday 8am'; ISO 8601 with offset '2026-05-16T14:00:00+02:00' (without an offset, pass "
    "timezone_offset like '+02:00')."
)

_UNITS = {
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
    "w": 604800, "week": 604800, "weeks": 604800,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_ALIASES = {name[:3]: i for i, name in enumerate(_WEEKDAYS)} | {n: i for i, n in enumerate(_WEEKDAYS)}

_UNIT_RE = "|".join(sorted(_UNITS, key=len, reverse=True))
_PART = rf"(?:(\d+(?:\.\d+)?)\s*|(an?)\s+)({_UNIT_RE})(?![a-z])"
_DURATION_RE = re.compile(rf"^(?:in\s+)?(?:{_PART}(?:\s*,\s*|\s+and\s+|\s*))+$")
_PART_RE = re.compile(_PART)
_OFFSET_RE = re.compile(r"^([+-])(\d{2}):?(\d{2})$")
_TIME_RE = r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?(?::(?P<second>\d{2}))?\s*(?P<ampm>am|pm)?|(?P<word>noon|midnight)"
_DAY_RE = r"(?P<day>today|tomorrow|(?:next\s+|on\s+)?(?!at\b)[a-z]+)"
_CLOCK_RES = (
    re.compile(rf"^(?:{_DAY_RE}\s+)?(?:at\s+)?(?:{_TIME_RE})$"),
    re.compile(rf"^(?:at\s+)?(?:{_TIME_RE})\s+{_DAY_RE}$"),
)
_ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}")


class WhenError(BadRequest):
    """``when`` (or an interval) cannot be understood or is not in the future."""


def _fail(problem: str) -> WhenError:
    return WhenError(f"{problem} {ACCEPTED_FORMS}")


def parse_offset(value: str) -> tzinfo:
    """``±HH:MM`` (or ``±HHMM``, ``Z``, ``UTC``) as a fixed-offset tzinfo."""
    text = value.strip().upper()
    if text in {"Z", "UTC"}:
        return UTC
    match = _OFFSET_RE.match(text)
    if not match:
        raise WhenError(f"timezone_offset {value!r} is not valid: use ±HH:MM, for example '+02:00' or '-05:00'.")
    sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3))
    if hours > 14 or minutes >= 60:
        raise WhenError(f"timezone_offset {value!r} is out of range (-14:00 to +14:00).")
    delta = timedelta(hours=hours, minutes=minutes)
    return dt_timezone(-delta if sign == "-" else delta)


def _local_zone(timezone_offset: str | None, tz: ZoneInfo | None) -> tzinfo:
    if timezone_offset:
        return parse_offset(timezone_offset)
    return tz or UTC


_NUMBER_WORDS = {word: str(n) for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())} | {"thirty": "30", "forty": "40", "forty-five": "45",
                                                            "fifty": "50", "sixty": "60", "ninety": "90"}
_NUMBER_WORD_RE = re.compile(r"\b(" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True)) + r")\b")
# The forms above as one regular expression in the subset a grammar engine compiles (llama.cpp's
# json-schema-to-grammar: anchors, plain groups, classes, ?, *, +, {n,m}; no (?:) and no flags). A
# constrained call's grammar uses it (``GRAMMAR_PATTERN`` in the tool's schema), so a small model
# can only write a time this parser reads. Lower case: what models write; the parser accepts more.
_G_NUMBER = "([0-9]+|an?|" + "|".join(sorted((w for w in _NUMBER_WORDS if w != "zero"), key=len, reverse=True)) + ")"
_G_UNIT = f"({_UNIT_RE})"
_G_DURATION = f"(in |after |now ?[+] ?|[+])?{_G_NUMBER} ?{_G_UNIT}(,? (and )?{_G_NUMBER} ?{_G_UNIT}|{_G_NUMBER} ?{_G_UNIT})*( from now| later)?"
_G_DAY = f"(today|tomorrow|(next |on )?({'|'.join(_WEEKDAYS)}))"
_G_TIME = "(([01]?[0-9]|2[0-3]):[0-5][0-9]|(1[0-2]|0?[1-9])(:[0-5][0-9])? ?(am|pm)|noon|midnight)"
_G_CLOCK = f"({_G_DAY} )?(at )?{_G_TIME}( {_G_DAY})?"
_G_ISO = "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2})?(Z|[+-][0-9]{2}:[0-9]{2})?"
WHEN_PATTERN = f"^({_G_DURATION}|{_G_CLOCK}|{_G_ISO})$"

# How people and models mark a duration as counted from now: "now+3m", "+3m", "after 3 minutes",
# "3 minutes from now", "10 minutes later". The duration itself is the same grammar either way.
_FROM_NOW_PREFIX_RE = re.compile(r"^(?:now\s*\+\s*|\+\s*|after\s+)")
_FROM_NOW_SUFFIX_RE = re.compile(r"\s+(?:from\s+now|later|hence)$")


# Times said in free text (a request, not a 'when'): "in 3 minutes", "after two hours", "3 minutes from
# now", "ten minutes out", "every 2 hours", "every hour". The duration is this module's own grammar. A
# number word takes a unit in words ("an hour", "three minutes"), never a letter ("and" is no "an d").
_SAID_WORDS = "an?|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
# A number is read from its first digit, whole (``\d++``): a long run of digits is one try, not one per digit and
# length (``"once " + "1" * 10000`` took 8 s of the agent loop; the review of round 23).
_SAID_PART = (rf"(?:(?<![\d.])\d++(?:\.\d+)?\s*(?:{_UNIT_RE})|(?:{_SAID_WORDS})\s+(?:"
              + "|".join(sorted((u for u in _UNITS if len(u) > 1), key=len, reverse=True)) + "))(?![a-z])")
_SAID_DURATION = rf"{_SAID_PART}(?:(?:\s+and\s+|\s+){_SAID_PART})*"
# "3 minutes out" is said as "3 minutes from now" is (not "3 minutes out of 10", nor "takes 45 minutes from now on":
# the review of round 25); so is the time until
# something happens counted as passing: "once 3 minutes have passed", "when ten minutes are up", "after an hour
# has gone by" (the 1.5B set "Alert me to stretch my legs once 3 minutes have passed" for 09:00 the next day;
# round 23).
_SAID_ONCE_RE = re.compile(rf"\b(?:(?:once|when|after)\s+(?P<passed>{_SAID_DURATION})\s+(?:(?:have|has)\s+"
                           r"(?:passed|elapsed|gone\s+by|gone)|(?:is|are)\s+(?:up|over)|(?:pass(?:es)?|elapses?)"
                           r"(?!\s+(?:the|a|an|this|that|my|your|his|her|their|our|its|by|through|over|on|into)\b))"
                           r"(?!\s+since\b)"
                           rf"|(?:in|after)\s+(?P<lead>{_SAID_DURATION})|(?P<tail>{_SAID_DURATION})\s+"
                           r"(?:from\s+now(?!\s+on\b)|later|hence|out(?!\s+of\b)))\b")
# "every hour", "every 2 hours", "each hour", "every single day" (said for emphasis); not "every second
# week" (an ordinal), "every day of the trip", "every week's goals", "for each day" (one of several, not a
# repeat).
_SAID_EVERY_RE = re.compile(rf"\b(?:every|(?<!for )each)\s+(?:single\s+)?(?:(?P<span>{_SAID_DURATION})|(?P<unit>minute|hour|day|week)\b)"
                            r"(?!'s|\s+of\b)")
# The other everyday ways to say a repeat: "once an hour", "twice a day", "3 times a week", "every other
# day", and the adverb "hourly" / "daily" / "weekly" where it says how often something is done ("remind me
# hourly to drink", "remind me hourly that I should drink", "check it daily."), not where it names a kind of
# thing ("my hourly rate", "the weekly report", "before the daily.": a word follows that is not one of the few
# that go on a sentence after an adverb, or a determiner goes before it), nor a limit ("at most once a day").
# Not "bi-weekly", "twice-daily".
# Before a noun, the word is a repeat only where the noun is a thing a recall is ("an hourly reminder", "set
# up daily alarms", "an hourly recurring reminder"): "a daily summary" is a kind of report, which a request may want once; and not after a
# word that points at one already there ("cancel my weekly reminder", "read the daily alerts").
_SAID_SPAN_WORDS = "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_POINTED_AT = r"(?<!\bthe )(?<!\bmy )(?<!\bour )(?<!\byour )(?<!\bthis )(?<!\bthat )(?<!'s )"  # one already there
_COUNT = r"(?:once|twice|thrice|\d+\s+times|[a-z]+\s+times)"  # how many times
_LENGTH = rf"(?:\d+|{_SAID_SPAN_WORDS})[-\s](?:minute|hour|day|week)s?"  # a length said before a noun: "10-minute"
_COUNTED = r"(?<!\bonce )(?<!\btwice )(?<!\bthrice )(?<!\btimes )"  # how often is the count's ("at most twice daily")
_SAID_RATE_RE = re.compile(
    r"(?<![\w-])(?<!at most )(?<!than )(?<!up to )"
    # how many times, then the adverb: "twice daily" is every 12 hours (it was read as daily; round 24)
    rf"(?:(?P<count_ly>{_COUNT})\s+(?P<per_ly>hourly|daily|weekly)(?![\w-])|"
    rf"(?P<count>{_COUNT})\s+(?:a|an|per|each|every)\s+"
    r"(?P<per>minute|hour|day|week)(?![\w-])(?!\s+(?:has|have|had)\s+(?:passed|elapsed|gone)|\s+(?:is|was)\s+(?:up|over)|\s+(?:pass(?:es|ed)?|elapse[sd]?)\b|\s+went\s+by|'s\s+gone)|every\s+other\s+(?P<other>minute|hour|day|week)(?![\w-])|"
    rf"(?<!\ba )(?<!\ban ){_POINTED_AT}{_COUNTED}"
    r"(?P<adverb>hourly|daily|weekly)(?=\s*(?:$|[,.;:!?)]|(?:to|that|at|from|until|till|starting|and|please|for|on|then)"
    r"\b(?!-)))|"
    # how long what it is about lasts, between how often and the reminder: "a daily 10-minute reminder" (it was
    # read as one reminder in 10 minutes; round 24); the length is part of the match, no one-off of its own. With
    # what it is about between too, only for one thing asked for ("a daily 10-minute stretch reminder"; not "turn
    # off daily 10-minute stretch alarms"), as ``kind_of``
    rf"(?<!\bthese )(?<!\bthose ){_POINTED_AT}(?P<kind_long>hourly|daily|weekly)\s+{_LENGTH}"
    r"[-\s](?=(?:reminders?|alarms?|alerts?|nudges?|pings?|notifications?"
    r"|check-?ins?|timers?)\b(?!-))|"
    rf"(?:(?<=\ba )|(?<=\ban ))(?P<kind_long_of>hourly|daily|weekly)\s+{_LENGTH}"
    r"[-\s](?=(?:[a-z]+(?:-[a-z]+)*\s+){1,2}"
    r"(?:reminder|alarm|alert|nudge|ping|notification|check-?in|timer)\b(?!-))|"
    rf"(?<!\bthese )(?<!\bthose ){_POINTED_AT}{_COUNTED}"
    r"(?P<kind>hourly|daily|weekly)(?=\s+(?:(?:recurring|repeating|regular)\s+)?"
    r"(?:reminders?|alarms?|alerts?|nudges?|pings?|notifications?|check-?ins?)\b(?!-))|"
    # what it is about between, for one thing asked for: "an hourly drink-water reminder", "a daily pill alarm"
    # (the 1.5B set the first once; round 23); not "cancel weekly newsletter alerts", "turn off hourly battery alerts"
    r"(?<=\ba )(?P<kind_of>hourly|daily|weekly)(?=\s+(?:[a-z]+(?:-[a-z]+)*\s+){1,2}"
    r"(?:reminder|alarm|alert|nudge|ping|notification|check-?in)\b(?!-))|"
    r"(?<=\ban )(?P<kind_of_an>hourly|daily|weekly)(?=\s+(?:[a-z]+(?:-[a-z]+)*\s+){1,2}"
    r"(?:reminder|alarm|alert|nudge|ping|notification|check-?in)\b(?!-)))")
# A one-off said as the length before a thing a recall is: "a 3-minute reminder", "a ten minute timer";
# not one already there ("cancel the 10-minute reminder"), nor a length after how often ("a daily 10-minute
# reminder": the rate's, ``kind_long``).
_SAID_KIND_ONCE_RE = re.compile(rf"(?<![\w-]){_POINTED_AT}(?<!\bhourly )(?<!\bdaily )(?<!\bweekly )(?<!\bto )(?<!\bor )"
                                rf"(?P<span>{_LENGTH})[-\s]"
                                r"(?=(?:reminders?|alarms?|alerts?|nudges?|pings?|notifications?|timers?)\b)")
_ADVERB_UNITS = {"hourly": "hour", "daily": "day", "weekly": "week"}
_COUNT_WORDS = {"once": 1, "twice": 2, "thrice": 3}
# Any number with a unit, wherever it stands ("30 minutes before", "an hour and a half").
_ANY_DURATION_RE = re.compile(_SAID_PART)
# What makes a time said relative to something else, or only part of one.
_QUALIFIED_RE = re.compile(r"\s*(?:and\s+a\s+half|or\b|before\b|after\b|earlier\b|ago\b|early\b|late\b)")


SAID_MAX_CHARS = 2000


@dataclass(frozen=True, slots=True)
class SaidTimes:
    """The relative times a text says: one-off ("in 3 minutes") and repeats ("every hour"), each as
    (the words, seconds). ``plain``: every number with a unit in the text is one of them, and none is
    qualified ("an hour and a half", "30 minutes before the call"): only then do they say it all."""

    once: tuple[tuple[str, int], ...]
    every: tuple[tuple[str, int], ...]
    plain: bool = True


# Words that say when in any way this grammar may not read ("later", "in a bit", "next week", "whenever it rains"),
# and numbers shaped as times ("at 5", "5pm", "17:30", "the 3rd", "10min"); not any number ("invoice 2567").
_WHEN_WORDS_RE = re.compile(
    r"\b(?:later|soon|now|bit|moment|shortly|asap|sometime|someday|eventually|awhile|some point|tonight|today|"
    r"tomorrow|morning|afternoon|evening|night|noon|midnight|weekends?|weeks?|months?|years?|days?|hours?|minutes?|seconds?|hourly|daily|weekly|monthly|yearly|annually|every|each|"
    r"once|twice|next|until|till|after|before|o'?clock|when|whenever|while|during|"
    rf"{'|'.join(_WEEKDAYS)}|january|february|march|april|may|june|july|august|september|october|november|"
    r"december)\b|\b(?:at|by|on|from|in|until|till)\s+\d|\d{1,2}(?::\d{2}|\s*[ap]\.?m\b)|\d{4}-\d{2}|"
    r"\d+(?:st|nd|rd|th|h|hrs?|mins?|s|secs?)\b")


def says_when(text: str) -> bool:
    """The text says a time in some way: a word of when, a number shaped as a time (``said_times`` reads only
    some of them)."""
    return bool(_WHEN_WORDS_RE.search(str(text or "").lower()))


def said_times(text: str) -> SaidTimes:
    """The relative times said in free text (``SaidTimes``), read with this module's duration grammar. A text
    longer than ``SAID_MAX_CHARS`` is not read (nothing said, not ``plain``): a pasted page is no request a time
    grammar should correct, and its regular expressions grow with the square of such a text."""
    said = " ".join(str(text or "").lower().split())
    if len(said) > SAID_MAX_CHARS:
        return SaidTimes(once=(), every=(), plain=False)
    every: list[tuple[str, int]] = []
    plain = True
    for match in _SAID_RATE_RE.finditer(said):
        seconds = _rate_seconds(match)
        if seconds is None:
            plain = False  # "ten times a minute": a rate no recall keeps, or no count at all
        else:
            every.append((match.group(0), seconds))
    unrated = _SAID_RATE_RE.sub(" ", said)  # "once every hour" is one repeat, not two
    for match in _SAID_EVERY_RE.finditer(unrated):
        seconds = parse_duration(match.group("span")) if match.group("span") else _UNITS[match.group("unit")]
        plain = plain and not _QUALIFIED_RE.match(unrated, match.end())
        if seconds:
            every.append((match.group(0), seconds))
    rest = _SAID_EVERY_RE.sub(" ", unrated)
    once = []
    for match in _SAID_KIND_ONCE_RE.finditer(rest):
        seconds = parse_duration(match.group("span").replace("-", " "))
        if seconds:
            once.append((match.group("span"), seconds))
    rest = _SAID_KIND_ONCE_RE.sub(" ", rest)
    for match in _SAID_ONCE_RE.finditer(rest):
        seconds = parse_duration(match.group("passed") or match.group("lead") or match.group("tail") or "")
        plain = plain and not _QUALIFIED_RE.match(rest, match.end())
        if seconds:
            once.append((match.group(0), seconds))
    counted = sum(len(_ANY_DURATION_RE.findall(words)) for words, _ in [*once, *every]) + sum(
        1 for m in _SAID_EVERY_RE.finditer(said) if m.group("unit"))
    plain = plain and len(_ANY_DURATION_RE.findall(said)) + sum(
        1 for m in _SAID_EVERY_RE.finditer(said) if m.group("unit")) == counted
    return SaidTimes(once=tuple(once), every=tuple(every), plain=plain)


def _rate_seconds(match: re.Match[str]) -> int | None:
    """The interval a repeat said as a rate means, in whole minutes ("twice a day": every 12 hours); None
    for no count ("zero times a day") or an interval under a minute."""
    adverb = (match.group("adverb") or match.group("kind") or match.group("kind_long") or match.group("kind_long_of")
              or match.group("kind_of") or match.group("kind_of_an"))
    if adverb:
        return _UNITS[_ADVERB_UNITS[adverb]]
    if match.group("other"):
        return 2 * _UNITS[match.group("other")]
    count = (match.group("count") or match.group("count_ly")).split()[0]
    times = int(count) if count.isdigit() else _COUNT_WORDS.get(count) or int(_NUMBER_WORDS.get(count, "0"))
    if times < 1:
        return None
    per = match.group("per") or _ADVERB_UNITS[match.group("per_ly")]
    seconds = round(_UNITS[per] / times / 60) * 60
    return seconds if seconds >= 60 else None


def parse_duration(text: str) -> int | None:
    """Seconds of a duration like ``2h 15m`` / ``in 90 minutes`` / ``three minutes from now``;
    None if ``text`` is not one."""
    text = " ".join(text.strip().lower().split())
    text = _FROM_NOW_SUFFIX_RE.sub("", _FROM_NOW_PREFIX_RE.sub("", text))
    text = _NUMBER_WORD_RE.sub(lambda m: _NUMBER_WORDS[m.group(1)], text.replace("half an hour", "30 minutes"))
    if not text or not _DURATION_RE.match(text):
        return None
    total = 0.0
    for amount, article, unit in _PART_RE.findall(text):
        total += (1.0 if article else float(amount)) * _UNITS[unit]
    return round(total) if math.isfinite(total) else None  # a number of 400 digits is no duration


def _clock_time(match: re.Match[str]) -> time:
    word = match.group("word")
    if word:
        return time(12) if word == "noon" else time(0)
    hour, ampm = int(match.group("hour")), match.group("ampm")
    minute, second = int(match.group("minute") or 0), int(match.group("second") or 0)
    if ampm is None and match.group("minute") is None:
        raise _fail(f"'{match.group(0)}' is ambiguous: write the time as HH:MM (e.g. 09:00) or with am/pm.")
    if ampm:
        if not 1 <= hour <= 12:
            raise _fail(f"'{hour}{ampm}' is not a valid hour.")
        hour = hour % 12 + (12 if ampm == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise _fail(f"'{match.group(0)}' is not a valid time of day.")
    return time(hour, minute, second)


def _day(day: str | None, today: date, at: time, local_now: datetime) -> tuple[date, bool]:
    """The date a day word means, and whether a past time may roll over to the next day."""
    if day is None:
        return today, True
    if day == "today":
        return today, False
    if day == "tomorrow":
        return today + timedelta(days=1), False
    words = day.split()
    strict_next = words[0] == "next"
    name = words[-1] if words[0] in {"next", "on"} else day
    if name not in _WEEKDAY_ALIASES or (len(words) > 1 and len(words) != 2):
        raise _fail(f"'{day}' is not a day I understand (today, tomorrow, monday, next friday).")
    target = _WEEKDAY_ALIASES[name]
    start = today + timedelta(days=1) if strict_next else today
    found = start + relativedelta(weekday=du_weekday(target))
    if found == today and at <= local_now.time():
        found += timedelta(days=7)
    return found, False


def _localize(naive: datetime, zone: tzinfo) -> datetime:
    if isinstance(zone, ZoneInfo):
        # Round-trip through UTC so a time in the spring-forward gap lands on a real instant.
        return naive.replace(tzinfo=zone).astimezone(UTC).astimezone(zone)
    return naive.replace(tzinfo=zone)


def _parse_clock(text: str, *, now: datetime, zone: tzinfo) -> datetime | None:
    for pattern in _CLOCK_RES:
        match = pattern.match(text)
        if match:
            break
    else:
        return None
    at = _clock_time(match)
    local_now = now.astimezone(zone)
    day, rolls = _day(match.group("day"), local_now.date(), at, local_now)
    result = _localize(datetime.combine(day, at), zone)
    if result <= now and rolls:
        result = _localize(datetime.combine(day + timedelta(days=1), at), zone)
    return result


def _parse_iso(text: str, *, zone: tzinfo) -> datetime:
    if len(text) == 10:
        raise _fail(f"'{text}' has no time of day: write e.g. '{text}T09:00:00+02:00'.")
    try:
        value = du_parser.isoparse(text.upper().replace(" ", "T", 1))
    except (ValueError, OverflowError):
        raise _fail(f"'{text}' is not a valid ISO 8601 time.") from None
    return value if value.tzinfo else _localize(value, zone)


def parse_when(
    when: str, *, now: datetime, timezone_offset: str | None = None, tz: ZoneInfo | None = None,
    allow_past: bool = False,
) -> datetime:
    """The aware UTC instant ``when`` means, relative to ``now``.

    Raises WhenError (a BadRequest whose message lists the accepted forms) for text it
    does not understand, a bad ``timezone_offset`` and any time not after ``now`` (unless
    ``allow_past``: a recurring schedule's anchor).
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    text = " ".join(str(when or "").strip().lower().split())
    if not text:
        raise _fail("'when' is empty.")
    zone = _local_zone(timezone_offset, tz)
    try:
        seconds = parse_duration(text)
        if seconds is not None:
            if seconds <= 0:
                raise _fail(f"'{when}' is not a positive duration.")
            result = now + timedelta(seconds=seconds)
        elif _ISO_RE.match(text):
            result = _parse_iso(text, zone=zone)
        else:
            parsed = _parse_clock(text, now=now, zone=zone)
            if parsed is None:
                raise _fail(f"I do not understand when={when!r}.")
            result = parsed
    except OverflowError:
        raise _fail(f"'{when}' is too far in the future.") from None
    result = result.astimezone(UTC)
    if result <= now and not allow_past:
        raise WhenError(
            f"when={when!r} is {result.isoformat()}, which is not in the future (now is "
            f"{now.astimezone(UTC).isoformat()}). Give a future time, e.g. '30m' or 'tomorrow at 09:00'."
        )
    return result


def parse_interval(value: int | float | str | None) -> int:
    """Seconds of an interval given as a number or a duration string (``300``, ``"5m"``, ``"every 2h"``).

    Raises WhenError for anything that is not a positive whole number of seconds.
    """
    if isinstance(value, bool) or value is None:
        raise WhenError("interval_seconds must be a positive number of seconds, e.g. 300 or '5m'.")
    if isinstance(value, int | float):
        seconds = int(value)
        if seconds != value or seconds <= 0:
            raise WhenError(f"interval_seconds={value!r} must be a positive whole number of seconds.")
        return seconds
    text = " ".join(str(value).strip().lower().split())
    if text.startswith("every "):
        text = text[6:]
    if text.isdigit():
        seconds = int(text)
    else:
        parsed = parse_duration(text)
        if parsed is None:
            raise WhenError(f"interval_seconds={value!r} is not a duration: use seconds (300) or '5m', '1h 30m'.")
        seconds = parsed
    if seconds <= 0:
        raise WhenError(f"interval_seconds={value!r} must be positive.")
    return seconds


def describe_delta(target: datetime, *, now: datetime) -> str:
    """``in 30 minutes`` / ``in 2 hours 15 minutes`` / ``5 minutes ago`` / ``now``: for tool confirmations."""
    seconds = int(round((target - now).total_seconds()))
    if abs(seconds) >= 60:  # whole minutes: "in 20 minutes", not "in 19 minutes 59 seconds"
        seconds = int(round(seconds / 60)) * 60
    if seconds == 0:
        return "now"
    rest, parts = abs(seconds), []
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        count, rest = divmod(rest, size)
        if count:
            parts.append(f"{count} {unit}{'s' if count != 1 else ''}")
        if len(parts) == 2:
            break
    return f"in {' '.join(parts)}" if seconds > 0 else f"{' '.join(parts)} ago"
