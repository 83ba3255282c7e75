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
