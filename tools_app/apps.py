from django.apps import AppConfig


class ToolsAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from agent import ports
        from tools_app.builtins_meta.agents import SpawnAgentTool, SwitchProfileTool
        from tools_app.models import ToolConfig
        from tools_app.provider import FileTodoBoard, RegistryToolProvider, SessionWorkspace
        from tools_app.registry import register_builtin
        from tools_app.selectors import invalidate_tool_configs

        ports.provide(tools=RegistryToolProvider(), todo=FileTodoBoard(), workspace=SessionWorkspace())
        register_builtin(SpawnAgentTool)
        register_builtin(SwitchProfileTool)

        def changed(**_: object) -> None:
            invalidate_tool_configs()

        post_save.connect(changed, sender=ToolConfig, dispatch_uid="tools_app.toolconfig.saved", weak=False)
        post_delete.connect(changed, sender=ToolConfig, dispatch_uid="tools_app.toolconfig.deleted", weak=False)
