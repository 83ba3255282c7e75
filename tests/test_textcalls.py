"""Tool calls written as JSON text: what counts as a call, and what must not."""
from __future__ import annotations

import pytest

from agent.textcalls import extract_text_tool_calls

KNOWN = {"get_time", "web_search", "filesystem"}

CALLS = [
    pytest.param('{"name": "get_time", "arguments": {"timezone": "UTC"}}',
                 [("get_time", {"timezone": "UTC"})], "", id="bare"),
    pytest.param('  {"name": "get_time", "parameters": {"timezone": "UTC"}}\n',
                 [("get_time", {"timezone": "UTC"})], "", id="parameters"),
    pytest.param('{"tool": "web_search", "args": {"query": "navi"}}',
                 [("web_search", {"query": "navi"})], "", id="tool-args"),
    pytest.param('{"name": "web_search", "arguments": "{\\"query\\": \\"navi\\"}"}',
                 [("web_search", {"query": "navi"})], "", id="string-arguments"),
    pytest.param('{"name": "get_time"}', [("get_time", {})], "", id="no-arguments"),
    pytest.param('{"type": "function", "function": {"name": "get_time", "arguments": {}}}',
                 [("get_time", {})], "", id="openai-shape"),
    pytest.param('[{"name": "get_time", "arguments": {}}, {"name": "web_search", "arguments": {"query": "x"}}]',
                 [("get_time", {}), ("web_search", {"query": "x"})], "", id="list"),
    pytest.param('```json\n{"name": "get_time", "arguments": {}}\n```',
                 [("get_time", {})], "", id="fenced"),
    pytest.param('```\n{"name": "get_time", "arguments": {}}\n```', [("get_time", {})], "", id="plain-fence"),
    pytest.param("I'll check the time. {\"name\": \"get_time\", \"arguments\": {}}",
                 [("get_time", {})], "I'll check the time.", id="prose-then-json"),
    pytest.param('Let me look that up.\n\n```json\n{"name": "web_search", "arguments": {"query": "weather"}}\n```',
                 [("web_search", {"query": "weather"})], "Let me look that up.", id="prose-then-fence"),
    pytest.param('<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
                 [("get_time", {})], "", id="tool-call-tag"),
    pytest.param('{"name": "get_time", "arguments": {}}\n{"name": "web_search", "arguments": {"query": "q"}}',
                 [("get_time", {}), ("web_search", {"query": "q"})], "", id="two-bare-objects"),
]


@pytest.mark.parametrize(("text", "expected", "remaining"), CALLS)
def test_recognised_calls(text: str, expected: list[tuple[str, dict[str, object]]], remaining: str) -> None:
    result = extract_text_tool_calls(text, KNOWN)
    assert [(c.name, c.arguments) for c in result.calls] == expected
    assert all(c.arguments_error is None and c.id.startswith("call_") for c in result.calls)
    assert result.remaining_text == remaining
    assert result.malformed is None and result.unknown_tool is None


NOT_CALLS = [
    pytest.param("The time is 12:00.", id="plain-text"),
    pytest.param('{"city": "Berlin", "temp": 21}', id="data-object"),
    pytest.param('{"name": "get_time", "arguments": {}, "result": "12:00"}', id="extra-keys"),
    pytest.param('{"result": {"name": "get_time", "arguments": {}}}', id="nested-in-data"),
    pytest.param(
        "Here is an example of a tool call:\n\n```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```",
        id="example-fence",
    ),
    pytest.param('To call a tool, write e.g. {"name": "get_time", "arguments": {}}', id="eg"),
    pytest.param(
        "Tools are called with JSON. For example:\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}",
        id="for-example",
    ),
    pytest.param(
        "Function calling lets a model use tools. The model writes a request and the runtime executes it.\n\n"
        "It picks a tool by name and passes its arguments as an object.\n\n"
        "A request then reads:\n\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"x\"}}\n\n"
        "After that the runtime sends the result back and the model continues its answer with it, which is how "
        "agents like this one can look things up on the web, read files, and keep track of time zones.",
        id="paragraphs-around",
    ),
    pytest.param(
        "Sure! Here is a JSON object with a name and arguments, as you asked. I chose a realistic tool name so it "
        "is easy to read, and I kept the arguments small so you can reuse it in your own test suite without "
        "changes. The name field holds the function, the arguments field an object of named parameters. "
        "Everything is standard JSON, so any parser will accept it, and the keys are in the usual order that "
        "most libraries produce when they serialise such a request.\n\n"
        "```json\n{\"name\": \"web_search\", \"arguments\": {\"query\": \"cats\"}}\n```",
        id="long-answer-asked-for-json",
    ),
    pytest.param(
        "In Python you would do this:\n\n```python\nclient.call('get_time')\n```\n\nand the wire message is\n\n"
        "```json\n{\"name\": \"get_time\", \"arguments\": {}}\n```",
        id="other-code-fence",
    ),
    pytest.param("See [the docs](http://x) and {braces} in text.", id="braces-in-prose"),
    pytest.param('Here is the JSON you wanted:\n```json\n{"name": "get_time", "arguments": {}}\n```', id="here-is-json"),
]


