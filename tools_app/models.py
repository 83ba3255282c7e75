"""Per-tool switches the admin edits (DESIGN.md §6)."""
from __future__ import annotations

from django.db import models


class ToolConfig(models.Model):
    """Admin overrides for one tool, by name. No row = enabled, staff-only if dangerous."""

    name = models.CharField(max_length=128, unique=True, help_text="Tool name, e.g. terminal or mcp__echo__add.")
    enabled_globally = models.BooleanField(
        default=True, help_text="Off: no profile gets this tool and calls to it are refused."
    )
    allow_for_non_staff = models.BooleanField(
        default=False,
        help_text="Let non-staff users run this tool even if it is dangerous (terminal, ssh_exec, ...).",
    )
    notes = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "tool configuration"

    def __str__(self) -> str:
        return self.name
