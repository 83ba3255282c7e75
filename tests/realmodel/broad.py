"""The broad everyday suite (issue 24): 12 intents, each phrased 52 ways with different words.

Every tool of the ``local_small`` profile, memory across sessions, one-off and recurring recalls,
reading, asking about and writing files, notes, todo, subagents, greetings and plain questions.
Success is judged by what the user sees and what was stored: a correct side effect with an
answer that refuses, is empty, or shows a raw call, is a failure (``answered``), and so is one
that does not say what was done (``says``, from round 5), and so is one that opens with a tool's output
copied (``copied_result``, from round 13), and so is one that shows an instruction meant for a model
(``instruction_shown``, from round 29). A date asked for and answered right from the date the prompt
carries needs no clock call (from round 13).

**The dev/test split is fixed here** (``SPLIT``: the first two phrasings of every intent are
dev, the next two test). Prompts, tool descriptions and aids are tuned on the dev half only;
the test half is run to report, never to change anything. The test half was read after rounds 1
to 8 had reported it, so round 9 added a **fresh** half (phrasings 5 and 6 of every intent, in
``FRESH``), written before that round changed anything and run only to report: a half nobody has
tuned on, for as long as its runs are only reported. Round 9 then read the fresh half's failures and
fixed some, so round 10 added **fresh2** (phrasings 7 and 8, in ``FRESH2``) the same way, and round 11
**fresh3** (phrasings 9 and 10, in ``FRESH3``) after round 10 had read fresh2, and round 12 **fresh4**
(phrasings 11 and 12, in ``FRESH4``) after round 11 had read fresh3, and round 13 **fresh5** (phrasings
13 and 14, in ``FRESH5``) after round 12 had read fresh4, and round 14 **fresh6** (phrasings 15 and 16,
in ``FRESH6``) after round 13 had read fresh5, and round 15 **fresh7** (phrasings 17 and 18, in
``FRESH7``) after round 14 had read fresh6, and round 16 **fresh8** (phrasings 19 and 20, in ``FRESH8``)
after round 15 had read fresh7, and round 17 **fresh9** (phrasings 21 and 22, in ``FRESH9``) after round 16
had read fresh8, and round 18 **fresh10** (phrasings 23 and 24, in ``FRESH10``) after round 17 had read fresh9, and round 19
**fresh11** (phrasings 25 and 26, in ``FRESH11``) after round 18 had read fresh10, and round 20 **fresh12** (phrasings
27 and 28, in ``FRESH12``) after round 19 had read fresh11, and round 21 **fresh13** (phrasings 29 and 30,
in ``FRESH13``) after round 20 had read fresh12, and round 22 **fresh14** (phrasings 31 and 32, in ``FRESH14``)
after round 21 had read fresh13, and round 23 **fresh15** (phrasings 33 and 34, in ``FRESH15``) after round 22
had read fresh14, and round 24 **fresh16** (phrasings 35 and 36, in ``FRESH16``) after round 23 had read fresh15,
and round 25 **fresh17** (phrasings 37 and 38, in ``FRESH17``) after round 24 had read fresh16, and round 26
**fresh18** (phrasings 39 and 40, in ``FRESH18``) after round 25 had read fresh17, and round 27
**fresh19** (phrasings 41 and 42, in ``FRESH19``) after round 26 had read fresh18, and round 28
**fresh20** (phrasings 43 and 44, in ``FRESH20``) after round 27 had read fresh19, and round 29
**fresh21** (phrasings 45 and 46, in ``FRESH21``) after round 28 had read fresh20; round 29, having read fresh21,
added **fresh22** (phrasings 47 and 48, in ``FRESH22``) at its end and ran it once with its final code, and round 30
**fresh23** (phrasings 49 and 50, in ``FRESH23``) after round 29 had read fresh21 and fresh22; round 30, having read
fresh23, added **fresh24** (phrasings 51 and 52, in ``FRESH24``) at its end and ran it once with its final code.
Distinctive values (codes, numbers,
names) vary with the run so that no run passes on what an earlier one stored.
"""
from __future__ import annotations

import json
import random
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.realmodel.scenarios import (
    READING,
    Env,
    Outcome,
    Turn,
    _clock_forms,
    _done,
    _notes,
    get,
    new_session,
    poll,
    turn,
)

REFUSALS = re.compile(r"\A\s*(i'?m sorry|i am sorry|sorry|i can(?:no|')t|i can not|i'?m unable|unfortunately)",
                      re.IGNORECASE)


# Navi's honest fallback when the model gave nothing usable (agent.aids.summary_of): honest, and no answer.
# Passed before round 20 (the 1.5B answered "Hey Navi, nice to see you." with it).
NO_ANSWER = re.compile(r"\A\s*I could not produce an answer", re.IGNORECASE)
ECHO_WORDS = 4  # a message of this many words, shown back as the whole answer, is an echo


def echoed(t: Turn) -> bool:
    """The answer is the user's message itself, word for word (from round 20: both models answered "Morning!
    Ready for a new day?" with those words). "Hi!" answered "Hi!" is a greeting returned, not an echo."""
    said = re.findall(r"\w+", t.asked.lower())
    return len(said) >= ECHO_WORDS and re.findall(r"\w+", t.final.lower()) == said


def answered(t: Turn) -> str | None:
    """Why the answer the user saw is no answer (None: it is one)."""
    if t.end != "stream_end":
        return f"the turn ended with {t.end}"
    text = t.final.strip()
    if not text:
        return "an empty answer"
    if REFUSALS.match(text):
        return "a refusal"
    if NO_ANSWER.match(text):
        return "Navi's own admission that it has no answer"
    if echoed(t):
        return "the user's message repeated back"
    if '"name"' in text and ('"arguments"' in text or '"parameters"' in text) or '"action"' in text:
        return "a raw tool call or decision"
    markup = SHOWN_CALL.search(t.shown)  # everything streamed to the user, before the tools ran included
    if markup:
        return f"a raw tool call shown while streaming ({markup.group(0)!r})"
    copied = copied_result(t)
    if copied:
        return f"a tool's output copied ({copied[:60]!r})"
    told = instruction_shown(t)
    if told:
        return f"an instruction meant for the model shown ({told!r})"
    return None


INSTRUCTION_WORDS = 7  # this many words in a row of an instruction, shown as the answer: the instruction is shown
# The arguments that are instructions for a model (what a recall's run or a helper reads), by tool.
INSTRUCTIONS = {"schedule_recall": ("additional_context_message",), "spawn_agent": ("task",)}


def instruction_shown(t: Turn) -> str | None:
    """Seven words in a row of an instruction for a model (``INSTRUCTIONS``: a recall's, a helper's task), speaking of
    "the user", that the user's message does not say: an instruction shown as the answer (from round 29: the 0.5B
    answered a reminder with its instruction, "When due: remind the user of what they asked, …", and passed). An
    answer that quotes what was written for the user (a file, a note) is one."""
    def words(text: str) -> list[str]:
        return re.findall(r"[a-z0-9']+", text.lower())

    shown, said = f" {' '.join(words(t.final))} ", f" {' '.join(words(t.asked))} "
    for call in t.calls():
        args = call.get("args") or {}
        for value in (args.get(key) for key in INSTRUCTIONS.get(call["tool"], ())):
            w = words(value) if isinstance(value, str) else []
            for i in range(len(w) - INSTRUCTION_WORDS + 1):
                run = f" {' '.join(w[i:i + INSTRUCTION_WORDS])} "
                if run in shown and run not in said and re.search(r" the user(?:'s)? ", run):
                    return run.strip()
    return None


_ENVELOPE = re.compile(r"\A<untrusted(?:_data)?\b[^>]*>\n[^\n]*\n", re.DOTALL)


def copied_result(t: Turn) -> str | None:
    """The first line of a tool's output that the answer opens with: the tool's own framing ("Wrote 21 B to
    /tmp/…/shopping.txt.", "UTC: 2026-…", a read's path and size) shown as if it were the answer, the raw
    dump the issue counts as a failure (from round 13; earlier rounds passed such answers). A helper's
    answer is words a model wrote for the user, and may be passed on as it is."""
    opening = " ".join(t.final.split()).lower()
    for call in t.calls():
        if not call["success"] or call["tool"] == "spawn_agent":
            continue
        first = " ".join(_ENVELOPE.sub("", (call["result"] or "").strip()).split("\n", 1)[0].split()).lower()
        if len(first) >= 10 and opening.startswith(first):
            return first
    return None


# Call markup in what streamed to the user: JSON call fields, the tags models wrap calls in, a JSON fence.
SHOWN_CALL = re.compile(r'"(?:name|arguments|action)"\s*:|<tools>|<function[\s=>]|<tool_call>|```json')


def says(t: Turn, *any_of: str, all_of: tuple[str, ...] = ()) -> tuple[bool, str]:
    """The answer tells the user what was done: it names what was stored (any of ``any_of``, or every
    one of ``all_of``), or at least what kind of thing it was ("a note", "the list"). A correct side
    effect answered with "Sure, I can help you with that. Please let me know what you need" (a
    reminder that was set), "I did not find a tool to buy stamps" (a todo list that was made) or a
    claim that a tool bought the stamps passed before round 5's review of the answers."""
    shown = t.final.lower()
    ok = any(w in shown for w in any_of) or bool(all_of) and all(w in shown for w in all_of)
    return ok, f"the answer does not say what was done ({t.final[:60]!r})"


