"""Which matches are ranked (pure; both engines).

Ranking every match costs in proportion to the number of matches: a word found in half of 100 000
messages would be scored 50 000 times to show 20. The engines instead rank the newest
``RANKED_WINDOW`` matches of the user (both indexes hand out matches newest first cheaply) and show
them best first; older matches follow, newest first. A query with fewer matches than the window —
nearly every query with a specific word in it — is ranked whole. For a common word, recency is what
decides anyway: of two equally good hits, a personal agent's user wants last week's.

Paging is consistent: the order is fixed (the ranked window, then the rest by age), and a page that
straddles the window's end is read from both parts.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RANKED_WINDOW = 500


@dataclass(frozen=True, slots=True)
class Page:
    ranked: bool  # True: positions within the ranked window; False: positions among all matches, newest first
    limit: int
    offset: int


def pages(*, limit: int, offset: int, window: int = RANKED_WINDOW) -> list[Page]:
    """The reads that give positions [offset, offset + limit) of the order above."""
    reads = []
    if offset < window:
        reads.append(Page(True, min(limit, window - offset), offset))
    end = offset + limit
    if end > window:
        start = max(offset, window)
        reads.append(Page(False, end - start, start))
    return reads


def read_pages(cursor: Any, *, limit: int, offset: int, ranked: tuple[str, list[Any]], newest: tuple[str, list[Any]],
               higher_is_better: bool) -> list[tuple[int, float]]:
    """(message id, score) for positions [offset, offset + limit), best first. ``ranked`` and
    ``newest`` are each SQL and its leading parameters; a page's limit and offset follow them. The
    ranked SQL yields (id, rank) (rank negated unless ``higher_is_better``), the newest SQL (id,)
    with a score of 0."""
    found: list[tuple[int, float]] = []
    sign = 1.0 if higher_is_better else -1.0
    for page in pages(limit=limit, offset=offset):
        sql, params = ranked if page.ranked else newest
        cursor.execute(sql, [*params, page.limit, page.offset])
        found += [(int(row[0]), sign * float(row[1]) if page.ranked else 0.0) for row in cursor.fetchall()]
    return found
