"""Test doubles: a fake Ollama / OpenAI-compatible server on a real loopback socket."""
