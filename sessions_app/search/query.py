"""What a search box's text means, and the snippet shown for a hit (pure; no database).

A query is a list of words: letters and digits, everything else is a separator. Operators of the
engines (quotes, ``*``, ``-``, ``NEAR``, ``AND``/``OR``, parentheses, ``:``) are never passed on:
"NEAR" is the word "near", ``-foo`` is "foo". Every word must occur (AND). A word of three or more
characters matches as a prefix ("backup" finds "backups"); a shorter one matches only itself ("ok",
"db"): as a prefix it would stand for a good part of the vocabulary and find nearly every message.
Both tiers alike.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from navi_site.errors import BadRequest

MAX_QUERY_CHARS = 500
MAX_TERMS = 12
SNIPPET_CHARS = 180
MIN_PREFIX_CHARS = 3  # the FTS5 table has a prefix index of this length (schema.py)

_WORD = re.compile(r"[^\W_]+")


def terms(q: str) -> list[str]:
    """The words of a query, lowercased, deduplicated, in order. Raises BadRequest for a query
    that is too long or has no word in it."""
    if len(q) > MAX_QUERY_CHARS:
        raise BadRequest(f"The search is too long ({len(q)} characters): use at most {MAX_QUERY_CHARS}.")
    words: list[str] = []
    for word in _WORD.findall(q.lower()):
        if word not in words:
            words.append(word)
    if not words:
        raise BadRequest("Type a word to search for: the search has no letters or digits in it.")
    return words[:MAX_TERMS]


def is_prefix(word: str) -> bool:
    return len(word) >= MIN_PREFIX_CHARS


def fts5_query(words: list[str]) -> str:
    """SQLite FTS5: each word quoted (a prefix if ``is_prefix``), all required."""
    return " ".join('"' + w.replace('"', '""') + '"' + ("*" if is_prefix(w) else "") for w in words)


def tsquery(words: list[str]) -> str:
    """PostgreSQL ``to_tsquery`` (raw): each word a quoted lexeme (a prefix if ``is_prefix``), all required."""
    return " & ".join("'" + w.replace("'", "''").replace("\\", "\\\\") + "'" + (":*" if is_prefix(w) else "")
                      for w in words)


@dataclass(frozen=True, slots=True, kw_only=True)
class Snippet:
    text: str
    highlights: list[tuple[int, int]]  # [start, end) offsets into text


def _pattern(words: list[str]) -> re.Pattern[str]:
    # A word of the text that starts with a query word, or is a short query word (as the engines match).
    alternatives = "|".join(re.escape(w) + (r"[^\W_]*" if is_prefix(w) else r"(?![^\W_])")
                            for w in sorted(words, key=len, reverse=True))
    return re.compile(rf"(?<![^\W_])(?:{alternatives})", re.IGNORECASE)


def snippet(text: str | None, words: list[str], *, width: int = SNIPPET_CHARS) -> Snippet:
    """The stretch of ``text`` around its densest group of matches, one line, with the offsets
    of every match in it. Never longer than ``width`` plus two ellipses."""
    flat = " ".join((text or "").split())
    if not flat:
        return Snippet(text="", highlights=[])
    found = []
    for m in _pattern(words).finditer(flat):  # a bounded number: a long tool output may match thousands of times
        found.append((m.start(), m.end()))
        if len(found) >= 200:
            break
    if not found:
        cut = flat[:width]
        return Snippet(text=cut + ("…" if len(flat) > width else ""), highlights=[])
    # The window (from one of the first matches) that holds the most distinct words, then the most
    # matches: two pointers over the sorted matches, so a word repeated thousands of times is cheap.
    which = [next((i for i, w in enumerate(words) if flat[s:e].lower().startswith(w)), 0) for s, e in found]
    best_start, best_score, j = found[0][0], -1, 0
    for i, (start, _) in enumerate(found[:60]):
        j = max(j, i)
        while j < len(found) and found[j][1] <= start + width:
            j += 1
        score = len(set(which[i:j])) * 1000 + (j - i)
        if score > best_score:
            best_start, best_score = start, score
    begin = max(0, best_start - width // 4)
    if begin > 0:  # start at a word boundary
        space = flat.rfind(" ", 0, begin)
        begin = space + 1 if space >= 0 and best_start - space <= width // 2 else begin
    end = min(len(flat), begin + width)
    if end < len(flat):
        space = flat.rfind(" ", begin, end)
        end = space if space > best_start else end
    prefix = "…" if begin > 0 else ""
    suffix = "…" if end < len(flat) else ""
    shift = len(prefix) - begin
    marks = [(s + shift, min(e, end) + shift) for s, e in found if s >= begin and s < end]
    return Snippet(text=prefix + flat[begin:end] + suffix, highlights=marks)