def verdict(start: float, checks: list[tuple[bool, str]], *turns: Turn, allowed: frozenset[str] = frozenset()) -> Outcome:
    problems = [why for ok, why in checks if not ok]
    for t in turns:
        bad = answered(t)
        if bad:
            problems.append(f"the answer is {bad}")
    detail = "; ".join(problems) or "ok"
    brief = " | ".join(t.brief() for t in turns)
    return _done(start, not problems, f"{detail}; {brief}", *turns, allowed=allowed)


@dataclass(frozen=True, slots=True)
class Task:
    intent: str
    phrasing: int  # 0..51 (SPLIT)
    text: str  # the request; {v} is the run's distinctive value where the intent has one
    run: Callable[[Env, str], Awaitable[Outcome]]

    @property
    def name(self) -> str:
        return f"{self.intent}#{self.phrasing + 1}"

    @property
    def split(self) -> str:
        return SPLIT[self.phrasing]


SPLIT = ("dev", "dev", "test", "test", "fresh", "fresh", "fresh2", "fresh2", "fresh3", "fresh3",
         "fresh4", "fresh4", "fresh5", "fresh5", "fresh6", "fresh6", "fresh7", "fresh7", "fresh8", "fresh8", "fresh9", "fresh9",
         "fresh10", "fresh10", "fresh11", "fresh11", "fresh12", "fresh12", "fresh13", "fresh13",
         "fresh14", "fresh14", "fresh15", "fresh15", "fresh16", "fresh16", "fresh17", "fresh17", "fresh18", "fresh18",
         "fresh19", "fresh19", "fresh20", "fresh20", "fresh21", "fresh21", "fresh22", "fresh22",
         "fresh23", "fresh23", "fresh24", "fresh24")  # by phrasing index
HALVES = ("dev", "test", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9",
          "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15", "fresh16", "fresh17", "fresh18", "fresh19",
          "fresh20", "fresh21", "fresh22", "fresh23", "fresh24")


def _clock() -> float:
    import time

    return time.monotonic()


# -- the intents --------------------------------------------------------------------------------

async def greeting(env: Env, text: str) -> Outcome:
    start = _clock()
    t = await turn(env, new_session(env, "greeting"), text)
    return verdict(start, [(not t.started, "a tool ran for a greeting")], t)


QUESTIONS = {"What is the capital of France?": ("paris",),
             "How many legs does a spider have?": ("8", "eight"),
             "Which planet is known as the Red Planet?": ("mars",),
             "At what temperature in Celsius does water boil at sea level?": ("100",),
             # the fresh half (round 9)
             "What's the largest ocean on Earth?": ("pacific",),
             "How many days are there in a leap year?": ("366",),
             # the second fresh half (round 10)
             "Who painted the Mona Lisa?": ("leonardo", "vinci"),
             "How many sides does a hexagon have?": ("6", "six"),
             # the third fresh half (round 11)
             "How many continents are there?": ("7", "seven"),
             "What is the freezing point of water in Fahrenheit?": ("32",),
             # the fourth fresh half (round 12)
             "What is the chemical symbol for gold?": ("au",),
             "How many hours are in a day?": ("24", "twenty-four", "twenty four"),
             # the fifth fresh half (round 13)
             "What is the tallest mountain in the world?": ("everest",),
             "How many minutes are there in an hour?": ("60", "sixty"),
             # the sixth fresh half (round 14)
             "What is the largest planet in our solar system?": ("jupiter",),
             "How many weeks are there in a year?": ("52", "fifty-two", "fifty two"),
             # the seventh fresh half (round 15)
             "Who wrote Romeo and Juliet?": ("shakespeare",),
             "How many days are in a week?": ("7", "seven"),
             # the eighth fresh half (round 16)
             "What gas do plants take in from the air?": ("carbon dioxide", "co2", "co₂"),
             "How many months are in a year?": ("12", "twelve"),
             # the ninth fresh half (round 17)
             "What is the capital of Japan?": ("tokyo",),
             "How many seconds are in a minute?": ("60", "sixty"),
             # the tenth fresh half (round 18)
             "What is the smallest prime number?": ("2", "two"),
             "Which ocean lies between Europe and North America?": ("atlantic",),
             # the eleventh fresh half (round 19)
             "What is the boiling point of water in Fahrenheit?": ("212",),
             "Which country has the city of Rome as its capital?": ("italy",),
             # the twelfth fresh half (round 20)
             "What is the chemical formula of water?": ("h2o", "h₂o"),
             "How many planets are there in our solar system?": ("8", "eight"),
             # the thirteenth fresh half (round 21)
             "What is the capital of Germany?": ("berlin",),
             "How many legs does an insect have?": ("6", "six"),
             # the fourteenth fresh half (round 22)
             "Which metal is liquid at room temperature?": ("mercury",),
             "How many strings does a standard violin have?": ("4", "four"),
             # the fifteenth fresh half (round 23)
             "What is the largest mammal on Earth?": ("whale",),
             "How many bones are there in an adult human body?": ("206",),
             # the sixteenth fresh half (round 24)
             "Which river is the longest in Africa?": ("nile",),
             "How many sides does a triangle have?": ("3", "three"),
             # the seventeenth fresh half (round 25)
             "What is the capital of Spain?": ("madrid",),
             "How many wheels does a bicycle have?": ("2", "two"),
             # the eighteenth fresh half (round 26)
             "What is the capital of Canada?": ("ottawa",),
             "How many players does a soccer team have on the field?": ("11", "eleven"),
             # the nineteenth fresh half (round 27)
             "What is the capital of Australia?": ("canberra",),
             "How many sides does a square have?": ("4", "four"),
             # the twentieth fresh half (round 28)
             "Name the capital city of Egypt.": ("cairo",),
             "How many days are there in the month of April?": ("30", "thirty"),
             # the twenty-first fresh half (round 29)
             "In which country would you find the city of Lisbon?": ("portugal",),
             "How many hearts does an octopus have?": ("3", "three"),
             # the twenty-second fresh half (round 29, at its end)
             "What colour do you get by mixing blue and yellow?": ("green",),
             "How many minutes make up a quarter of an hour?": ("15", "fifteen"),
             # the twenty-third fresh half (round 30)
             "Which planet is closest to the Sun?": ("mercury",),
             "How many centimetres are in a metre?": ("100", "hundred"),
             # the twenty-fourth fresh half (round 30, at its end)
             "What is the capital of Norway?": ("oslo",),
             "How many zeros are in one thousand?": ("3", "three")}


def mentions(answer: str, want: str) -> bool:
    """``want`` is in ``answer``; a number only as a whole number ("1000" does not hold "100"; from round 30)."""
    if want.isdigit():
        return re.search(rf"(?<![\d.,]){want}(?![\d]|[.,]\d)", answer) is not None
    return want in answer.lower()


def on_own_lines(content: str, items: tuple[str, ...]) -> bool:
    """Each of ``items`` on a line of its own, in the order asked (from round 30: "one per line" was not checked)."""
    lines = [line.lower() for line in content.splitlines() if line.strip()]
    where = [next((n for n, line in enumerate(lines) if item in line), -1) for item in items]
    return -1 not in where and where == sorted(set(where))


async def plain_question(env: Env, text: str) -> Outcome:
    start = _clock()
    t = await turn(env, new_session(env, "question"), text)
    want = QUESTIONS[text]
    return verdict(start, [(any(mentions(t.final, w) for w in want), f"the answer lacks {want[0]!r}"),
                           (not t.started, "a tool ran for a general-knowledge question")], t)


async def date_time(env: Env, text: str) -> Outcome:
    start = _clock()
    t = await turn(env, new_session(env, "time"), text)
    calls = [c for c in t.calls("get_current_datetime") if c["success"]]
    forms: set[str] = set()
    if calls:
        match = re.search(r"UTC: (\S+)", calls[0]["result"])
        if match:
            when = datetime.fromisoformat(match.group(1))
            forms = _clock_forms(match.group(1)) | {f"{when:%A}", f"{when:%Y-%m-%d}", f"{when:%B} {when.day}",
                                                    f"{when.day} {when:%B}"}
    shown = t.final.lower()
    if not calls and not re.search(r"\btime\b", text, re.IGNORECASE):
        # A question of the date or the day, answered from the date every prompt carries ("Today is Saturday,
        # 2026-11-28 (UTC)."): right for the user without a call (from round 13; earlier rounds asked for one).
        today = datetime.now(UTC)
        forms = {f"{today:%Y-%m-%d}", f"{today:%B} {today.day}", f"{today.day} {today:%B}"}
        if "week" in text.lower():
            forms = {f"{today:%A}"}
        elif "day" in text.lower() and "date" not in text.lower():
            forms.add(f"{today:%A}")
        return verdict(start, [(any(f.lower() in shown for f in forms), f"the answer has none of {sorted(forms)[:4]}")],
                       t, allowed=frozenset())
    return verdict(start, [(bool(calls), "no successful get_current_datetime call"),
                           (any(f.lower() in shown for f in forms), f"the answer has none of {sorted(forms)[:4]}")],
                   t, allowed=frozenset())


