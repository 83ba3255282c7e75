from django.apps import AppConfig


class ProfilesConfig(AppConfig):
    """Agent profiles: the AgentProfile model, its admin, the /agents router and the default profiles.

    The app keeps the label ``agent`` it had when the model lived in the agent core: the table
    (``agent_agentprofile``), the migration history (``agent.0001`` …), the admin URLs
    (``/admin/agent/agentprofile/``) and every ``"agent.AgentProfile"`` reference stay valid, so an
    existing database needs no migration for the move.
    """

    default_auto_field = "django.db.models.BigAutoField"
    name = "profiles_app"
    label = "agent"
    verbose_name = "Profiles"

    def ready(self) -> None:
        from agent import ports
        from profiles_app.source import DjangoProfileSource

        ports.provide(profiles=DjangoProfileSource())
