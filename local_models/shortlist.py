"""A shortlist of tools by meaning: the request and each tool's description embedded with
all-MiniLM-L6-v2 (local_models/embedder.py), ranked by cosine similarity. No keyword and no example
sentence is involved: what a tool is for comes from its own description only.

Not wired into the agent loop yet: ``bench/tool_shortlist.py`` measures how well it picks the tool
of the broad suite's requests (docs/benchmarks.md, "Tool shortlist by meaning"), the step before
deciding whether a hint built from it is worth a place in the prompt.
"""
from __future__ import annotations

from typing import Any

from local_models.embedder import MiniLM


def tool_card(schema: dict[str, Any]) -> str:
    """What the embedding of a tool is made from: its name in words and its whole description."""
    function = schema.get("function") or {}
    return f"{str(function.get('name') or '').replace('_', ' ')}: {function.get('description') or ''}"


class ToolShortlist:
    def __init__(self, model: MiniLM, schemas: list[dict[str, Any]]) -> None:
        self.model = model
        self.names = [str((s.get("function") or {}).get("name")) for s in schemas]
        self.vectors = [model.embed_one(tool_card(s)) for s in schemas]

    def rank(self, text: str) -> list[tuple[str, float]]:
        """Every tool with its similarity to ``text`` (-1..1), best first."""
        query = self.model.embed_one(text)
        scored = [(name, float(query @ vector)) for name, vector in zip(self.names, self.vectors, strict=True)]
        return sorted(scored, key=lambda item: -item[1])
