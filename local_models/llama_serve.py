"""Run ``llama_cpp.server`` with a bounded default answer length (executed by the server's own venv).

    <cache>/server-venv/bin/python local_models/llama_serve.py --default_max_tokens 1024 <server options>

llama-cpp-python generates until the context is full when a chat request has no
``max_tokens`` (Navi sends none). A 0.5B model that falls into a loop then holds
the only slot for minutes. This wrapper makes ``max_tokens`` default to a bound;
a request that sets it is unchanged. It imports only llama_cpp (not Navi).

It keeps the evaluated prompts of a few other conversations aside (``--prompt_slots``): the
server has one context, so a request with another prompt (a memory summary, a session
title, a helper agent) used to throw away the conversation's evaluated prompt, and its next
request re-read all ~2 000 tokens of it (110 s for the 1.5B model on a loaded 2-core
machine). The state is saved only when a request leaves a long evaluated stretch behind,
and loaded when a request continues one, unlike llama-cpp-python's own ``--cache``, which
saves it after every request (a second or more each time).

It also hands the GGUF chat template the tool-call arguments as an object: the
OpenAI wire format (what Navi sends) carries them as a JSON *string*, and Qwen2.5's
template renders ``arguments | tojson``, so the model would see its own earlier
calls as ``"arguments": "{\\"timezone\\": ...}"`` and start imitating that.

It frees a request's sampler (its grammar) when the request ends, rather than when the next one begins, and
gives the memory freed back to the system (glibc's ``malloc_trim``; ``--no_trim`` turns both off). What had
made the servers grow to 9 and 11 GB was not the grammar but the server's ``logits_all`` default, which
``real_model`` now turns off (``server.server_command``; docs/benchmarks.md, "Issue 24, round 22").
"""
from __future__ import annotations

import json
import sys
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any


def _take(argv: list[str], option: str, default: int) -> int:
    """The value of one of the wrapper's own options, taken out of ``argv`` (the server does not know it)."""
    if option not in argv:
        return default
    i = argv.index(option)
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


SWAP_MIN_TOKENS = 256  # a stretch of evaluated prompt shorter than this is cheaper to read again than to keep


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens ``a`` and ``b`` share from the start."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PromptSlots:
    """The evaluated state of up to ``slots`` other prompts, swapped in and out of the server's one context.

    ``swap(llama, tokens)`` runs before a request is evaluated: if it would overwrite a long evaluated stretch
    (``SWAP_MIN_TOKENS``), that state is kept (replacing an earlier state of the same conversation, the
    oldest dropped beyond ``slots``); if a kept state shares a longer stretch with the request than the
    context does, it is loaded, and generation reads only what follows. ``llama``: a ``llama_cpp.Llama``
    (``_input_ids``, ``save_state``, ``load_state``)."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.kept: OrderedDict[tuple[int, ...], Any] = OrderedDict()

    def swap(self, llama: Any, tokens: Sequence[int]) -> int:
        """Returns the number of tokens a loaded state brought back (0: none was loaded)."""
        evaluated = [int(t) for t in llama._input_ids.tolist()]
        shared = _shared(evaluated, tokens)
        if len(evaluated) - shared >= SWAP_MIN_TOKENS:
            key = tuple(evaluated)
            for old in [k for k in self.kept if _shared(k, key) == len(k)]:
                del self.kept[old]
            self.kept[key] = _lean(llama, llama.save_state())
            while len(self.kept) > self.slots:
                self.kept.popitem(last=False)
        best = max(self.kept, key=lambda k: _shared(k, tokens), default=None)
        if best is None or _shared(best, tokens) - shared < SWAP_MIN_TOKENS:
            return 0
        llama.load_state(self.kept[best])
        self.kept.move_to_end(best)
        return _shared(best, tokens)


def _lean(llama: Any, state: Any) -> Any:
    """A kept state without the logits it need not keep: without ``logits_all`` only the last row of its
    scores is ever read, and a copy of all of them (``n_batch`` x the vocabulary, 156 MB for Qwen2.5) came with
    every kept prompt. ``load_state`` broadcasts the one row back."""
    scores: Any = getattr(state, "scores", None)
    if getattr(llama, "_logits_all", True) or getattr(scores, "ndim", 0) != 2 or len(scores) <= 1:
        return state
    state.scores = scores[-1:].copy()
    return state


def _prompt_slots(slots: int) -> None:
    if slots <= 0:
        return
    from llama_cpp.llama import Llama

    kept = PromptSlots(slots)
    original = Llama._create_completion

    def _create_completion(self, prompt, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if isinstance(prompt, list) and prompt:  # the chat handler's tokens (a text prompt is left alone)
            restored = kept.swap(self, prompt)
            if restored:
                print(f"prompt slot restored: {restored} tokens", file=sys.stderr)
        return original(self, prompt, *args, **kwargs)

    Llama._create_completion = _create_completion


def finishing(original: Callable[..., Generator[Any, Any, Any]],
              trim: Callable[[int], Any] | None) -> Callable[..., Iterator[Any]]:
    """``Llama._create_completion`` that, when the completion ends, frees the sampler it made (its grammar; the
    server keeps it until the next request otherwise) and returns freed memory to the system (``trim``).

    Only the request's own sampler is freed: a stream whose client went away is closed when the garbage
    collector gets to it, which may be while the next request generates (the server's lock is free by then),
    and that request's sampler must stay."""

    def _create_completion(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        ours = None
        chunks = original(self, *args, **kwargs)
        try:
            for chunk in chunks:
                ours = self._sampler  # the one this request's generation made
                yield chunk
        except Exception:
            ours = self._sampler  # generation failed in the request's own thread, before any chunk: its sampler
            raise
        finally:
            chunks.close()
            # A close from the garbage collector could still pass this test just before the next request sets its
            # sampler (a few bytecodes); only a lock the next request's start takes too would close that.
            if ours is not None and self._sampler is ours:
                self._sampler = None
            if trim is not None:
                trim(0)

    return _create_completion


def _free_after_requests() -> None:
    """Free each completion's sampler and return freed memory to the system when it ends (``malloc_trim``
    is glibc's; elsewhere the sampler is still freed)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # not glibc (musl, macOS): no malloc_trim
        trim = None
    if trim is None:
        print("malloc_trim is not available: freed memory may stay with the server", file=sys.stderr)
    else:
        trim.argtypes = [ctypes.c_size_t]
    from llama_cpp.llama import Llama

    Llama._create_completion = finishing(Llama._create_completion, trim)


def _arguments_as_objects() -> None:
    from llama_cpp import llama_chat_format

    formatter = llama_chat_format.Jinja2ChatFormatter
    original = formatter.__call__

    def call(self, *, messages, **kwargs):  # noqa: ANN001, ANN003, ANN202
        return original(self, messages=[_decoded(m) for m in messages], **kwargs)

    formatter.__call__ = call


def main() -> None:
    limit = _take(sys.argv, "--default_max_tokens", 1024)
    slots = _take(sys.argv, "--prompt_slots", 0)
    trim = "--no_trim" not in sys.argv
    if not trim:
        sys.argv.remove("--no_trim")
    from llama_cpp.server import types

    for model in (types.CreateChatCompletionRequest, types.CreateCompletionRequest):
        model.model_fields["max_tokens"].default = limit
        model.model_rebuild(force=True)
    _arguments_as_objects()
    _prompt_slots(slots)
    if trim:
        _free_after_requests()
    from llama_cpp.server.__main__ import main as serve

    serve()


if __name__ == "__main__":
    main()
