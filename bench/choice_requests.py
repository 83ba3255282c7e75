"""Everyday requests for the first-step choice bench (``bench/tool_choice.py``), written apart
from the broad suite (tests/realmodel/broad.py) with other words and other objects, so that what
is tuned on one is checked on the other.

Each request names the tools that would be a right first step (an empty set: an answer in words)
and the files its session holds. **Dev/test split fixed here**: within every intent the requests
alternate, the first dev, the second test, and so on. Choose mechanisms on dev; report both.
"""
from __future__ import annotations

from dataclasses import dataclass

FILES = {
    "notes.md": "# Garden\nThe first seedlings came up on Tuesday.\nWater the tomatoes every evening.\n",
    "config.ini": "[server]\nhost = 0.0.0.0\nport = 8421\n",
    "hello.txt": "Hello from the past, dated 2019.\n",
    "data.csv": "name,score\nava,3\nben,5\ncid,4\n",
    "recipe.txt": "Lemon cake\nBake at 180 C for 35 minutes.\n",
    "letter.txt": "Dear Sam, the keys are under the mat. Love, Jo\n",
    "guests.txt": "Rosa\nMalik\nIngrid\n",
    "budget.txt": "rent 900\nfood 312\ntravel 80\n",
    "errands.txt": "post office\n",
}


@dataclass(frozen=True, slots=True)
class Request:
    intent: str
    text: str
    want: frozenset[str]  # right first steps (tool names, ANSWER for an answer in words); empty: answer in words
    files: tuple[str, ...] = ()
    split: str = "dev"


# Answering in words is right too: the date is in every system prompt ("Today is Friday, 2026-11-27 (UTC).");
# the time of day is not.
ANSWER = "answer"
DATE_ONLY = {"What's the date today?", "Which month are we in?", "Is it a weekend today?", "What year is it now?",
             "What's today's weekday?"}


def _intent(intent: str, want: set[str], *items: str | tuple[str, tuple[str, ...]]) -> list[Request]:
    out = []
    for i, item in enumerate(items):
        text, files = (item, ()) if isinstance(item, str) else item
        out.append(Request(intent=intent, text=text, want=frozenset(want | ({ANSWER} if text in DATE_ONLY else set())),
                           files=files, split="dev" if i % 2 == 0 else "test"))
    return out


REQUESTS: list[Request] = [
    *_intent("no_tool", set(),
             "Hi there!", "Thanks, that's all for now.", "What's the tallest mountain in the world?",
             "How many days are in a leap year?", "Can you explain what photosynthesis is in one sentence?",
             "Good evening! How are you doing?", "What is 15 multiplied by 4?", "Who painted the Mona Lisa?",
             "Give me a synonym for 'happy'.", "Cheers, you've been a great help.",
             "What's the chemical symbol for gold?", "Translate 'good night' into Spanish."),
    *_intent("clock", {"get_current_datetime"},
             "What's the date today?", "Which month are we in?", "Tell me the current time in UTC.",
             "Is it a weekend today?", "What year is it now?", "Could you check what time it is?",
             "What's today's weekday?", "How late is it right now?"),
    *_intent("file_read", {"filesystem", "spawn_agent"},
             ("Open notes.md and summarise it.", ("notes.md",)),
             ("What does config.ini say about the port?", ("config.ini",)),
             ("Print the contents of hello.txt.", ("hello.txt",)),
             ("How many rows of scores are in data.csv?", ("data.csv",)),
             ("In recipe.txt, how long should the cake bake?", ("recipe.txt",)),
             ("Read letter.txt to me.", ("letter.txt",)),
             ("Which names appear in guests.txt?", ("guests.txt",)),
             ("Check budget.txt: how much did we spend on food?", ("budget.txt",))),
    *_intent("file_write", {"filesystem"},
             "Create a file called packing.txt with passport, charger and socks.",
             "Save the text 'Meeting moved to Friday' into memo.txt.",
             "Write a haiku about autumn to poem.txt.",
             ("Append 'call mum' to errands.txt.", ("errands.txt",)),
             "Put the numbers one to five in count.txt, each on its own line.",
             "Make a file named greeting.txt that says hello world."),
    *_intent("note", {"user_notes"},
             "Make a note: the wifi password is in the blue folder.", "Write down that the car needs an oil change.",
             "Note: parking spot 42B.", "Add to my notes that the dentist's number is 555-0192.",
             "Keep a note saying the gate code is 7781.", "Can you take a note? Book club meets on Thursdays.",
             "Show me my notes.", "Jot down: order more printer ink."),
    *_intent("fact", {"memory_save"},
             "I'm vegetarian, please remember that.", "Remember my birthday is on 14 July.",
             "Please store in your memory that I prefer metric units.",
             "From now on, keep in mind I live in Lisbon.", "Make sure you remember that I work night shifts.",
             "Save this about me: I'm allergic to cats.", "Remember: my favourite colour is green.",
             "You should know that my dog is called Biscuit, don't forget it."),
    *_intent("reminder", {"schedule_recall"},
             "Remind me to call the bank in 10 minutes.", "In half an hour, tell me to check the oven.",
             "Ping me tomorrow at 9 about the dentist.", "Every morning at 8, remind me to take my vitamins.",
             "Give me a nudge in 5 minutes to take the laundry out.",
             "Set an alarm for 20 minutes from now to move the car.",
             "Every Monday, remind me to put the bins out.", "Could you remind me at 6 pm to water the plants?",
             "Every two hours, remind me to stand up.", "Alert me in 15 minutes that the tea is ready."),
    *_intent("todo", {"todo"},
             "Make me a checklist: pack bags, lock the door, leave the key with the neighbour.",
             "Plan these steps as a to-do: wash the car, vacuum the seats.",
             "Create a task list with: email Tom, book flights, renew passport.",
             "Track these tasks for me: clean the fridge and defrost the freezer.",
             "Set up a list of things to do today: gym, groceries, laundry.",
             "Add steps to my to-do list: call the plumber, fix the sink."),
    *_intent("delegate", {"spawn_agent"},
             ("Ask a helper agent to read notes.md and tell me its first line.", ("notes.md",)),
             "Get a subagent to check the date and report back.",
             ("Let a sub-agent summarise letter.txt for me.", ("letter.txt",)),
             "Delegate this to a helper: find out what time it is.",
             ("Send a helper agent to count the rows in data.csv.", ("data.csv",)),
             ("Use a separate agent to look through guests.txt and list the names.", ("guests.txt",)),
             ("Hand off to a subagent: read config.ini and tell me the port.", ("config.ini",)),
             ("Could a helper agent open recipe.txt and give me the baking time?", ("recipe.txt",))),
]


def requests(half: str) -> list[Request]:
    if half not in ("dev", "test", "both"):
        raise ValueError(f"unknown half {half!r}: use dev, test or both")
    return [r for r in REQUESTS if half == "both" or r.split == half]
