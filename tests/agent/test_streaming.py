"""The hold-back of text that might be a tool call written as JSON."""
from __future__ import annotations

import pytest

from agent.llm.base import StreamChunk
from agent.streaming import StreamedCall


async def _feed(pieces: list[str]) -> tuple[list[str], StreamedCall]:
    async def chunks():
        for p in pieces:
            yield StreamChunk(kind="text", text=p)

    call = StreamedCall(chunks(), emit=True, holdback=True)
    seen = []
    async for ev in call.events():
        seen.append(ev.delta)
    return seen, call


async def test_plain_prose_streams_without_delay() -> None:
    pieces = ["The weather ", "in Porto is ", "sunny today, ", "about 21 degrees."]
    seen, _ = await _feed(pieces)
    assert seen == pieces  # every delta goes out as soon as it arrives


async def test_text_after_a_possible_opener_waits_until_it_is_clear() -> None:
    seen, call = await _feed(["Use the set ", "{a, b} of ", "values here and more words to pass the window."])
    assert "".join(seen) + "".join(e.delta for e in call.finish_events(is_tool_turn=False)) == call.text
    assert seen[0] == "Use the set "


async def test_a_call_is_held_back_entirely() -> None:
    seen, call = await _feed(['{"name": "todo", ', '"arguments": {"action": "read"}}'])
    assert seen == [] and call.held_text().startswith('{"name"')


@pytest.mark.parametrize("pieces", [
    ["``", '`json\n{\n  "action": "set"}\n```'],  # Qwen through llama-cpp-python: "``" first
    ["``", "`j", "so", "n\n", "  ", '{"action": "set"}\n```'],  # the brace after the fence's newline
])
async def test_a_fence_whose_pieces_arrive_one_by_one_is_held_back(pieces) -> None:
    seen, call = await _feed(pieces)
    assert seen == [] and call.opened_like_a_call


async def test_a_fence_of_code_streams_once_its_first_line_shows_it() -> None:
    seen, _ = await _feed(["```python\n", "print('hi')\n", "```\nThat prints hi, and here are more words."])
    assert "".join(seen).startswith("```python\nprint")


async def test_code_in_prose_still_streams() -> None:
    seen, _ = await _feed(["`ls` lists ", "the files of a folder, one per line, and more words here."])
    assert "".join(seen).startswith("`ls` lists")


@pytest.mark.parametrize("pieces", [
    ["<tools>\n", '<function name="filesystem" action="stat" path="x">\n', "</function>\n</tools>"],
    ["<", "tool", "s>\n<function", '=filesystem>{"path": "x"}</function>'],
    ["<function", ' name="todo">{"action": "read"}</function>'],
    ["<tool_call>", '{"name": "todo"}', "</tool_call>"],
])
async def test_a_call_written_as_markup_is_held_back(pieces) -> None:
    seen, call = await _feed(pieces)
    assert seen == [] and call.opened_like_a_call


async def test_a_fence_after_prose_shows_none_of_its_backticks() -> None:
    # The 1.5B model: prose, then "``" and "`json" in two deltas, then the call.
    seen, call = await _feed(["To find out, I will use the `filesystem` function with the following arguments:\n",
                              "``", "`json\n", '{"name": "filesystem", "arguments": {"action": "read"}}\n```'])
    assert "".join(seen) == "To find out, I will use the `filesystem` function with the following arguments:\n"


async def test_an_answer_that_starts_with_other_markup_still_shows() -> None:
    seen, call = await _feed(["<b>Note</b>: ", "the build passed."])
    shown = "".join(seen) + "".join(e.delta for e in call.finish_events(is_tool_turn=False))
    assert shown == "<b>Note</b>: the build passed." and not call.opened_like_a_call