def _write(env: Env, sid: str, name: str, content: str) -> None:
    folder = env.session_files / sid
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(content)


async def read_file(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "read a file")
    code = f"HERON-{random.randint(100, 999)}"
    _write(env, sid, "project.txt", f"Project notes\nThe project codename is {code}.\nThe deadline is March 3.\n")
    t = await turn(env, sid, text)
    read = [c for c in t.calls("filesystem") if c["success"] and code in c["result"]]
    return verdict(start, [(bool(read), "project.txt was not read"), (code in t.final, f"the answer lacks {code}")],
                   t, allowed=frozenset({READING}))


AUTHORS = ["Miriam Okafor", "Tobias Lindqvist", "Ana Beltrán", "Kenji Watanabe", "Priya Raman"]


async def file_question(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "file question")
    author = AUTHORS[env.run % len(AUTHORS)]
    _write(env, sid, "report.txt", f"Quarterly report\nAuthor: {author}\nRevenue grew by 4 %.\n")
    t = await turn(env, sid, text)
    read = [c for c in t.calls("filesystem") if c["success"] and author in c["result"]]
    surname = author.split()[-1]
    return verdict(start, [(bool(read), "report.txt was not read"), (surname in t.final, f"the answer lacks {surname}")],
                   t, allowed=frozenset({READING}))


async def write_file(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "write a file")
    t = await turn(env, sid, text)
    path = env.session_files / sid / "shopping.txt"
    content = path.read_text().lower() if path.exists() else ""
    items = [w for w in ("milk", "eggs", "bread") if w in content]
    lines = not re.search(r"\bline", text, re.IGNORECASE) or on_own_lines(content, ("milk", "eggs", "bread"))
    return verdict(start, [(path.exists(), "shopping.txt was not written"),
                           (len(items) == 3, f"shopping.txt has only {items}"),
                           (len(items) < 3 or lines, f"the user asked for a line each; shopping.txt is {content!r}"),
                           says(t, "shopping", "milk")],
                   t, allowed=frozenset({"filesystem", READING}))


async def note(env: Env, text: str) -> Outcome:
    start = _clock()
    number = str(random.randint(1000, 9999))
    t = await turn(env, new_session(env, "note"), text.replace("{v}", number))
    found = [n for n in _notes(env) if number in n["text"]]
    return verdict(start, [(bool(found), f"no note with {number}"), says(t, number, "note")], t,
                   allowed=frozenset({"user_notes"}))


SERVER_NAMES = ["atlas", "boreas", "cygnus", "draco", "electra", "fornax", "gemini", "hydra", "izar", "juno"]


async def remember(env: Env, text: str) -> Outcome:
    start = _clock()
    known = " ".join(f"{f['key']} {f['value']}" for f in get(env, "/memory/facts?limit=100")["items"]).lower()
    known += " " + (get(env, "/memory/summary")["summary"] or "").lower()
    name = next((n for n in SERVER_NAMES if n not in known), f"orion{random.randint(10, 99)}")
    t1 = await turn(env, new_session(env, "remember"), text.replace("{v}", name))
    facts = await poll(lambda: [f for f in get(env, "/memory/facts?limit=100")["items"]
                                if name in f["value"].lower() or name in f["key"].lower()], timeout=10)
    if not facts:
        return verdict(start, [(False, f"no memory fact naming {name}")], t1, allowed=frozenset({"memory_save"}))
    # No wait for the summary the model rebuilds in the background: the stored fact must reach the
    # new session's prompt at once (memory_app.provider lists the facts the summary lacks).
    t2 = await turn(env, new_session(env, "recall a fact"), "What is my server called?")
    return verdict(start, [says(t1, name, "remember"), (name in t2.final.lower(), f"the new session did not know {name}")],
                   t1, t2, allowed=frozenset({"memory_save"}))


def _recall(env: Env, sid: str) -> dict[str, Any] | None:
    recall = get(env, f"/sessions/{sid}/recall")
    return recall if recall and recall.get("id") else None


_ISO_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
_CLOCK_TIME = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2})?(?:\s*([ap])\.?m\b\.?)?(?![\d:])", re.IGNORECASE)
_OFFSET = re.compile(r"\A([+-])(\d{2}):?(\d{2})\Z")


def misstated_times(answer: str, due: list[datetime], now: datetime, offsets: list[str] = ()) -> list[str]:
    """The clock times ``answer`` states that are not the reminder's: the first one stated (not ``now``) must be its
    first firing (``due[0]``), any later one one of ``due``; read in UTC or in an offset the call gave ("+01:00"), a
    minute either way (from round 30: the 1.5B told the user an hourly reminder "will fire at 20:00" when it was first
    due at 18:00 UTC)."""
    shifts = [timedelta(0)]
    for offset in offsets:
        parts = _OFFSET.match(offset.strip())
        if parts:
            shifts.append((1 if parts.group(1) == "+" else -1) * timedelta(hours=int(parts.group(2)),
                                                                            minutes=int(parts.group(3))))

    def clock(moments: list[datetime]) -> set[int]:
        return {(m + shift).hour * 60 + (m + shift).minute for m in moments for shift in shifts}

    stated: list[tuple[int, str, Callable[[list[datetime]], bool]]] = []
    for match in _ISO_TIME.finditer(answer):
        when = datetime.fromisoformat(match.group().replace("Z", "+00:00").replace(" ", "T"))
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        stated.append((match.start(), match.group(),
                       lambda moments, when=when: any(abs((when - m).total_seconds()) <= 90 for m in moments)))
    blanked = _ISO_TIME.sub(lambda m: " " * len(m.group()), answer)
    for match in _CLOCK_TIME.finditer(blanked):
        hour, minute, half = int(match.group(1)), int(match.group(2)), (match.group(3) or "").lower()
        if hour > 23 or minute > 59 or (half and not 1 <= hour <= 12):
            continue
        at = (hour % 12 + (12 if half == "p" else 0) if half else hour) * 60 + minute
        stated.append((match.start(), match.group().strip().rstrip("."),
                       lambda moments, at=at: any(min(abs(at - c), 1440 - abs(at - c)) <= 1 for c in clock(moments))))
    wrong, first = [], True
    for _, text, matches in sorted(stated, key=lambda item: item[0]):
        if matches([now]):
            continue
        if not matches(due[:1] if first else due):
            wrong.append(text)
        first = False
    return wrong


def _times_right(t: Turn, recall: dict[str, Any], asked: datetime) -> tuple[bool, str]:
    """A time the answer states is the reminder's (``misstated_times``): its firings for a day, or the time asked."""
    first = datetime.fromisoformat(recall["trigger_at"])
    step = timedelta(seconds=recall.get("interval_seconds") or 0)
    due = [first + n * step for n in range(25 if step else 1)]
    offsets = [c["args"].get("timezone_offset") for c in t.calls("schedule_recall") if isinstance(c.get("args"), dict)]
    wrong = misstated_times(t.final, due, asked, [o for o in offsets if isinstance(o, str)])
    return not wrong, f"the answer says {wrong[0] if wrong else ''!r}; the reminder is due {first:%H:%M} UTC"


async def remind_once(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "reminder")
    asked = datetime.now(UTC)
    t = await turn(env, sid, text)
    recall = _recall(env, sid)
    if recall is None:
        return verdict(start, [(False, "no recall")], t, allowed=frozenset({"schedule_recall"}))
    env.navi.request("DELETE", f"/sessions/{sid}/recall")  # must not fire during the rest of the run
    minutes = (datetime.fromisoformat(recall["trigger_at"]) - asked).total_seconds() / 60
    said = recall["additional_context_message"].lower()
    return verdict(start, [(recall.get("call_type") == "once", f"a {recall.get('call_type')} recall"),
                           (2.0 <= minutes <= 5.0, f"due in {minutes:.1f} min"),
                           ("stretch" in said, f"the instruction {said[:80]!r} lacks 'stretch'"),
                           _times_right(t, recall, asked), says(t, "stretch", "remind")],
                   t, allowed=frozenset({"schedule_recall"}))


async def remind_every(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "recurring reminder")
    asked = datetime.now(UTC)
    t = await turn(env, sid, text)
    recall = _recall(env, sid)
    if recall is None:
        return verdict(start, [(False, "no recall")], t, allowed=frozenset({"schedule_recall"}))
    env.navi.request("DELETE", f"/sessions/{sid}/recall")
    interval = recall.get("interval_seconds") or 0
    said = recall["additional_context_message"].lower()
    first = (datetime.fromisoformat(recall["trigger_at"]) - asked).total_seconds() / 60
    return verdict(start, [(recall.get("call_type") == "recurring", f"a {recall.get('call_type')} recall"),
                           (1800 <= interval <= 7200, f"every {interval} s"),
                           # the first reminder within one interval (and a margin) of asking (from round 30)
                           (-1 <= first <= interval / 60 + 15, f"the first reminder only in {first:.0f} min"),
                           ("water" in said, f"the instruction {said[:80]!r} lacks 'water'"),
                           _times_right(t, recall, asked), says(t, "water", "remind")],
                   t, allowed=frozenset({"schedule_recall"}))


