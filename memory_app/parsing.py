"""Strict validation of the extraction answer: the model's JSON is untrusted input."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, field_validator

from memory_app.normalize import MAX_KEY, MAX_VALUE, normalize_category, normalize_key
from memory_app.prompts import MAX_FACTS

MIN_CONFIDENCE = 0.3
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


class InvalidOutput(Exception):
    """The model's answer is not the JSON we asked for; ``str()`` says why."""


class _FactOut(BaseModel):
    model_config = ConfigDict(extra="ignore")
    category: StrictStr | None = "other"
    key: StrictStr
    value: StrictStr
    confidence: float = Field(default=0.8, allow_inf_nan=False)
    source: Any = None  # the [#N] of the stating message; anything unusable means "not given"

    @field_validator("value", mode="before")
    @classmethod
    def _scalar_value(cls, raw: Any) -> Any:
        # "age": 42 is a fine fact; a nested object is not.
        if isinstance(raw, bool | int | float):
            return str(raw)
        return raw


class _ForgetOut(BaseModel):
    model_config = ConfigDict(extra="ignore")
    category: StrictStr | None = "other"
    key: StrictStr


class _ExtractionOut(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[_FactOut] = Field(max_length=MAX_FACTS)
    forget: list[_ForgetOut] = Field(default_factory=list, max_length=MAX_FACTS)


@dataclass(frozen=True, slots=True, kw_only=True)
class FactCandidate:
    category: str
    key: str
    value: str
    confidence: float
    source: int | None = None  # the [#N] the model named; checked against the batch by the caller


@dataclass(frozen=True, slots=True, kw_only=True)
class Extraction:
    facts: tuple[FactCandidate, ...]
    forget: tuple[tuple[str, str], ...]


def _load_json(text: str) -> Any:
    cleaned = _FENCE.sub("", text.strip())
    try:
        return json.loads(cleaned)
    except ValueError as exc:
        raise InvalidOutput(f"not JSON ({exc.msg} at {exc.pos}): {text[:120]!r}") from None


def _candidate(item: _FactOut) -> FactCandidate | None:
    key = normalize_key(item.key)
    value = item.value.strip()
    if not key or len(key) > MAX_KEY or not value or len(value) > MAX_VALUE:
        return None
    confidence = min(1.0, max(0.0, item.confidence))
    if confidence < MIN_CONFIDENCE:
        return None
    return FactCandidate(category=normalize_category(item.category), key=key, value=value, confidence=confidence,
                         source=_source_number(item.source))


def _source_number(raw: Any) -> int | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and (digits := raw.strip().lstrip("#[").rstrip("]")).isdigit():
        return int(digits)
    return None


def parse_extraction(text: str) -> Extraction:
    """The usable facts and forget requests of an answer.

    Raises InvalidOutput for invalid JSON, a wrong shape or more than MAX_FACTS facts.
    Single unusable facts (empty or too long key or value, low confidence) are dropped.
    """
    data = _load_json(text)
    try:
        parsed = _ExtractionOut.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise InvalidOutput(f"wrong shape ({where or 'answer'}: {first.get('msg')})") from None
    facts: dict[tuple[str, str], FactCandidate] = {}
    for item in parsed.facts:
        candidate = _candidate(item)
        if candidate is not None:
            facts[(candidate.category, candidate.key)] = candidate
    forget = {(normalize_category(f.category), normalize_key(f.key)) for f in parsed.forget if normalize_key(f.key)}
    return Extraction(facts=tuple(facts.values()), forget=tuple(sorted(forget - set(facts))))
