"""The external agents we know how to run without any configuration: the ACP adapters of
Claude Code and Codex, and the ACP modes of Gemini CLI and Qwen Code. Program names are the
`bin` entries of their npm packages (checked with `npm view PACKAGE bin`).

`shared_process` only where an agent is known to serve several sessions over one
connection: both adapters keep a table of sessions by id (as Zed, which runs one process
per agent for all its threads, relies on; claude-agent-acp 0.23 `sessions[sessionId]`,
codex-acp 0.16 checked by tests/test_real_agents_e2e.py). Gemini and Qwen stay one process
per session until tried."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from sidecar.agent.external.definitions import AgentDefinition

_ALL = (
    AgentDefinition(
        name="claude",
        command=("claude-agent-acp",),
        pass_env=(
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_USE_BEDROCK",
            "CLAUDE_CODE_USE_VERTEX",
        ),
        writable=("~/.claude", "~/.claude.json"),
        install="npm install -g @zed-industries/claude-agent-acp",
        shared_process=True,
    ),
    AgentDefinition(
        name="codex",
        command=("codex-acp",),
        pass_env=("OPENAI_API_KEY", "CODEX_HOME"),
        writable=("~/.codex",),
        install="npm install -g @zed-industries/codex-acp",
        shared_process=True,
    ),
    AgentDefinition(
        name="gemini",
        command=("gemini", "--acp"),  # --acp since 0.33; --experimental-acp before
        pass_env=(
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_GEMINI_BASE_URL",
            "GOOGLE_CLOUD_PROJECT",
        ),
        writable=("~/.gemini",),
        install="npm install -g @google/gemini-cli",
    ),
    AgentDefinition(
        name="qwen",
        command=("qwen", "--acp"),
        pass_env=("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY"),
        writable=("~/.qwen",),
        install="npm install -g @qwen-code/qwen-code",
    ),
)

PRESETS: Mapping[str, AgentDefinition] = MappingProxyType({d.name: d for d in _ALL})
