"""The model server's prompt slots (``local_models/llama_serve.py``): a request with another prompt (a memory
summary, a title, a helper agent) no longer throws away a conversation's evaluated prompt. ``Context`` stands
in for llama-cpp-python's ``Llama`` (its context of evaluated tokens, ``save_state`` and ``load_state``); the
real server is measured by the probe in docs/benchmarks.md ("Issue 24, round 14")."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from local_models.llama_serve import SWAP_MIN_TOKENS, PromptSlots, _lean, finishing

LONG = SWAP_MIN_TOKENS * 4


@dataclass
class Context:
    evaluated: list[int] = field(default_factory=list)
    saves: int = 0
    loads: int = 0

    @property
    def _input_ids(self) -> np.ndarray:
        return np.array(self.evaluated, dtype=np.intc)

    def save_state(self) -> list[int]:
        self.saves += 1
        return list(self.evaluated)

    def load_state(self, state: list[int]) -> None:
        self.loads += 1
        self.evaluated = list(state)

    def run(self, slots: PromptSlots, prompt: list[int]) -> int:
        """A request: the slots swap, then the prompt is evaluated; returns the tokens read anew."""
        slots.swap(self, prompt)
        shared = next((i for i, (a, b) in enumerate(zip(self.evaluated, prompt, strict=False)) if a != b),
                      min(len(self.evaluated), len(prompt)))
        self.evaluated = list(prompt)
        return len(prompt) - shared


def prompt(tag: int, length: int) -> list[int]:
    return [tag] * length


def test_a_conversation_comes_back_after_another_prompt_without_being_read_again() -> None:
    context, slots = Context(), PromptSlots(2)
    conversation = prompt(1, LONG)
    assert context.run(slots, conversation) == LONG
    assert context.run(slots, prompt(2, 30)) == 30  # a memory summary in between: the conversation is kept aside
    assert context.run(slots, conversation + [7, 8]) == 2  # only the new tokens are read
    assert (context.saves, context.loads) == (1, 1)


def test_the_same_conversation_costs_no_save() -> None:
    context, slots = Context(), PromptSlots(2)
    conversation = prompt(1, LONG)
    for extra in range(5):
        context.run(slots, conversation + list(range(extra)))
    assert context.saves == 0 and context.loads == 0


def test_a_short_stretch_is_not_kept_and_a_short_gain_not_loaded() -> None:
    context, slots = Context(), PromptSlots(2)
    context.run(slots, prompt(1, SWAP_MIN_TOKENS - 1))
    context.run(slots, prompt(2, LONG))
    assert context.saves == 0
    assert context.run(slots, prompt(1, SWAP_MIN_TOKENS - 1)) == SWAP_MIN_TOKENS - 1  # read again: cheaper


def test_the_oldest_conversation_is_dropped_beyond_the_slots_and_an_earlier_state_is_replaced() -> None:
    context, slots = Context(), PromptSlots(2)
    first, second, third = prompt(1, LONG), prompt(2, LONG), prompt(3, LONG)
    context.run(slots, first)
    context.run(slots, first + [5])  # the same conversation, one step on
    for other in (second, third, prompt(4, LONG)):  # first, second, third are kept aside in turn
        context.run(slots, other)
    assert len(slots.kept) == 2 and all(key[0] != 1 for key in slots.kept)  # first went, as the oldest
    assert context.run(slots, third + [9]) == 1
    assert context.run(slots, first + [5, 6]) == LONG + 2  # dropped: read again whole


# -- what a request leaves behind (round 22) ----------------------------------------------------------------


class Generating:
    """Stands in for ``Llama`` in ``_create_completion``: generation makes the request's sampler."""

    def __init__(self) -> None:
        self._sampler: object | None = None

    def original(self, name: str, chunks: int = 3):  # noqa: ANN201 - a generator, as llama-cpp-python's is
        self._sampler = object()
        if chunks < 0:
            raise RuntimeError("llama_decode returned 1")
        for i in range(chunks):
            yield f"{name}{i}"


def test_a_finished_completion_frees_its_sampler_and_trims() -> None:
    trims: list[int] = []
    llama = Generating()
    complete = finishing(Generating.original, trims.append)
    assert list(complete(llama, "a")) == ["a0", "a1", "a2"]
    assert llama._sampler is None and trims == [0]


def test_a_completion_that_fails_before_its_first_chunk_frees_its_sampler() -> None:
    trims: list[int] = []
    llama = Generating()
    with pytest.raises(RuntimeError, match="llama_decode"):
        list(finishing(Generating.original, trims.append)(llama, "a", -1))
    assert llama._sampler is None and trims == [0]


def test_a_stream_closed_late_leaves_the_running_requests_sampler_alone() -> None:
    # A stream whose client went away is closed when the garbage collector gets to it, possibly while the next
    # request generates: that request's sampler (its grammar) must stay.
    llama = Generating()
    complete = finishing(Generating.original, None)
    abandoned = complete(llama, "a")
    assert next(abandoned) == "a0"
    running = complete(llama, "b")
    assert next(running) == "b0"
    sampler_of_b = llama._sampler
    abandoned.close()
    assert llama._sampler is sampler_of_b
    assert list(running) == ["b1", "b2"] and llama._sampler is None


@dataclass
class State:
    scores: np.ndarray


@dataclass
class Kept:
    _logits_all: bool


def test_a_kept_state_keeps_one_row_of_scores_without_logits_all() -> None:
    scores = np.arange(12, dtype=np.single).reshape(4, 3)
    lean = _lean(Kept(_logits_all=False), State(scores.copy()))
    assert lean.scores.tolist() == [[9.0, 10.0, 11.0]]
    target = np.zeros((4, 3), dtype=np.single)
    target[:2, :] = lean.scores  # what load_state does: one row broadcasts
    assert target[1].tolist() == [9.0, 10.0, 11.0]
    assert _lean(Kept(_logits_all=True), State(scores.copy())).scores.shape == (4, 3)  # logprobs need them all
