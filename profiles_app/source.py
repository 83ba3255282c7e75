"""The profiles app's side of the agent's ProfileSource port (``agent.ports``).

Both reads run in executor threads (``agent.profiles.aload_profile``, the loop's profile ids), whose
connections never meet a request boundary: they reconnect when the server dropped them
(``navi_site.db_connections.reconnecting``), or the first turn after a PostgreSQL restart fails."""
from __future__ import annotations

from agent.profiles import ProfileNotFound, ProfileSpec
from navi_site.db_connections import reconnecting
from profiles_app.models import AgentProfile


class DjangoProfileSource:
    @reconnecting
    def load(self, profile_id: str) -> ProfileSpec:
        obj = AgentProfile.objects.filter(pk=profile_id).first()
        if obj is None:
            raise ProfileNotFound(f"Profile {profile_id!r} does not exist.")
        return ProfileSpec.from_model(obj)

    @reconnecting
    def active_ids(self) -> list[str]:
        return list(AgentProfile.objects.filter(is_active=True).values_list("id", flat=True))
