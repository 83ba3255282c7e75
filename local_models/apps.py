from django.apps import AppConfig


class LocalModelsConfig(AppConfig):
    """The model servers' models and pulls, a session's model, and `manage.py real_model`."""

    name = "local_models"
    verbose_name = "Model servers"