async def todo_list(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "todo")
    t = await turn(env, sid, text)
    try:
        steps = json.loads((env.session_files / sid / ".navi" / "todo.json").read_text())
    except (OSError, ValueError):
        steps = []
    steps = steps.get("steps", steps) if isinstance(steps, dict) else steps
    titles = " ".join(str(s.get("title", "")) for s in steps if isinstance(s, dict)).lower()
    return verdict(start, [(len(steps) >= 2, f"{len(steps)} todo steps"),
                           ("stamp" in titles and "letter" in titles, f"the steps {titles[:80]!r}"),
                           says(t, "list", all_of=("stamp", "letter"))],
                   t, allowed=frozenset({"todo"}))


async def subagent(env: Env, text: str) -> Outcome:
    start = _clock()
    sid = new_session(env, "subagent")
    number = str(random.randint(1000, 9999))
    _write(env, sid, "facts.txt", f"The magic number is {number}.\n")
    t = await turn(env, sid, text)
    spawned = [c for c in t.calls("spawn_agent") if c["success"]]
    return verdict(start, [(bool(spawned), "no subagent"), (number in t.final, f"the answer lacks {number}")],
                   t, allowed=frozenset({"spawn_agent", READING}))


PHRASINGS: dict[str, tuple[Callable[[Env, str], Awaitable[Outcome]], tuple[str, str, str, str]]] = {
    "greeting": (greeting, ("Hi!", "Good morning, Navi.", "Hey there, how's it going?", "Hello :)")),
    "plain_question": (plain_question, tuple(QUESTIONS)[:4]),  # type: ignore[dict-item]
    "date_time": (date_time, ("What time is it right now (UTC)?", "What day of the week is it today?",
                              "Can you tell me today's date?", "Do you know the current time?")),
    "read_file": (read_file, ("Read the file project.txt and tell me the project codename.",
                              "What's the codename mentioned in project.txt?",
                              "Open project.txt — which code name does it give for the project?",
                              "Look inside project.txt and give me the project's code name.")),
    "file_question": (file_question, ("Who wrote report.txt?", "Who is the author of report.txt?",
                                      "report.txt: whose report is that?",
                                      "Check report.txt and tell me who wrote it.")),
    "write_file": (write_file, ("Write milk, eggs and bread into shopping.txt, one per line.",
                                "Create a file named shopping.txt that lists milk, eggs and bread.",
                                "Put a shopping list in shopping.txt: milk, eggs, bread.",
                                "Save milk, eggs and bread to a file called shopping.txt.")),
    "note": (note, ("Note down: call the plumber about invoice {v}.", "Jot this down: plumber, invoice {v}.",
                    "Add a note that I have to call the plumber about invoice {v}.",
                    "Please make a note: ring the plumber regarding invoice {v}.")),
    "remember": (remember, ("Remember that my server is called {v}.", "Please keep in mind that my server's name is {v}.",
                            "For future reference, my server is named {v}.", "Don't forget: the server I use is called {v}.")),
    "remind_once": (remind_once, ("Remind me in 3 minutes to stretch my legs.", "In 3 minutes, ping me to stretch my legs.",
                                  "Set a reminder for 3 minutes from now: stretch my legs.",
                                  "Can you nudge me in three minutes to get up and stretch?")),
    "remind_every": (remind_every, ("Remind me every hour to drink water.", "Every 60 minutes, remind me to drink some water.",
                                    "Please remind me hourly to drink a glass of water.",
                                    "Set up a recurring reminder, once an hour, to drink water.")),
    "todo": (todo_list, ("Make a todo list with two steps: buy stamps, post the letter.",
                         "Put these on my checklist: buy stamps, then post the letter.",
                         "Create a to-do list: 1) buy stamps 2) post the letter",
                         "Start a task list for me with 'buy stamps' and 'post the letter'.")),
    "subagent": (subagent, ("Use a subagent to read facts.txt and tell me the magic number.",
                            "Delegate reading facts.txt to a helper agent and tell me the magic number it finds.",
                            "Spawn a helper to look up the magic number in facts.txt.",
                            "Have a sub-agent open facts.txt and report the magic number.")),
}

# Round 9's held-out phrasings (written before that round changed anything; never tuned on).
FRESH: dict[str, tuple[str, str]] = {
    "greeting": ("Good evening!", "Yo Navi, what's up?"),
    "plain_question": ("What's the largest ocean on Earth?", "How many days are there in a leap year?"),
    "date_time": ("What's the time?", "Tell me the date today, please."),
    "read_file": ("I need the project codename from project.txt.",
                  "What does project.txt say the codename is?"),
    "file_question": ("Find out who authored report.txt.", "Whose name is on report.txt as its author?"),
    "write_file": ("Make me a shopping.txt with milk, eggs and bread in it.",
                   "Could you store my groceries (milk, eggs, bread) in shopping.txt?"),
    "note": ("Take a note: the plumber needs a call about invoice {v}.",
             "Make a memo for me: phone the plumber about invoice {v}."),
    "remember": ("My server's name is {v}, please remember that.",
                 "Keep this in your memory: I call my server {v}."),
    "remind_once": ("Ping me in 3 minutes so I remember to stretch.",
                    "Give me a nudge to stretch my legs 3 minutes from now."),
    "remind_every": ("Every hour, tell me to drink water.", "I want an hourly reminder to drink water, please."),
    "todo": ("Track two tasks for me: buy stamps and post the letter.",
             "Build me a checklist: first buy stamps, then post the letter."),
    "subagent": ("Let a helper agent find the magic number in facts.txt.",
                 "Get a subagent to check facts.txt for the magic number and tell me."),
}

# Round 10's held-out phrasings: the fresh half was read after round 9 reported it and fixes followed,
# so these were written, and run once with round 9's code, before round 10 changed anything.
FRESH2: dict[str, tuple[str, str]] = {
    "greeting": ("Hiya, nice to meet you.", "Morning! Hope you're doing well."),
    "plain_question": ("Who painted the Mona Lisa?", "How many sides does a hexagon have?"),
    "date_time": ("What year, month and day is it?", "Could you check what time it is?"),
    "read_file": ("Pull the codename out of project.txt for me.", "project.txt has a codename in it. What is it?"),
    "file_question": ("Tell me the name of the person who wrote report.txt.", "Who's report.txt by?"),
    "write_file": ("Please create shopping.txt containing milk, eggs and bread.",
                   "I need a file shopping.txt with three lines: milk, eggs, bread."),
    "note": ("Write a quick note for me: plumber, invoice {v}, needs a call.",
             "Could you add to my notes that invoice {v} needs a call to the plumber?"),
    "remember": ("FYI, my server goes by the name {v}. Remember it.", "Store this fact about me: my server is named {v}."),
    "remind_once": ("Alert me in three minutes: time to stretch my legs.",
                    "Could you remind me to do some stretching in 3 minutes?"),
    "remind_every": ("Tell me to drink water once every hour from now on.", "Nag me every hour about drinking water."),
    "todo": ("I have two things to do: buy stamps and post the letter. Make me a to-do list.",
             "Add 'buy stamps' and 'post the letter' to a new to-do list."),
    "subagent": ("Send a subagent to read facts.txt and come back with the magic number.",
                 "Ask a helper agent what the magic number in facts.txt is."),
}

# Round 11's held-out phrasings: fresh2 was read after round 10 reported it, so these were written,
# and run once with round 10's code, before round 11 changed anything.
FRESH3: dict[str, tuple[str, str]] = {
    "greeting": ("Hello there, Navi!", "Hey! Glad you're here."),
    "plain_question": ("How many continents are there?", "What is the freezing point of water in Fahrenheit?"),
    "date_time": ("Which day is it today?", "What's the current date and time?"),
    "read_file": ("Give me the codename that's written in project.txt.",
                  "Check project.txt and let me know which codename it lists."),
    "file_question": ("report.txt — who's the author?", "Can you see who wrote the file report.txt?"),
    "write_file": ("Write a file shopping.txt: milk, eggs, bread.",
                   "Could you make shopping.txt and put milk, eggs and bread on separate lines?"),
    "note": ("Save a note: contact the plumber about invoice {v}.",
             "Please note that for invoice {v} I must call the plumber."),
    "remember": ("Just so you know, my server's called {v}. Don't forget it.",
                 "Remember this for later: {v} is the name of my server."),
    "remind_once": ("Three minutes from now, remind me to stretch my legs.", "Set a 3-minute reminder to stretch."),
    "remind_every": ("Could you remind me to drink water each hour?",
                     "Keep reminding me every hour to drink some water."),
    "todo": ("Make a checklist for me with two items: buy stamps, post the letter.",
             "Set up a to-do: buy stamps first, then post the letter."),
    "subagent": ("Spin up a subagent to find the magic number inside facts.txt.",
                 "Could a helper agent read facts.txt and tell me its magic number?"),
}

