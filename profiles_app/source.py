"""The profiles app's side of the agent's ProfileSource port (``agent.ports``)."""
from __future__ import annotations

from agent.profiles import ProfileNotFound, ProfileSpec
from profiles_app.models import AgentProfile


class DjangoProfileSource:
    def load(self, profile_id: str) -> ProfileSpec:
        obj = AgentProfile.objects.filter(pk=profile_id).first()
        if obj is None:
            raise ProfileNotFound(f"Profile {profile_id!r} does not exist.")
        return ProfileSpec.from_model(obj)

    def active_ids(self) -> list[str]:
        return list(AgentProfile.objects.filter(is_active=True).values_list("id", flat=True))
