from django.apps import AppConfig


class AgentConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "agent"

    def ready(self) -> None:
        from agent.agent_tools import SpawnAgentTool, SwitchProfileTool
        from tools_app.registry import register_builtin

        register_builtin(SpawnAgentTool)
        register_builtin(SwitchProfileTool)