@pytest.mark.parametrize("text", NOT_CALLS)
def test_not_calls(text: str) -> None:
    result = extract_text_tool_calls(text, KNOWN)
    assert result.calls == []
    assert result.malformed is None and result.unknown_tool is None
    assert result.remaining_text == text


def test_unknown_tool() -> None:
    text = '{"name": "launch_rocket", "arguments": {"target": "moon"}}'
    result = extract_text_tool_calls(text, KNOWN)
    assert result.calls == [] and result.unknown_tool == "launch_rocket"
    assert result.remaining_text == text


def test_known_and_unknown_in_one_list() -> None:
    text = '[{"name": "get_time", "arguments": {}}, {"name": "nope", "arguments": {}}]'
    result = extract_text_tool_calls(text, KNOWN)
    assert [c.name for c in result.calls] == ["get_time"] and result.unknown_tool == "nope"


def test_bare_name_only_is_not_reported_as_unknown() -> None:
    assert extract_text_tool_calls('{"name": "Alice"}', KNOWN).unknown_tool is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param('{"name": "get_time", "arguments": {"timezone": "UT', "unbalanced braces", id="unbalanced"),
        pytest.param('{"name": "get_time", "arguments": {"timezone": ', "unbalanced braces", id="cut-after-colon"),
    ],
)
def test_malformed_known_call(text: str, problem: str) -> None:
    result = extract_text_tool_calls(text, KNOWN)
    assert result.calls == []
    assert result.malformed is not None and problem in result.malformed
    assert "'get_time'" in result.malformed or "'web_search'" in result.malformed
    assert result.remaining_text == text


@pytest.mark.parametrize("text", [
    '{"name": "get_time", "arguments": {"timezone": "UTC"}',  # Qwen2.5-Coder 0.5B, as observed
    '{"name": "get_time", "arguments": {"timezone": "UTC"',
    '```json\n{"name": "get_time", "arguments": {"timezone": "UTC"}\n```',
    'Let me check. {"name": "get_time", "arguments": {"timezone": "UTC"}  ',
])
def test_call_missing_only_its_final_braces_is_completed(text: str) -> None:
    result = extract_text_tool_calls(text, KNOWN)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_time", {"timezone": "UTC"})]
    assert result.malformed is None and "{" not in result.remaining_text


def test_missing_braces_are_not_added_in_the_middle_of_an_answer() -> None:
    text = 'The call looks like {"name": "get_time", "arguments": {"timezone": "UTC"}'
    assert extract_text_tool_calls(text, KNOWN).calls == []


def test_malformed_unknown_tool_is_not_reported() -> None:
    result = extract_text_tool_calls('{"name": "other", "arguments": {', KNOWN)
    assert result.malformed is None and result.calls == []


def test_invalid_string_arguments_become_arguments_error() -> None:
    result = extract_text_tool_calls('{"name": "get_time", "arguments": "{not json"}', KNOWN)
    (call,) = result.calls
    assert call.arguments == {} and "not valid JSON" in (call.arguments_error or "")


def test_arguments_of_wrong_type() -> None:
    (call,) = extract_text_tool_calls('{"name": "get_time", "arguments": [1, 2]}', KNOWN).calls
    assert call.arguments == {} and "must be a JSON object" in (call.arguments_error or "")


def test_short_trailing_text_is_kept() -> None:
    result = extract_text_tool_calls('{"name": "get_time", "arguments": {}}\nOne moment.', KNOWN)
    assert [c.name for c in result.calls] == ["get_time"] and result.remaining_text == "One moment."