# Round 12's held-out phrasings: fresh3 was read after round 11 reported it, so these were written,
# and run once with round 11's code, before round 12 changed anything.
FRESH4: dict[str, tuple[str, str]] = {
    "greeting": ("Hi Navi, how are you today?", "Greetings!"),
    "plain_question": ("What is the chemical symbol for gold?", "How many hours are in a day?"),
    "date_time": ("What's the date?", "Tell me what time it is now."),
    "read_file": ("Look up the codename in project.txt.", "According to project.txt, what's the project's codename?"),
    "file_question": ("Who is report.txt written by?", "Do you know who the author of report.txt is?"),
    "write_file": ("Make a new file, shopping.txt, listing milk, eggs and bread.",
                   "shopping.txt should contain milk, eggs and bread. Please write it."),
    "note": ("Add this to my notes: call the plumber, invoice {v}.",
             "Can you write down for me that the plumber needs calling about invoice {v}?"),
    "remember": ("Commit this to memory: my server is called {v}.",
                 "You should know my server is named {v}; remember that for next time."),
    "remind_once": ("Send me a reminder to stretch in 3 minutes.",
                    "Don't let me forget to stretch my legs: remind me in three minutes."),
    "remind_every": ("Ping me to drink water every hour.",
                     "Schedule a reminder every 60 minutes telling me to drink water."),
    "todo": ("New to-do list please: buy stamps, post the letter.",
             "Can you make a list of tasks: buy stamps and then post the letter?"),
    "subagent": ("Have a helper agent look in facts.txt and tell me the magic number.",
                 "Use a sub-agent to get the magic number from facts.txt."),
}

# Round 13's held-out phrasings: fresh4 was read after round 12 reported it, so these were written,
# and run once with round 12's code, before round 13 changed anything.
FRESH5: dict[str, tuple[str, str]] = {
    "greeting": ("Howdy!", "Hey Navi, good to see you again."),
    "plain_question": ("What is the tallest mountain in the world?", "How many minutes are there in an hour?"),
    "date_time": ("What day is it?", "Got the current time for me?"),
    "read_file": ("Tell me what codename project.txt contains.", "Could you read project.txt? I need its codename."),
    "file_question": ("Which person wrote report.txt?", "Who's the author of the report in report.txt?"),
    "write_file": ("Save a shopping list to shopping.txt with milk, eggs and bread.",
                   "Can you write shopping.txt for me? It should have milk, eggs, bread."),
    "note": ("Make a note of this: the plumber has to be called about invoice {v}.",
             "Note for me: invoice {v}, call the plumber."),
    "remember": ("Please remember my server's name: {v}.", "Learn this about me: the server I run is called {v}."),
    "remind_once": ("In three minutes, tell me to stretch my legs.",
                    "Could you set a reminder three minutes out so I get up and stretch?"),
    "remind_every": ("Once an hour, please remind me to drink water.", "Set me an hourly reminder to drink water."),
    "todo": ("Create a checklist of two tasks: buy stamps and post the letter.",
             "To-do for today: buy stamps, post the letter. Put it in a list."),
    "subagent": ("Get a helper agent to read facts.txt and tell me the magic number in it.",
                 "Can you spawn a sub-agent that finds the magic number written in facts.txt?"),
}

# Round 14's held-out phrasings: fresh5 was read after round 13 reported it, so these were written,
# and run once with round 13's code, before round 14 changed anything.
FRESH6: dict[str, tuple[str, str]] = {
    "greeting": ("Good afternoon!", "Hi, it's me again."),
    "plain_question": ("What is the largest planet in our solar system?", "How many weeks are there in a year?"),
    "date_time": ("What's the day and month today?", "What time do you have?"),
    "read_file": ("Find the codename in project.txt, please.",
                  "I forgot our project's codename; it's in project.txt. Can you look?"),
    "file_question": ("Who put together report.txt?", "Tell me who authored the report.txt file."),
    "write_file": ("Please write a file shopping.txt with the items milk, eggs, bread.",
                   "I'd like shopping.txt created with milk, eggs and bread, each on its own line."),
    "note": ("Put in my notes: invoice {v}, ring the plumber.",
             "Record a note saying I need to call the plumber about invoice {v}."),
    "remember": ("Make sure you remember: my server is {v}.",
                 "Here's something to remember about me: my server's name is {v}."),
    "remind_once": ("In 3 min, remind me to go stretch.", "Please ping me three minutes from now to stretch my legs."),
    "remind_every": ("Hourly, remind me to drink water.",
                     "Could you set up a reminder to drink water that repeats every hour?"),
    "todo": ("I need a task list with two entries: buy stamps and post the letter.",
             "Please list my to-dos: buy stamps, then post the letter."),
    "subagent": ("Delegate to a helper agent: find the magic number in facts.txt.",
                 "Can a sub-agent look through facts.txt and report back the magic number?"),
}

# Round 15's held-out phrasings: fresh6 was read after round 14 reported it, so these were written,
# and run once with round 14's code, before round 15 changed anything.
FRESH7: dict[str, tuple[str, str]] = {
    "greeting": ("Yo, what's up?", "Good evening, Navi. How have you been?"),
    "plain_question": ("Who wrote Romeo and Juliet?", "How many days are in a week?"),
    "date_time": ("Have you got the time?", "What date is it today?"),
    "read_file": ("Open project.txt and tell me the codename.", "Read me the codename from project.txt."),
    "file_question": ("report.txt was written by whom?", "Who is credited as the author in report.txt?"),
    "write_file": ("Put milk, eggs and bread into a file called shopping.txt.",
                   "Create shopping.txt; contents: milk, eggs, bread."),
    "note": ("Jot down that I have to phone the plumber regarding invoice {v}.",
             "Leave me a note: the plumber must be called about invoice {v}."),
    "remember": ("Don't forget that my server is named {v}.", "For future reference, my server is called {v}."),
    "remind_once": ("Remind me to stretch in three minutes.",
                    "I'd like a heads-up in 3 minutes to stretch my legs."),
    "remind_every": ("Can you remind me hourly that I should drink water?",
                     "Every 60 minutes, I'd like a reminder to drink some water."),
    "todo": ("Start a to-do list with buy stamps and post the letter.",
             "Make a list of things to do: buy stamps, post the letter."),
    "subagent": ("Use a helper agent to find out the magic number in facts.txt.",
                 "Dispatch a subagent to read facts.txt and give me the magic number."),
}

# Round 16's held-out phrasings: fresh7 was read after round 15 reported it, so these were written,
# and run once with round 15's code, before round 16 changed anything.
FRESH8: dict[str, tuple[str, str]] = {
    "greeting": ("Hey, long time no see!", "Hello Navi, nice evening, isn't it?"),
    "plain_question": ("What gas do plants take in from the air?", "How many months are in a year?"),
    "date_time": ("Do you know what day of the month it is?", "Please tell me the current time."),
    "read_file": ("What codename is written inside project.txt?",
                  "Have a look at project.txt and tell me its codename."),
    "file_question": ("Whose work is report.txt?", "Find the author's name in report.txt for me."),
    "write_file": ("Write shopping.txt for me with milk, eggs and bread, each on a line.",
                   "I want a shopping.txt file: milk, eggs, bread."),
    "note": ("Keep a note that the plumber should get a call about invoice {v}.",
             "Could you note: invoice {v} — call the plumber."),
    "remember": ("Please remember this about me: my server is called {v}.",
                 "Note to self, for you to keep: my server's name is {v}."),
    "remind_once": ("Three minutes from now, ping me to stretch.",
                    "Remind me to stand up and stretch, 3 minutes from now."),
    "remind_every": ("Every hour on the hour, remind me to drink water.",
                     "Could I get a water reminder each hour?"),
    "todo": ("Put buy stamps and post the letter on a to-do list for me.",
             "Two to-dos, please: buy stamps; post the letter."),
    "subagent": ("Let a subagent read facts.txt and tell me what the magic number is.",
                 "I'd like a helper agent to dig the magic number out of facts.txt."),
}

# Round 17's held-out phrasings: fresh8 was read after round 16 reported it, so these were written,
# and run once with round 16's code, before round 17 changed anything.
FRESH9: dict[str, tuple[str, str]] = {
    "greeting": ("Evening, Navi!", "Hey friend, how are things?"),
    "plain_question": ("What is the capital of Japan?", "How many seconds are in a minute?"),
    "date_time": ("Mind telling me the time?", "Which weekday is it?"),
    "read_file": ("Read project.txt for me; what's the codename?", "Which codename does project.txt mention?"),
    "file_question": ("Who's the writer of report.txt?", "Look at report.txt and tell me its author."),
    "write_file": ("Store milk, eggs and bread in shopping.txt, one item per line.",
                   "Could you put milk, eggs and bread into a new file shopping.txt?"),
    "note": ("Write this in my notes: invoice {v}, the plumber needs a call.",
             "Quick note please: plumber call about invoice {v}."),
    "remember": ("Keep in mind for later chats: my server is named {v}.",
                 "I want you to remember my server's name, which is {v}."),
    "remind_once": ("Give me a reminder in 3 minutes to stretch my legs.", "3 minutes from now, remind me: stretch."),
    "remind_every": ("Remind me to drink water every single hour.", "Each hour, give me a nudge to drink water."),
    "todo": ("List these to-dos for me: buy stamps and post the letter.",
             "I've got two tasks, buy stamps and post the letter; track them in a to-do list."),
    "subagent": ("Hand facts.txt to a subagent and tell me the magic number it reads.",
                 "Could you have a helper agent fetch the magic number from facts.txt?"),
}

