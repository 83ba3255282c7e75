"""What skills cost in the system prompt: tokens added per 20 skills, and the time to build the block.

    .venv/bin/python bench/skills_prompt.py            # 20 skills (and 1, 5, 50 for the curve)

Twenty realistic home-use skills (descriptions 120-420 characters, like the bundled ones and the
spec's examples) are written into a temporary SKILLS_DIR; the real ContextBuilder builds the system
prompt of a profile with none of them and with all of them enabled, through the real skills port.
Tokens are counted twice: Navi's own estimate (UTF-8 bytes / 4, what SKILLS_PROMPT_MAX_TOKENS is
checked against) and, when the small local model's GGUF file is there (``manage.py real_model
setup``), its real tokenizer (Qwen2.5, read from the GGUF with the ``tokenizers`` library).
Then it times ``prompt_block`` as the loop calls it (every model call: cached) and after a change
(the store re-read).
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "navi_site.settings")

DESCRIPTIONS = [
    "Weekly health check of a Linux home server: disk, memory, load, failed services and updates. Use when the user asks how a server is doing.",
    "Summarise the unread newsletters in the user's inbox folder into five bullet points with links. Use when the user asks what is new in their newsletters.",
    "Plan the week's dinners from what is in the fridge and the family's preferences, then write a shopping list grouped by shop aisle. Use for meal planning.",
    "Check that last night's backups ran on the NAS and the cloud bucket, compare sizes with the week before, and warn about gaps. Use when asked about backups.",
    "Track a parcel from a carrier's tracking page and say when it will arrive. Use when the user pastes a tracking number or asks where a package is.",
    "Turn a rough voice-memo transcript into tidy meeting notes with decisions, owners and dates. Use after the user shares a transcript.",
    "Compare electricity tariffs from the user's last bill against current offers and estimate the yearly saving. Use when the user asks whether to switch energy supplier.",
    "Renew a Let's Encrypt certificate on the home reverse proxy and verify the new expiry date. Use when a certificate is about to expire.",
    "Keep the household's reading list: add links with a one-line summary, list unread items, mark items read. Use when the user shares something to read later.",
    "Draft a polite reply to a landlord or neighbour, firm on facts and friendly in tone. Use when the user asks for help writing a difficult message.",
    "Find a time for a family call across three time zones and draft the invitation. Use when the user wants to schedule something with relatives abroad.",
    "Check the smart-home sensors for offline devices and low batteries and list what to replace. Use for a smart-home check-up.",
    "Convert a recipe to a different number of servings and to metric units, keeping the steps in order. Use when the user shares a recipe to scale.",
    "Collect the receipts of the month from the downloads folder, total them by category and write a CSV for the tax return. Use at month end or when asked about expenses.",
    "Prepare a packing list for a trip from the destination's weather and the length of stay. Use when the user mentions an upcoming trip.",
    "Update the Docker containers on the home server one by one, checking each service afterwards and rolling back on failure. Use when asked to update containers.",
    "Write a short morning briefing: date, weather, reminders and a few headlines on the user's interests. Use when the user asks for a briefing.",
    "Review a rental or purchase contract for unusual clauses and list questions to ask before signing. Use when the user shares a contract to check.",
    "Find and compare three second-hand offers for an item within the user's budget and distance. Use when the user wants to buy something used.",
    "Diagnose a slow home Wi-Fi: measure speeds, check channel congestion and suggest router settings. Use when the user complains about slow internet.",
]
BODY = "# Steps\n\n" + "\n".join(f"{i}. Do step {i} carefully and check the result." for i in range(1, 15))


# ---------------------------------------------------------------------------- a real tokenizer

GGUF = Path(os.path.expanduser(os.environ.get("NAVI_REAL_MODEL_DIR", "~/.cache/navi/real-model"))) / "models" / \
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
# Qwen2's pre-tokenizer (the "pre" of its tokenizer.json): split before byte-level BPE.
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
               r"\s+(?!\S)|\s+")


def _gguf_metadata(path: Path, wanted: set[str]) -> dict[str, Any]:
    """The wanted key/value pairs of a GGUF file's header (no tensors are read)."""
    scalar = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
    out: dict[str, Any] = {}
    with path.open("rb") as f:
        def read(fmt: str) -> Any:
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]

        def string() -> str:
            return f.read(read("Q")).decode("utf-8", "replace")

        def value(kind: int, keep: bool) -> Any:
            if kind == 8:
                return string()
            if kind == 9:
                inner, count = read("I"), read("Q")
                items = [value(inner, keep) for _ in range(count)]
                return items if keep else None
            return read(scalar[kind])

        if f.read(4) != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file")
        read("I")
        read("Q")
        for _ in range(read("Q")):
            key = string()
            out_value = value(read("I"), key in wanted)
            if key in wanted:
                out[key] = out_value
            if wanted <= out.keys():
                break
    return out


