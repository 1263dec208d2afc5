"""How the agent loop runs (``AgentSpec``): light, so a command can take the agent options without importing the
loop and its tools (DuckDB, the tool declarations) until ``--agent`` is given."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_STEPS = 5


@dataclass(frozen=True)
class AgentSpec:
    """How the loop runs: at most ``steps`` tool calls, and whether it starts from the search of the question."""

    steps: int = DEFAULT_STEPS
    prefetch: bool = False
