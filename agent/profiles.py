"""ProfileSpec: an immutable snapshot of an AgentProfile for one run."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from asgiref.sync import sync_to_async

from agent import ports


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileSpec:
    id: str
    name: str
    system_prompt: str = ""
    subagent_system_prompt: str = ""
    enabled_tools: tuple[str, ...] = ()
    subagent_tools: tuple[str, ...] = ()
    enabled_skills: tuple[str, ...] = ()
    model: str = ""
    llm_backend: str = "ollama"
    temperature: float = 0.7
    max_iterations: int = 50
    planning_enabled: bool = False
    planning_phase2_enabled: bool = False
    think_enabled: bool = True
    iteration_budget_enabled: bool = True
    goal_anchoring_enabled: bool = True
    goal_anchoring_interval: int = 5
    anti_stall_enabled: bool = True
    anti_stall_threshold: int = 8
    step_validation_enabled: bool = False
    adaptive_replan_enabled: bool = False
    subagent_planning_enabled: bool = False
    subagent_timeout_seconds: int = 300
    scratchpad_sections: tuple[str, ...] = ()
    local_model_aids_enabled: bool = True
    local_model_aids_off: tuple[str, ...] = ()
    tool_calling: str = "auto"  # auto | native | constrained (agent.decide)
    prompt_budget_tokens: int = 0  # system prompt + tool definitions; 0: no bound (agent.toolplan)
    allow_dangerous_tools_for_users: bool = False

    @classmethod
    def from_model(cls, obj: object) -> ProfileSpec:
        values: dict[str, Any] = {}
        for f in fields(cls):
            value = getattr(obj, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
        return cls(**values)


class ProfileNotFound(LookupError):
    pass


def load_profile(profile_id: str) -> ProfileSpec:
    """Read a profile through the profiles port (blocking: may hit the database). Raises ProfileNotFound."""
    return ports.profiles().load(profile_id)


aload_profile = sync_to_async(load_profile, thread_sensitive=False)
