from django.apps import AppConfig


class SkillsAppConfig(AppConfig):
    """Skills: SKILL.md folders in SKILLS_DIR and skills/, the prompt's skills block, skill_view and
    skill_write, proposals and versions, the /skills API and page."""

    default_auto_field = "django.db.models.BigAutoField"
    name = "skills_app"
    verbose_name = "Skills"

    def ready(self) -> None:
        from agent import ports
        from sessions_app.hooks import on_turn_finished
        from skills_app.catalog import get_catalog
        from skills_app.services import proposals_after_turn
        from skills_app.tools import SKILL_TOOLS
        from tools_app.registry import register_builtin

        ports.provide(skills=get_catalog())
        on_turn_finished(proposals_after_turn)
        for tool in SKILL_TOOLS:
            register_builtin(tool)
