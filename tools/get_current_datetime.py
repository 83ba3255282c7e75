"""User tool: the current date and time (spec 002 "Current user tools")."""
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tools_app.base import ToolError

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


async def execute(params: dict) -> str:
    now = datetime.now(UTC)
    lines = [f"UTC: {now.isoformat(timespec='seconds')} ({now:%A})"]
    zone_name = (params.get("timezone") or "").strip()
    local = now.astimezone(_zone(zone_name)) if zone_name else None
    if local is not None and local.tzname() != "UTC":  # asked for UTC itself: the first line says it all
        offset = local.strftime("%z")
        lines.append(
            f"{zone_name}: {local.isoformat(timespec='seconds')} ({local:%A}, UTC{offset[:3]}:{offset[3:]})"
        )
    return "\n".join(lines)
