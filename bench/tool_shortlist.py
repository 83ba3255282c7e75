"""How well a shortlist by meaning picks the tool of an everyday request (issue 24, step 2).

    .venv/bin/python manage.py real_model setup          # also unpacks all-MiniLM-L6-v2 into the cache
    .venv/bin/python bench/tool_shortlist.py --half dev  [--cards first]

For every request of the broad suite's half (tests/realmodel/broad.py), the tools of the
``local_small`` profile are ranked by the cosine similarity of the request's embedding and each
tool's description (local_models/shortlist.py). Prints the top three per request, how often the
intended tool is first and among the first two, and the best score of the requests that need no
tool against the lowest top score of those that need one (could a threshold tell them apart?).
No language model is involved: this measures the shortlist alone, in about a second per request.
``--cards first`` uses only the first sentence of each description (what the prompt budget keeps).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.realmodel.broad import HALVES  # noqa: E402  (the halves grow a fresh one each round)

# The broad suite's own labels: which tool each intent needs (None: an answer in words).
WANTED = {"greeting": None, "plain_question": None, "date_time": "get_current_datetime", "read_file": "filesystem",
          "file_question": "filesystem", "write_file": "filesystem", "note": "user_notes", "remember": "memory_save",
          "remind_once": "schedule_recall", "remind_every": "schedule_recall", "todo": "todo",
          "subagent": "spawn_agent"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--half", default="dev", choices=[*HALVES, "both", "all"])
    parser.add_argument("--cards", default="full", choices=["full", "first"])
    parser.add_argument("--cache", default=None)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")
    import django

    django.setup()
    from agent.decide import first_sentence
    from local_models import catalog, weights
    from local_models.embedder import MiniLM
    from local_models.profile import TOOLS
    from local_models.shortlist import ToolShortlist
    from tests.realmodel.broad import tasks
    from tools_app.registry import get_registry

    folder = weights.ensure_embedder(catalog.EMBEDDER, catalog.cache_dir(args.cache), echo=lambda _: None)
    schemas = get_registry().schemas(TOOLS)
    if args.cards == "first":
        schemas = [{**s, "function": {**s["function"], "description": first_sentence(s["function"]["description"])}}
                   for s in schemas]
    shortlist = ToolShortlist(MiniLM(folder), schemas)
    top1 = top2 = needed = 0
    none_best: list[float] = []
    tool_top: list[float] = []
    started = time.monotonic()
    chosen = tasks(args.half)
    for task in chosen:
        ranked = shortlist.rank(task.text.replace("{v}", "4711"))
        want = WANTED[task.intent]
        shown = ", ".join(f"{n} {s:.2f}" for n, s in ranked[:3])
        if want is None:
            none_best.append(ranked[0][1])
            print(f"{task.name:18} (no tool)              {shown}")
            continue
        needed += 1
        tool_top.append(ranked[0][1])
        first, second = ranked[0][0] == want, want in (ranked[0][0], ranked[1][0])
        top1 += first
        top2 += second
        print(f"{task.name:18} {want:22} {'1st' if first else '2nd' if second else '---'}  {shown}")
    print(f"\n{args.half} half, cards={args.cards}: intended tool first {top1}/{needed}, among the first two "
          f"{top2}/{needed}; best score of no-tool requests {max(none_best):.2f}, lowest top score of tool "
          f"requests {min(tool_top):.2f}; {(time.monotonic() - started) / len(chosen):.2f} s per request")


if __name__ == "__main__":
    main()