def test_no_known_tools() -> None:
    assert extract_text_tool_calls('{"name": "get_time", "arguments": {}}', set()).calls == []


def test_a_reply_repeating_one_call_runs_it_once_and_calls_are_capped() -> None:
    one = '{"name": "get_time", "arguments": {"timezone": "UTC"}}'
    assert len(extract_text_tool_calls("\n".join([one] * 40), KNOWN).calls) == 1
    many = "\n".join(f'{{"name": "get_time", "arguments": {{"timezone": "Zone/{i}"}}}}' for i in range(10))
    result = extract_text_tool_calls(many, KNOWN)
    assert [c.arguments["timezone"] for c in result.calls] == ["Zone/0", "Zone/1", "Zone/2", "Zone/3"]
    assert result.remaining_text == ""


def test_junk_object_naming_a_known_tool_next_to_a_call_is_dropped() -> None:
    # Qwen2.5-Coder 0.5B after a get_time result (real transcript, shortened names): the call again,
    # then a todo-like object with keys no call has, then a stray brace.
    junk = ('{"name": "filesystem", "arguments": ["set", ["steps", "list"], "read", "write", "append", "mkdir", "delete"], '
            '"validation": "Read /tmp/build.log with filesystem. If errors, read last 50 lines and report.", '
            '"note": "Read /tmp/build.log with filesystem. If errors, read last 50 lines and report."}}')
    result = extract_text_tool_calls('{"name": "get_time", "arguments": {"timezone": "UTC"}}\n' + junk, KNOWN)
    assert [c.name for c in result.calls] == ["get_time"] and result.remaining_text == ""


def test_object_with_extra_keys_alone_stays_data() -> None:
    text = '{"name": "filesystem", "arguments": {"path": "x"}, "validation": "done"}'
    assert extract_text_tool_calls(text, KNOWN).calls == []
    assert extract_text_tool_calls(text, KNOWN).remaining_text == text


def test_a_finished_call_with_a_string_left_open_is_repaired() -> None:
    # Qwen 0.5B on "note down 'order 667 ships on <that date>'": the closing double quote is missing.
    text = ('```json\n{\n  "name": "todo",\n  "arguments": {\n    "action": "set",\n'
            '    "steps": ["find out today\'s date", "note down \'order 667 ships on <that date>\']\n  }\n}\n```')
    result = extract_text_tool_calls(text, {"todo"})
    assert [(c.name, c.arguments) for c in result.calls] == [
        ("todo", {"action": "set", "steps": ["find out today's date", "note down 'order 667 ships on <that date>'"]})]
    assert result.malformed is None and result.remaining_text == ""


def test_a_call_cut_off_midway_is_not_completed_by_the_repair() -> None:
    result = extract_text_tool_calls('{"name": "todo", "arguments": {"action": "se', {"todo"})
    assert result.calls == [] and result.malformed


@pytest.mark.parametrize(("text", "name", "arguments"), [
    ("```json\n{\"name\": \"web_search\", \"arguments\": {'query': 'x'}}\n```", "web_search", {"query": "x"}),
    ('Checking. {"name": "get_time", "arguments": {"tz": "UTC",}}', "get_time", {"tz": "UTC"}),
], ids=["single-quotes-fenced", "trailing-comma"])
def test_a_finished_call_with_wrong_quotes_or_commas_is_repaired(text: str, name: str, arguments: dict) -> None:
    result = extract_text_tool_calls(text, KNOWN)
    assert [(c.name, c.arguments) for c in result.calls] == [(name, arguments)] and result.malformed is None


def test_a_reply_that_is_only_a_call_with_an_imagined_result_is_the_call() -> None:
    # Qwen 0.5B as a subagent: the call, plus the answer it made up.
    text = '{"name": "get_time", "arguments": {"timezone": "UTC"}, "content": "42"}'
    assert extract_text_tool_calls(text, KNOWN).calls == []  # data, unless the caller asks for this leniency
    result = extract_text_tool_calls(text, KNOWN, extra_keys_alone=True)
    assert [(c.name, c.arguments) for c in result.calls] == [("get_time", {"timezone": "UTC"})]
    assert result.remaining_text == ""


