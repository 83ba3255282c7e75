"""The compact JSON of events: WebSocket frames, the replay logs.

orjson on the per-token path (~20x faster than json for these small objects); json where
orjson refuses (non-string keys, integers beyond 64 bits, lone surrogates). The fallback
escapes non-ASCII, so even a lone surrogate gives bytes that are valid UTF-8.
"""
from __future__ import annotations

import json
from typing import Any

import orjson


def dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        return json.dumps(value, separators=(",", ":")).encode()


def loads(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:  # an escaped lone surrogate
        return json.loads(data)
