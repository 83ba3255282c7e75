from django.apps import AppConfig


class RecallAppConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "recall_app"