# Round 18's held-out phrasings: fresh9 was read after round 17 reported it, so these were written,
# and run once with round 17's code, before round 18 changed anything.
FRESH10: dict[str, tuple[str, str]] = {
    "greeting": ("Hi there! Hope all is well.", "Hey Navi, happy to chat with you again!"),
    "plain_question": ("What is the smallest prime number?", "Which ocean lies between Europe and North America?"),
    "date_time": ("Which date is it today?", "Time check, please: what time is it?"),
    "read_file": ("Scan project.txt and tell me which codename it has.", "What codename does the file project.txt give?"),
    "file_question": ("Who's listed as the author of report.txt?", "Could you find out who wrote report.txt for me?"),
    "write_file": ("Make shopping.txt and write milk, eggs and bread in it.",
                   "Can you save a file shopping.txt listing milk, eggs and bread, one per line?"),
    "note": ("Take this down as a note: plumber to be called, invoice {v}.",
             "Note it down for me: the plumber needs calling about invoice {v}."),
    "remember": ("Remember for next time that my server is called {v}.",
                 "So you know in future chats, my server is named {v}."),
    "remind_once": ("Remind me in 3 minutes that I need to stretch.", "In three minutes, give me a ping to stretch my legs."),
    "remind_every": ("Every hour, ping me with a reminder to drink water.",
                     "I'd like to be reminded to drink water once per hour."),
    "todo": ("Two items for a to-do list: buy stamps, post the letter.",
             "Could you set up a to-do list with buy stamps and post the letter?"),
    "subagent": ("Ask a subagent to read facts.txt and tell me the magic number.",
                 "Put a helper agent on facts.txt to find the magic number."),
}

# Round 19's held-out phrasings: fresh10 was read after round 18 reported it, so these were written,
# and run once with round 18's code, before round 19 changed anything.
FRESH11: dict[str, tuple[str, str]] = {
    "greeting": ("Hi hi! Good to have you around.", "Hello, Navi. Lovely day today."),
    "plain_question": ("What is the boiling point of water in Fahrenheit?",
                       "Which country has the city of Rome as its capital?"),
    "date_time": ("What's today's date, please?", "Could you tell me the exact time right now?"),
    "read_file": ("There's a codename in project.txt; tell me what it is.",
                  "Get me the codename from the project.txt file."),
    "file_question": ("Who authored report.txt?", "I'd like to know who the author of report.txt is."),
    "write_file": ("Create shopping.txt and list milk, eggs and bread in it, one per line.",
                   "Write my shopping list to shopping.txt: milk, eggs, bread."),
    "note": ("Add a quick note: invoice {v}, must call the plumber.",
             "Can you note down that I owe the plumber a call about invoice {v}?"),
    "remember": ("Remember: the name of my server is {v}.",
                 "Store in your memory that my server is called {v}."),
    "remind_once": ("Please remind me to stretch my legs in 3 minutes.",
                    "After three minutes, send me a reminder to stretch."),
    "remind_every": ("Remind me each hour to have a drink of water.",
                     "Set an hourly recurring reminder: drink water."),
    "todo": ("Please make me a to-do list: buy stamps, post the letter.",
             "I want a checklist with two things on it, buy stamps and post the letter."),
    "subagent": ("Have a subagent look up the magic number in facts.txt for me.",
                 "Could you get a helper agent to read facts.txt and report the magic number?"),
}

# Round 20's held-out phrasings: fresh11 was read after round 19 reported it, so these were written,
# and run once with round 19's code, before round 20 changed anything.
FRESH12: dict[str, tuple[str, str]] = {
    "greeting": ("Morning! Ready for a new day?", "Hey Navi, nice to see you."),
    "plain_question": ("What is the chemical formula of water?", "How many planets are there in our solar system?"),
    "date_time": ("Hey, what day is it today?", "What's the current time, please?"),
    "read_file": ("Dig into project.txt and find me its codename.",
                  "What's the codename written in project.txt? Read it and tell me."),
    "file_question": ("Who put their name on report.txt as its author?",
                      "Author of report.txt, please?"),
    "write_file": ("Could you make a file shopping.txt with milk, eggs and bread on separate lines?",
                   "Put milk, eggs and bread into a file shopping.txt, each on its own line."),
    "note": ("Put this in a note: I need to ring the plumber about invoice {v}.",
             "Note to self: plumber, invoice {v}, call them."),
    "remember": ("Please remember my server goes by the name {v}.",
                 "Just so you know for later: my server is {v}."),
    "remind_once": ("Could you remind me to stretch my legs three minutes from now?",
                    "Set a reminder, three minutes out, to stretch my legs."),
    "remind_every": ("Drink water: remind me about it every hour.", "Could you ping me hourly so I drink water?"),
    "todo": ("Add two to-dos: buy stamps and post the letter.",
             "Set up a checklist for me with buy stamps and post the letter on it."),
    "subagent": ("Send a helper agent to read facts.txt and bring back the magic number.",
                 "Spin up a subagent to find out the magic number in facts.txt."),
}

# Round 21's held-out phrasings: fresh12 was read after round 20 reported it, so these were written,
# and run once with round 20's code, before round 21 changed anything.
FRESH13: dict[str, tuple[str, str]] = {
    "greeting": ("Good afternoon, Navi!", "Hiya! Glad you're here."),
    "plain_question": ("What is the capital of Germany?", "How many legs does an insect have?"),
    "date_time": ("Can you check what today's date is?", "What time is it at the moment?"),
    "read_file": ("Open project.txt and read me the codename inside.",
                  "Tell me the codename that project.txt contains."),
    "file_question": ("Whose name is on report.txt as the author?", "Check report.txt: who is its author?"),
    "write_file": ("Write a file called shopping.txt containing milk, eggs and bread, one per line.",
                   "Please create shopping.txt with three lines: milk, eggs, bread."),
    "note": ("Save a note saying I must phone the plumber about invoice {v}.",
             "Make a note for me: call plumber re invoice {v}."),
    "remember": ("Don't forget: my server's name is {v}.",
                 "For future conversations, keep in mind my server is called {v}."),
    "remind_once": ("Ping me in 3 minutes to stretch my legs, please.", "I need a reminder to stretch in three minutes."),
    "remind_every": ("Please remind me hourly to drink some water.",
                     "Set up a reminder to drink water that repeats every hour."),
    "todo": ("Make a to-do list with buy stamps and post the letter.",
             "Track two tasks for me: buy stamps, then post the letter."),
    "subagent": ("Use a subagent to get the magic number out of facts.txt.",
                 "Delegate to a helper agent: read facts.txt and tell me the magic number."),
}

# Round 22's held-out phrasings: fresh13 was read after round 21 reported it, so these were written,
# and run once with round 21's code, before round 22 changed anything.
FRESH14: dict[str, tuple[str, str]] = {
    "greeting": ("Evening, Navi. How's it going?", "Yo! Long time no see."),
    "plain_question": ("Which metal is liquid at room temperature?",
                       "How many strings does a standard violin have?"),
    "date_time": ("Which date is it today, do you know?", "Tell me the current time, would you?"),
    "read_file": ("Look inside project.txt and give me the codename it mentions.",
                  "I need the codename stored in project.txt."),
    "file_question": ("report.txt: who's listed as the author?", "Find out for me who authored report.txt."),
    "write_file": ("Make me shopping.txt listing milk, eggs and bread, a line each.",
                   "Save milk, eggs and bread as separate lines in a new file named shopping.txt."),
    "note": ("Take a note: plumber needs a call regarding invoice {v}.",
             "Write down in my notes that I have to call the plumber, invoice {v}."),
    "remember": ("Keep this in memory: my server is named {v}.",
                 "From now on, know that my server's called {v}."),
    "remind_once": ("Three minutes from now, tell me to stretch my legs.",
                    "Give me a nudge in 3 minutes to get up and stretch."),
    "remind_every": ("Every hour, remind me I should drink water.",
                     "I'd like an hourly reminder to drink water, please."),
    "todo": ("Start a to-do list for me: buy stamps, post the letter.",
             "Put buy stamps and post the letter on my task list."),
    "subagent": ("Ask a subagent to open facts.txt and tell me the magic number.",
                 "Hand facts.txt to a helper agent and have it report the magic number back."),
}

