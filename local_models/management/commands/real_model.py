"""``manage.py real_model setup|start|stop|status|profile``: a small local model on a plain CPU.

    python manage.py real_model setup [--cache DIR] [--model qwen|qwen1.5b|smollm]
    python manage.py real_model start [--port 8089] [--model qwen]
    python manage.py real_model stop
    python manage.py real_model status
    python manage.py real_model profile [--model qwen] [--aids on|off] [--constraints on|off] [--aids-off a,b]

Everything lives in the cache directory (``--cache``, else $NAVI_REAL_MODEL_DIR, else
~/.cache/navi/real-model), never in the repository.
"""
from __future__ import annotations

import argparse
from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from local_models import catalog, server, weights
from local_models.profile import PROFILE_ID, profile_upsert


class Command(BaseCommand):
    help = "Install, run and use a small local model (llama-cpp-python server) — no GPU, no internet after setup."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["setup", "start", "stop", "status", "profile"])
        parser.add_argument("--cache", default=None, help=f"Cache directory (default ${catalog.CACHE_ENV} "
                            f"or {catalog.DEFAULT_CACHE}).")
        parser.add_argument("--model", default="qwen", choices=sorted(catalog.MODELS))
        parser.add_argument("--port", type=int, default=catalog.DEFAULT_PORT)
        parser.add_argument("--threads", type=_threads, default=2, metavar="N",
                            help="start: CPU threads for the model (default 2). On a machine whose cores are busy "
                                 "with other work, 1 is faster: two threads wait for each other at every step.")
        parser.add_argument("--aids", choices=["on", "off"], default="on",
                            help="profile: the local-model aids of local_small (for comparisons).")
        parser.add_argument("--constraints", choices=["on", "off"], default="on",
                            help="profile: constrained decisions (on) or native tool calls (off) for local_small.")
        parser.add_argument("--aids-off", default="", metavar="AID[,AID]",
                            help="profile: single local-model aids to switch off (for measuring each one's uplift).")
        parser.add_argument("--no-profile", action="store_true", help="setup: do not create the local_small profile.")

    def handle(self, *args: Any, **opts: Any) -> None:
        spec = catalog.model_spec(opts["model"])
        cache = catalog.cache_dir(opts["cache"])
        paths = server.Paths(cache=cache)
        try:
            getattr(self, f"_{opts['action']}")(spec, paths, opts)
        except (weights.WeightsError, server.ServerError) as exc:
            raise CommandError(str(exc)) from None

    def _echo(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _setup(self, spec: catalog.ModelSpec, paths: server.Paths, opts: dict[str, Any]) -> None:
        paths.cache.mkdir(parents=True, exist_ok=True)
        self._echo(f"Cache: {paths.cache}")
        weights.ensure_weights(spec, paths.cache, echo=self._echo)
        weights.ensure_embedder(catalog.EMBEDDER, paths.cache, echo=self._echo)
        server.ensure_server(paths, echo=self._echo)
        if not opts["no_profile"]:
            self._profile(spec, paths, opts)
        port = opts["port"]
        self._echo(self.style.SUCCESS(f"\nReady: {spec.title}."))
        self._echo(f"""
Start the model server (background, loopback only):
    python manage.py real_model start --port {port}{_model_flag(spec)}
Then give Navi these settings (in .env or the environment) and restart it:
    OPENAI_BASE_URL={server.base_url(port)}
    OLLAMA_NUM_CTX={spec.n_ctx}
and chat with the profile '{PROFILE_ID}' (llm_backend=openai, model={spec.alias}); in the admin you can
set any other profile to llm_backend=openai and model={spec.alias}.
Stop the server with: python manage.py real_model stop""")

    def _start(self, spec: catalog.ModelSpec, paths: server.Paths, opts: dict[str, Any]) -> None:
        model_path = paths.cache / "models" / spec.filename
        if not weights.stamp_ok(model_path, spec):
            raise CommandError(f"{spec.title} is not installed in {paths.cache}: run "
                               f"`python manage.py real_model setup{_model_flag(spec)}` first")
        url = server.start(paths, spec, model_path, port=opts["port"], echo=self._echo, threads=opts["threads"])
        self._echo(f"OPENAI_BASE_URL={url}\nLog: {paths.log}")

    def _stop(self, spec: catalog.ModelSpec, paths: server.Paths, opts: dict[str, Any]) -> None:
        server.stop(paths, echo=self._echo)

    def _status(self, spec: catalog.ModelSpec, paths: server.Paths, opts: dict[str, Any]) -> None:
        st = server.status(paths)
        installed = [m.key for m in catalog.MODELS.values()
                     if weights.stamp_ok(paths.cache / "models" / m.filename, m)]
        self._echo(f"cache:   {paths.cache}")
        self._echo(f"weights: {', '.join(installed) or 'none'}")
        self._echo(f"server:  llama-cpp-python {st['installed'] or 'not installed'}")
        if st["running"]:
            self._echo(f"running: pid {st['pid']} at {st['url']} (models: {', '.join(st['models'] or []) or 'not answering'})")
        else:
            self._echo("running: no")
        self._echo(f"log:     {st['log']}")

    def _profile(self, spec: catalog.ModelSpec, paths: server.Paths, opts: dict[str, Any]) -> None:
        # On a fresh clone `setup` may run before Navi ever started: create the tables first, as `start` does.
        call_command("migrate", interactive=False, verbosity=0)
        off = [a.strip() for a in opts["aids_off"].split(",") if a.strip()]
        try:
            _, created = profile_upsert(alias=spec.alias, aids=opts["aids"] == "on",
                                        constrained=opts["constraints"] == "on", aids_off=off)
        except ValueError as exc:
            raise CommandError(f"--aids-off: {exc}") from None
        self._echo(f"profile: {PROFILE_ID} {'created' if created else 'updated'} "
                   f"(llm_backend=openai, model={spec.alias}, local-model aids {opts['aids']}"
                   f"{' except ' + ', '.join(off) if off else ''}, constrained decisions {opts['constraints']})")


def _threads(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 64:
        raise argparse.ArgumentTypeError(f"{value!r} is not a thread count: give a whole number from 1 to 64")
    return number


def _model_flag(spec: catalog.ModelSpec) -> str:
    return "" if spec.key == "qwen" else f" --model {spec.key}"
