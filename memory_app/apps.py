from django.apps import AppConfig


class MemoryAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "memory_app"
    verbose_name = "Memory"

    def ready(self) -> None:
        from agent import ports
        from memory_app.provider import DjangoMemoryProvider
        from memory_app.scheduling import on_session_created
        from sessions_app.hooks import on_session_created as add_created_hook

        ports.provide(memory=DjangoMemoryProvider())
        add_created_hook(on_session_created)
        try:
            from tools_app.registry import register_builtin
        except ImportError:  # the registry is not there yet (parallel development)
            return
        from memory_app.tools import MEMORY_TOOLS

        for tool in MEMORY_TOOLS:
            register_builtin(tool)