def real_tokenizer() -> Any | None:
    """Qwen2.5's tokenizer from the local GGUF file, or None (no file, or no ``tokenizers`` library)."""
    if not GGUF.exists():
        return None
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
    except ImportError:
        return None
    meta = _gguf_metadata(GGUF, {"tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.pre"})
    vocab = {token: index for index, token in enumerate(meta["tokenizer.ggml.tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    sample = "Hello world, this is Navi."
    if tok.decode(tok.encode(sample).ids) != sample:
        raise RuntimeError("the tokenizer built from the GGUF does not round-trip text")
    return tok


# ---------------------------------------------------------------------------- the measurement


def percentiles(samples: list[float]) -> str:
    qs = statistics.quantiles(samples, n=100)
    return f"p50 {qs[49] * 1e6:.1f} µs, p90 {qs[89] * 1e6:.1f} µs, p99 {qs[98] * 1e6:.1f} µs"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="prompt_block calls to time")
    args = parser.parse_args()

    import django
    from django.conf import settings

    django.setup()
    from agent import ctx
    from agent.context import ContextBuilder
    from agent.profiles import ProfileSpec
    from skills_app.catalog import estimate_tokens, get_catalog
    from skills_app.format import render_skill
    from skills_app.store import SkillStore

    tokenizer = real_tokenizer()
    ctx.current_user_role.set("staff")
    with tempfile.TemporaryDirectory() as tmp:
        settings.SKILLS_DIR = Path(tmp) / "skills"
        settings.SKILLS_BUNDLED_DIR = Path(tmp) / "none"
        store = SkillStore()
        names = []
        for i, description in enumerate(DESCRIPTIONS * 3):
            name = f"skill-{i:02d}"
            names.append(name)
            store.save(name, {"SKILL.md": render_skill(name=name, description=description, body=BODY).encode()},
                       source="install")
        catalog = get_catalog()
        builder = ContextBuilder()
        persona = settings.NAVI_PERSONA or ""

        def system(enabled: tuple[str, ...], tools: tuple[str, ...] = ("skill_view",)) -> str:
            profile = ProfileSpec(id=f"p{len(enabled)}-{len(tools)}", name="P", system_prompt="You help at home.",
                                  enabled_tools=tools, enabled_skills=enabled)
            return builder.system_prompt(profile, persona=persona)

        base = system((), ())
        print(f"Skills prompt block, budget SKILLS_PROMPT_MAX_TOKENS={settings.SKILLS_PROMPT_MAX_TOKENS}")
        print(f"{'skills':>6} | {'tokens added (estimate)':>24} | {'tokens added (Qwen2.5)':>22} | per skill (Qwen2.5)")
        for count in (1, 5, 20, 50):
            prompt = system(tuple(names[:count]))
            added = prompt[len(base):]
            estimate = estimate_tokens(prompt) - estimate_tokens(base)
            if tokenizer is not None:
                real = len(tokenizer.encode(prompt).ids) - len(tokenizer.encode(base).ids)
                real_text, per = f"{real}", f"{real / count:.1f}"
            else:
                real_text, per = "n/a (no GGUF)", "n/a"
            full = all(DESCRIPTIONS[i % len(DESCRIPTIONS)] in added for i in range(count))
            shortened = "" if full else " (over budget: descriptions cut to first sentences)"
            print(f"{count:>6} | {estimate:>24} | {real_text:>22} | {per}{shortened}")
        learn_only = system((), ("skill_write",))
        print(f"the learning line alone (skill_write offered): {estimate_tokens(learn_only) - estimate_tokens(base)} "
              "tokens (estimate)")

        twenty = ProfileSpec(id="t", name="T", enabled_tools=("skill_view",), enabled_skills=tuple(names[:20]))
        catalog.prompt_block(twenty, ["skill_view"])
        warm = []
        for _ in range(args.calls):
            started = time.perf_counter()
            catalog.prompt_block(twenty, ["skill_view"])
            warm.append(time.perf_counter() - started)
        print(f"prompt_block, nothing changed (every model call), {args.calls} calls: {percentiles(warm)}")
        cold = []
        for _ in range(30):
            catalog.invalidate()
            started = time.perf_counter()
            catalog.prompt_block(twenty, ["skill_view"])
            cold.append(time.perf_counter() - started)
        print(f"prompt_block after a change (store re-read, 60 skills on disk), 30 runs: "
              f"p50 {statistics.median(cold) * 1e3:.2f} ms, max {max(cold) * 1e3:.2f} ms")
        stable = system(tuple(names[:20])) == system(tuple(names[:20]))
        print(f"system prompt byte-identical between calls: {stable}")


if __name__ == "__main__":
    main()
