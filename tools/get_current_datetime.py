"""User tool: the current date and time (spec 002 "Current user tools")."""
import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from agent.ports import SUMMARY
from tools_app.base import ToolError, ToolResult

name = "get_current_datetime"
description = (
    "Get the current date and time. Returns UTC in ISO 8601 with the weekday and, if you pass 'timezone' "
    "(an IANA name such as Europe/Berlin or America/New_York), the local date and time there too. Use it "
    "whenever the answer depends on today's date, the time, or the day of the week."
)
parameters = {
    "type": "object",
    "properties": {
        "timezone": {
            "type": "string",
            "description": "IANA time zone name, e.g. Europe/Berlin, Asia/Tokyo, America/New_York.",
        },
    },
}


def _zone(zone_name: str) -> ZoneInfo:
    try:
        return ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {zone_name!r}: use an IANA name such as Europe/Berlin or America/New_York"
        ) from None


async def execute(params: dict) -> ToolResult:
    now = datetime.now(UTC)
    lines = [f"UTC: {now.isoformat(timespec='seconds')} ({now:%A})"]
    said = [f"It is {_in_words(now)} UTC."]
    zone_name = (params.get("timezone") or "").strip()
    local = now.astimezone(_zone(zone_name)) if zone_name else None
    if local is not None and local.tzname() != "UTC":  # asked for UTC itself: the first line says it all
        offset = local.strftime("%z")
        lines.append(
            f"{zone_name}: {local.isoformat(timespec='seconds')} ({local:%A}, UTC{offset[:3]}:{offset[3:]})"
        )
        said.append(f"In {zone_name.rsplit('/', 1)[-1].replace('_', ' ')} it is {_in_words(local)}.")
    # What the user reads if a small model gives no answer in words (``agent.ports.SUMMARY``).
    return ToolResult(success=True, output="\n".join(lines), metadata={SUMMARY: " ".join(said)})


def _in_words(moment: datetime) -> str:
    return f"{moment:%H:%M} on {moment:%A}, {moment.day} {moment:%B %Y}"


# What this tool answers, in the words people ask it with: the time, the date, the day, how long until or
# since. A small model calls the clock for a greeting or a question the memory answers ("What is my server
# called?") and copies its output as the answer; a request with none of these words, and no place the call's
# zone names, is doubted (``doubt``). Not among them: the parts of the day (morning, evening, night), which
# greet far more often than they ask the time ("Evening, Navi!" got the clock, round 17), and a four-digit
# number outside 1000-2199, which is no year but a code or an amount (the note "invoice 3811, the plumber
# needs a call" got the clock).
_WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_TIME_WORDS = re.compile(
    r"\b(?:times?|timezones?|dates?|days?|today'?s?|tonight|tomorrow|yesterday|weekends?|weekdays?|weeks?|"
    r"months?|years?|hours?|minutes?|seconds?|o'?clock|clocks?|now|midnight|"
    r"noon|calendar|when|until|till|since|ago|late|early|age|old|utc|gmt|dst|deadline|due|season|"
    rf"{_WEEKDAYS}|{_MONTHS}|"
    r"\d{1,2}(?::\d{2}|\s*[ap]\.?m\b)|(?:1\d|2[01])\d\d)\b|[\u3040-\u30ff\u3400-\u9fff]",  # CJK: no word boundaries to go by
    re.IGNORECASE)


def doubt(params: dict, request: str) -> str | None:
    """Why this call may not be what the user asked for: their words say nothing of a date or a time, and
    the zone asked for is no place they named. None when they do (or the request is not known)."""
    if not request.strip() or _TIME_WORDS.search(request):
        return None
    zone = str(params.get("timezone") or "").strip()
    place = zone.rsplit("/", 1)[-1].replace("_", " ").lower()
    if place and place in request.lower():
        return None
    return ("The user's message says nothing about a date or a time, so get_current_datetime was not run. "
            "Call it again only if the user does want the date or the time.")