# Round 23's held-out phrasings: fresh14 was read after round 22 reported it, so these were written,
# and run once with round 22's code, before round 23 changed anything.
FRESH15: dict[str, tuple[str, str]] = {
    "greeting": ("Hey there Navi, nice to talk to you again.", "Good day! How have you been?"),
    "plain_question": ("What is the largest mammal on Earth?",
                       "How many bones are there in an adult human body?"),
    "date_time": ("I lost track of the days, what date is it?", "Do you know what hour it is right now?"),
    "read_file": ("Peek at project.txt and tell me which codename is written there.",
                  "What codename is in the file project.txt?"),
    "file_question": ("Who is the author of the document report.txt?",
                      "Can you see in report.txt who wrote it?"),
    "write_file": ("Save a shopping.txt that has milk, eggs and bread on separate lines.",
                   "I want a shopping.txt file: milk, eggs and bread, one line apiece."),
    "note": ("Note for me: ring the plumber about invoice {v}.",
             "Add to my notes that the plumber must be called about invoice {v}."),
    "remember": ("Make a mental note that my server goes by the name {v}.",
                 "Store this about me: the name of my server is {v}."),
    "remind_once": ("In three minutes, remind me that I should stretch my legs.",
                    "Alert me to stretch my legs once 3 minutes have passed."),
    "remind_every": ("Nudge me to drink water once every hour.",
                     "Can you set an hourly drink-water reminder for me?"),
    "todo": ("I need a to-do list: buy stamps and post the letter.",
             "Create tasks for buy stamps and post the letter."),
    "subagent": ("Get a helper agent to look in facts.txt and report the magic number.",
                 "Let a subagent go through facts.txt and come back with the magic number."),
}

# Round 24's held-out phrasings: fresh15 was read after round 23 reported it, so these were written,
# and run once with round 23's code, before round 24 changed anything.
FRESH16: dict[str, tuple[str, str]] = {
    "greeting": ("Hiya Navi!", "Good afternoon! What's new with you?"),
    "plain_question": ("Which river is the longest in Africa?", "How many sides does a triangle have?"),
    "date_time": ("Which weekday are we on today?", "Could you check the time for me?"),
    "read_file": ("From project.txt, what's the codename of the project?",
                  "Have a look at project.txt - what's the codename in it?"),
    "file_question": ("Who's the person that wrote report.txt?", "Tell me the name of report.txt's author."),
    "write_file": ("Please create shopping.txt with milk, eggs, and bread, each on its own line.",
                   "Write a shopping list file, shopping.txt, containing milk, eggs and bread."),
    "note": ("Make a quick note: I need to call the plumber about invoice {v}.",
             "Could you note that the plumber must get a call about invoice {v}?"),
    "remember": ("Just so you know, my server's name is {v}. Remember it.",
                 "Memorize this: my server is called {v}."),
    "remind_once": ("Ping me in 3 min so I remember to stretch my legs.",
                    "After three minutes, remind me to get up and stretch my legs."),
    "remind_every": ("Would you set a reminder every hour telling me to drink water?", "Each hour, give me a reminder to drink water."),
    "todo": ("Add two tasks to a todo list: buy stamps and post the letter.",
             "Make me a checklist with buy stamps first and post the letter second."),
    "subagent": ("Dispatch a subagent to dig the magic number out of facts.txt.",
                 "Can a helper agent read facts.txt and tell me what the magic number is?"),
}

# Round 25's held-out phrasings: fresh16 was read after round 24 reported it, so these were written,
# and run once with round 24's code, before round 25 changed anything.
FRESH17: dict[str, tuple[str, str]] = {
    "greeting": ("Evening, Navi! All good on your end?", "Hello again, I hope your day is going well."),
    "plain_question": ("What is the capital of Spain?", "How many wheels does a bicycle have?"),
    "date_time": ("Tell me today's date, please.", "Got the current time handy?"),
    "read_file": ("Crack open project.txt; I need the codename from it.",
                  "project.txt mentions a codename. Which one?"),
    "file_question": ("Which person wrote the file report.txt?", "Find out from report.txt who authored it."),
    "write_file": ("Put milk, eggs and bread into a new file named shopping.txt, a line for each.",
                   "Can you make shopping.txt listing milk, eggs, bread (one per line)?"),
    "note": ("Write down for me: the plumber needs a call regarding invoice {v}.",
             "Quick note please - call the plumber, invoice {v}."),
    "remember": ("Keep this in your memory: my server's name is {v}.",
                 "FYI, I named my server {v}; please don't forget it."),
    "remind_once": ("Set a 3-minute reminder for me to stretch my legs.",
                    "Give me a shout in three minutes to stretch my legs."),
    "remind_every": ("Hourly, please remind me to have some water.",
                     "I want to be reminded to drink water on the hour, every hour."),
    "todo": ("Two things for my to-do list: buying stamps and posting the letter.",
             "On my todo list, put: buy stamps; post the letter."),
    "subagent": ("Send a subagent off to read facts.txt and fetch me the magic number.",
                 "Use a helper agent: it should check facts.txt for the magic number and report back."),
}

# Round 26's held-out phrasings: fresh17 was read after round 25 reported it, so these were written,
# and run once with round 25's code, before round 26 changed anything.
FRESH18: dict[str, tuple[str, str]] = {
    "greeting": ("Hi, good to have you around, Navi.", "Morning! How are things with you today?"),
    "plain_question": ("What is the capital of Canada?", "How many players does a soccer team have on the field?"),
    "date_time": ("Do you know what today's date is?", "What time do you make it?"),
    "read_file": ("What codename does project.txt give?", "Look up the codename stored in project.txt for me."),
    "file_question": ("report.txt - who is its author?", "Who put report.txt together? I want the author's name."),
    "write_file": ("Save a file called shopping.txt: milk, eggs, bread, one item per line.",
                   "I need shopping.txt created with three lines: milk, eggs and bread."),
    "note": ("Record a note saying the plumber needs phoning about invoice {v}.",
             "Note for later: plumber call, invoice {v}."),
    "remember": ("Don't forget: {v} is my server's name.", "Please store the fact that my server goes by {v}."),
    "remind_once": ("When three minutes have passed, prompt me to stretch my legs.",
                    "Could you nudge me to stretch my legs in 3 minutes?"),
    "remind_every": ("Remind me to drink water once an hour.", "Every sixty minutes, nudge me to drink some water."),
    "todo": ("Create a todo list of two items, buy stamps then post the letter.",
             "My to-dos: buy stamps, post the letter. Add them to a list, please."),
    "subagent": ("Have a subagent check facts.txt and tell me the magic number.",
                 "Spin up a helper agent that reads facts.txt and returns the magic number."),
}

# Round 27's held-out phrasings: fresh18 was read after round 26 reported it, so these were written,
# and run once with round 26's code, before round 27 changed anything.
FRESH19: dict[str, tuple[str, str]] = {
    "greeting": ("Hey Navi, it's me again. How have you been?", "Good afternoon! Everything alright over there?"),
    "plain_question": ("What is the capital of Australia?", "How many sides does a square have?"),
    "date_time": ("Could you give me the current date?", "Any idea what the time is at the moment?"),
    "read_file": ("Go through project.txt and find the codename for me.",
                  "I'm after the codename written in project.txt - what is it?"),
    "file_question": ("Read report.txt and let me know whose name is given as author.",
                      "Tell me, from the file report.txt, who its writer was."),
    "write_file": ("Make shopping.txt with milk, eggs and bread, each on a separate line.",
                   "Please write a file shopping.txt: milk / eggs / bread, one item to a line."),
    "note": ("Pop a note in: I must ring the plumber about invoice {v}.",
             "Memo to self - plumber needs a phone call about invoice {v}."),
    "remember": ("Remember this about me: {v} is what my server is called.",
                 "Heads up, my server has the name {v}. Keep hold of that."),
    "remind_once": ("After 3 minutes go by, get me up to stretch my legs.",
                    "Please set an alert in 3 minutes so I stretch my legs."),
    "remind_every": ("Set up an hourly nudge for me to drink water.",
                     "Could you ping me each hour to have a glass of water?"),
    "todo": ("New to-do list please, with two entries: buy stamps and post the letter.",
             "Start a todo list for me - step one buy stamps, step two post the letter."),
    "subagent": ("I want a helper agent on this: what magic number does facts.txt hold?",
                 "Hand facts.txt to a subagent and have it tell me what the magic number is."),
}

