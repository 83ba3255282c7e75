"""Run ``llama_cpp.server`` with a bounded default answer length (executed by the server's own venv).

    <cache>/server-venv/bin/python local_models/llama_serve.py --default_max_tokens 1024 <server options>

llama-cpp-python generates until the context is full when a chat request has no
``max_tokens`` (Navi sends none). A 0.5B model that falls into a loop then holds
the only slot for minutes. This wrapper makes ``max_tokens`` default to a bound;
a request that sets it is unchanged. It imports only llama_cpp (not Navi).

It also hands the GGUF chat template the tool-call arguments as an object: the
OpenAI wire format (what Navi sends) carries them as a JSON *string*, and Qwen2.5's
template renders ``arguments | tojson``, so the model would see its own earlier
calls as ``"arguments": "{\\"timezone\\": ...}"`` and start imitating that.
"""
from __future__ import annotations

import json
import sys


def _take_default(argv: list[str]) -> int:
    if "--default_max_tokens" not in argv:
        return 1024
    i = argv.index("--default_max_tokens")
    value = int(argv[i + 1])
    del argv[i : i + 2]
    return value


def _decoded(message: object) -> object:
    if not isinstance(message, dict) or not message.get("tool_calls"):
        return message
    calls = []
    for call in message["tool_calls"]:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            try:
                function = {**function, "arguments": json.loads(function["arguments"])}
            except ValueError:
                pass
            call = {**call, "function": function}
        calls.append(call)
    return {**message, "tool_calls": calls}


def _arguments_as_objects() -> None:
    from llama_cpp import llama_chat_format

    formatter = llama_chat_format.Jinja2ChatFormatter
    original = formatter.__call__

    def call(self, *, messages, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return original(self, messages=[_decoded(m) for m in messages], **kwargs)

    formatter.__call__ = call


def main() -> None:
    limit = _take_default(sys.argv)
    from llama_cpp.server import types

    for model in (types.CreateChatCompletionRequest, types.CreateCompletionRequest):
        model.model_fields["max_tokens"].default = limit
        model.model_rebuild(force=True)
    _arguments_as_objects()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
