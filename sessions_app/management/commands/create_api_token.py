from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from sessions_app.models import ApiToken


class Command(BaseCommand):
    help = "Create a personal API token for USERNAME and print it (it is shown only once)."

    def add_arguments(self, parser):  # type: ignore[no-untyped-def]
        parser.add_argument("username")
        parser.add_argument("--name", default="", help="A label, e.g. 'backup script'.")

    def handle(self, *args, username: str, name: str, **options):  # type: ignore[no-untyped-def]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named {username!r}. Create it first (open Navi in the browser).")
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive; activate it in the admin first.")
        _, raw = ApiToken.issue(user=user, name=name)
        self.stdout.write(raw)
        self.stderr.write("Store this token now: it cannot be shown again. Revoke it in the admin (/admin/).")
