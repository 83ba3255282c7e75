from django.apps import AppConfig


class LocalModelsConfig(AppConfig):
    """`manage.py real_model`: a small model server on this machine (no models of its own)."""

    name = "local_models"
    verbose_name = "Local model server"