def test_such_an_object_inside_an_answer_stays_text() -> None:
    text = 'Here is the record: {"name": "get_time", "arguments": {"timezone": "UTC"}, "content": "42"}'
    assert extract_text_tool_calls(text, KNOWN, extra_keys_alone=True).calls == []


def test_the_repair_never_picks_a_later_call() -> None:
    text = ('{"name": "get_time", "arguments": {"tz": "UTC" "x": 1}} and '
            '{"name": "web_search", "arguments": {"query": "x"}}')
    result = extract_text_tool_calls(text, KNOWN)
    assert result.calls == [] and result.malformed


def test_only_result_keys_make_a_lone_object_a_call() -> None:
    text = '{"name": "get_time", "arguments": {"tz": "UTC"}, "validation": "done"}'
    assert extract_text_tool_calls(text, KNOWN, extra_keys_alone=True).calls == []


def test_words_as_a_name_beside_arguments_are_a_call_of_no_tool() -> None:
    """The 0.5B wrote its write as prose and a fenced call named after the user's words (round 20); shown as
    the answer, the user read raw JSON. With its arguments object, it is an attempt (``unknown_tool``)."""
    text = ("Certainly! Here's a file named `shopping.txt` with milk, eggs and bread on separate lines:\n\n```json\n"
            '{\n  "name": "file shopping.txt",\n  "arguments": {\n    "content": "milk\\neggs\\nbread"\n  }\n}\n```\n\n'
            "This file is stored in the session directory.")
    result = extract_text_tool_calls(text, KNOWN)
    assert result.calls == [] and result.unknown_tool == "file shopping.txt"


def test_words_as_a_name_without_arguments_are_data() -> None:
    assert extract_text_tool_calls('{"name": "Alice Smith"}', KNOWN).unknown_tool is None
    assert extract_text_tool_calls('{"name": "Alice Smith", "arguments": "none"}', KNOWN).unknown_tool is None
    # Data the user asked for, under another key (the review's case, round 20).
    data = '{"name": "Linear Regression", "parameters": {"alpha": 0.1, "fit_intercept": true}}'
    assert extract_text_tool_calls(data, KNOWN).unknown_tool is None
    assert extract_text_tool_calls('[{"id": 1, "name": "Buy milk", "args": {"qty": 2}}]', KNOWN).unknown_tool is None


def test_a_name_that_is_no_string_is_data_not_a_crash() -> None:
    for text in ('{"name": ["a b"], "arguments": {}}', '{"name": {"x": 1}, "arguments": {}}'):
        assert extract_text_tool_calls(text, KNOWN).calls == []
    text = 'For example: {"name": "get the weather", "arguments": {"city": "Oslo"}}'  # an explanation
    assert extract_text_tool_calls(text, KNOWN).unknown_tool is None


@pytest.mark.parametrize("text", [
    '{"a": ' * 3000 + "1" + "}" * 3000,  # bare, deeper than Python's parser goes
    "Here it is:\n```json\n" + '{"a": ' * 3000 + "1" + "}" * 3000 + "\n```",
    "<tool_call>" + "[" * 3000 + "]" * 3000 + "</tool_call>",
    '{"name": "get_time", "arguments": ' + "[" * 3000 + "]" * 3000 + "}",
    '{"name": "get_time", "arguments": "' + "[" * 3000 + "]" * 3000 + '"}',  # the arguments as a JSON string
])
def test_json_nested_thousands_deep_is_no_call_and_no_crash(text) -> None:
    """The review's case (round 20): it raised RecursionError, which would have broken the turn."""
    result = extract_text_tool_calls(text, KNOWN)
    assert all(call.arguments_error for call in result.calls)  # none runs: a call of unreadable arguments is repaired


def test_a_decision_nested_thousands_deep_is_a_problem_not_a_crash() -> None:
    from agent.decide import parse_decision

    assert "nested too deep" in (parse_decision('{"a": ' * 3000 + "1" + "}" * 3000, []).problem or "")


def test_tool_arguments_nested_thousands_deep_are_an_error_not_a_crash() -> None:
    from agent.llm.http_common import parse_arguments
    from tools_app.execution import parse_args

    deep = "[" * 3000 + "]" * 3000
    assert parse_arguments("get_time", deep)[1].startswith("the arguments for tool 'get_time' are nested too deep")
    assert parse_args(deep) == (None, "the arguments are nested too deep to read; send a flat JSON object")
