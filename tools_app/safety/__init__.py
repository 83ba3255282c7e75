"""Safety policy helpers shared by the built-in tools (DESIGN.md §6)."""