# Round 28's held-out phrasings: fresh19 was read after round 27 reported it, so these were written,
# and run once with round 27's code, before round 28 changed anything.
FRESH20: dict[str, tuple[str, str]] = {
    "greeting": ("Navi! Nice to catch you. All good on your end?", "Yo Navi, what's new with you?"),
    "plain_question": ("Name the capital city of Egypt.", "How many days are there in the month of April?"),
    "date_time": ("Which day of the month are we on today?", "Quick one: what's the time where you are right now?"),
    "read_file": ("The codename in project.txt, please - what does it say?",
                  "project.txt has a codename in it; tell me which one."),
    "file_question": ("report.txt: which person does it list as its author?", "Can you see who the author of report.txt is?"),
    "write_file": ("Jot milk, eggs and bread into shopping.txt, one per line, as a new file.",
                   "Create the file shopping.txt containing three lines: milk, eggs, bread."),
    "note": ("Scribble down a note - ring the plumber re invoice {v}.",
             "Write a quick note for me - phone the plumber, invoice {v}."),
    "remember": ("Something to keep about me: my server's called {v}.",
                 "Keep in your memory that {v} is the name of my server."),
    "remind_once": ("Stretch break in 3 minutes - alert me when it's time.",
                    "In 3 minutes I need a reminder to stretch my legs."),
    "remind_every": ("Each hour, on repeat, remind me that I should drink water.", "I keep forgetting to drink water; remind me every hour from now on."),
    "todo": ("Jobs for my task list: buy stamps, and after that post the letter.",
             "To-do items to set up: (1) buy stamps (2) post the letter."),
    "subagent": ("Let a subagent dig the magic number out of facts.txt for me.",
                 "Could a subagent look inside facts.txt for me? I need the magic number it contains."),
}

# Round 29's held-out phrasings: fresh20 was read after round 28 reported it, so these were written,
# and run once with round 28's code, before round 29 changed anything.
FRESH21: dict[str, tuple[str, str]] = {
    "greeting": ("Evening, Navi. Hope your day went well?", "Hiya! Just dropping in to say hello."),
    "plain_question": ("In which country would you find the city of Lisbon?", "How many hearts does an octopus have?"),
    "date_time": ("Tell me today's weekday and date, would you?", "What's the exact time just now, to the minute?"),
    "read_file": ("Open up project.txt; I'm looking for its codename.",
                  "From project.txt, fetch me the codename, thanks."),
    "file_question": ("Whose work is report.txt? Check the author line.",
                      "I'd like to know the author listed inside report.txt."),
    "write_file": ("Put milk, eggs and bread in a fresh file named shopping.txt, each item its own line.",
                   "shopping.txt should be made now, holding milk then eggs then bread on separate lines."),
    "note": ("Add to my notes: need to ring the plumber, invoice number {v}.",
             "Take down this note - plumber, phone them, invoice {v}."),
    "remember": ("For future reference, my server answers to the name {v}.",
                 "Make a lasting note in memory: my server = {v}."),
    "remind_once": ("Once 3 minutes are up, send word that it's time I stretched my legs.",
                    "Give me a shout in 3 min so I remember to stretch my legs."),
    "remind_every": ("Hourly, without end, I'd like a reminder to drink water.",
                     "Water reminder please - one every hour, ongoing."),
    "todo": ("Put two things on my to-do list: buy stamps first, then post the letter.",
             "I have two errands for a todo list: buying stamps and posting the letter afterwards."),
    "subagent": ("Dispatch a helper agent to go through facts.txt and report its magic number.",
                 "I'd rather a subagent handled this: find the magic number written in facts.txt."),
}

# Round 29's second held-out phrasings: written at the end of round 29, after it had read fresh21, and run once with
# round 29's final code, before anything was changed on what they show.
FRESH22: dict[str, tuple[str, str]] = {
    "greeting": ("Hello hello! Long time no see, Navi.", "Greetings, Navi - how's life treating you?"),
    "plain_question": ("What colour do you get by mixing blue and yellow?", "How many minutes make up a quarter of an hour?"),
    "date_time": ("Remind me what the date is today - I've lost track.", "Whats the time right now, roughly?"),
    "read_file": ("Peek into project.txt and pull out the codename.", "There's a codename in project.txt. Read it out to me."),
    "file_question": ("Who signed report.txt as its author?", "report.txt was written by whom? Check the file."),
    "write_file": ("New file please, shopping.txt, lines: milk / eggs / bread.",
                   "Can shopping.txt be created with milk, eggs and bread, a line apiece?"),
    "note": ("Notes entry, please: plumber needs a ring about invoice {v}.",
             "A note to file away - call the plumber regarding invoice {v}."),
    "remember": ("Worth remembering for later: my server's name is {v}.", "Log this in your memory: the server I own is named {v}."),
    "remind_once": ("3 minutes from now I'd like a nudge to stretch my legs.",
                    "Can you buzz me after three minutes to stretch my legs?"),
    "remind_every": ("Hour after hour, keep reminding me to drink water.", "Set a recurring water reminder for every hour."),
    "todo": ("Todo, two items: buy stamps; post the letter once that's done.",
             "Put together my to-do list: first buy stamps, then post the letter."),
    "subagent": ("Get a helper agent to fetch whatever magic number facts.txt holds.",
                 "Subagent job: open facts.txt and bring me back the magic number."),
}

# Round 30's held-out phrasings: fresh21 and fresh22 were read in round 29, so these were written, and run once
# with round 29's final code, before round 30 changed anything.
FRESH23: dict[str, tuple[str, str]] = {
    "greeting": ("Morning, Navi! How are things going?", "Hey there, just checking in. You doing okay?"),
    "plain_question": ("Which planet is closest to the Sun?", "How many centimetres are in a metre?"),
    "date_time": ("What date does the calendar show today?", "Got the current time handy? What is it?"),
    "read_file": ("project.txt - read it and tell me the codename inside.", "Codename check: what's written in project.txt?"),
    "file_question": ("report.txt - whose name is on it as the author?", "Which name appears as author in report.txt?"),
    "write_file": ("Make me shopping.txt: milk on line one, eggs on line two, bread on line three.",
                   "Write a shopping.txt file listing milk, eggs and bread on their own lines."),
    "note": ("Save a note: plumber call-back, invoice {v}.", "Could you record a note to ring the plumber about invoice {v}?"),
    "remember": ("So you know for next time: {v} is what my server is called.", "Store in memory that my server goes by {v}."),
    "remind_once": ("Alert me in 3 minutes: stretch my legs.", "Ping me when 3 minutes have gone by, so I stretch my legs."),
    "remind_every": ("Water, every sixty minutes: nag me to drink some.", "Could you set an hourly reminder telling me to drink water?"),
    "todo": ("Could my todo list get these: stamps to buy, a letter to post after?", "Two tasks for my todo - buy stamps, then post the letter."),
    "subagent": ("Spin up a subagent - its job is the magic number in facts.txt.",
                 "Use a helper agent: I want the magic number from facts.txt."),
}

# Round 30's second held-out phrasings: written at the end of round 30, after it had read fresh23, and run once with
# round 30's final code, before anything was changed on what they show.
FRESH24: dict[str, tuple[str, str]] = {
    "greeting": ("Good afternoon! Anything fun happening today, Navi?", "Hallo Navi, glad you're around. How's it going?"),
    "plain_question": ("What is the capital of Norway?", "How many zeros are in one thousand?"),
    "date_time": ("Today's date - could you give it to me?", "I need the time - what does your clock say right now?"),
    "read_file": ("What's the codename? It's somewhere in project.txt.", "Can you check project.txt and give me the codename from it?"),
    "file_question": ("According to report.txt, who is its author?", "report.txt: who wrote this one?"),
    "write_file": ("Set up shopping.txt with milk, eggs and bread - each gets its own line.",
                   "I'd like a file called shopping.txt: first line milk, then eggs, then bread."),
    "note": ("Make a note that the plumber must be rung about invoice {v}.", "Quick note for later: plumber, invoice {v}, give them a call."),
    "remember": ("Please hold on to this: {v} is my server's name.", "My server has a name - {v}. Keep that in mind for the future."),
    "remind_once": ("In 3 minutes, tell me it's time to stretch my legs.", "Three minutes on, I'll need reminding to stretch my legs - can you?"),
    "remind_every": ("Drinking water - please remind me of it every hour.", "From now on, an hourly nudge to drink water would be great."),
    "todo": ("Set up my todo list: buy stamps, then post the letter.", "To-do for today: buy stamps and afterwards post the letter."),
    "subagent": ("Delegate to a subagent: facts.txt has a magic number, I want it.",
                 "A helper agent should read facts.txt and tell me the magic number."),
}

HELD_OUT = (FRESH, FRESH2, FRESH3, FRESH4, FRESH5, FRESH6, FRESH7, FRESH8, FRESH9, FRESH10, FRESH11,
            FRESH12, FRESH13, FRESH14, FRESH15, FRESH16, FRESH17, FRESH18, FRESH19, FRESH20,
            FRESH21, FRESH22, FRESH23, FRESH24)  # phrasings 5 and 6 on, in SPLIT's order

TASKS: list[Task] = [Task(intent=intent, phrasing=i, text=text, run=run)
                     for intent, (run, texts) in PHRASINGS.items()
                     for i, text in enumerate(texts + sum((held[intent] for held in HELD_OUT), ()))]


def tasks(half: str = "both") -> list[Task]:
    """The tasks of ``half`` (one of HALVES; "both" is dev and test, "all" every one), in a fixed order."""
    if half not in (*HALVES, "both", "all"):
        raise ValueError(f"unknown half {half!r}: use {', '.join(HALVES)}, both (dev and test) or all")
    return [t for t in TASKS if half == "all" or t.split == half or half == "both" and t.split in ("dev", "test")]
