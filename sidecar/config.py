"""Command-line options of `python -m sidecar`, and the objects they select."""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from sidecar.agent.backends.groups import CommandLimits
from sidecar.agent.external.definitions import AgentConfigError, AgentDefinition, parse_cli_agent
from sidecar.agent.providers import keys
from sidecar.agent.providers.base import Provider, gives_images
from sidecar.checkpoints.store import CheckpointStore
from sidecar.core.output_spools import OutputSpools
from sidecar.domain.records import SessionRecord
from sidecar.store.base import SessionStore

APP_NAME = "acp-session-host"
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


@dataclass(frozen=True)
class Config:
    data_dir: Path
    store: str
    provider: str
    model: str | None
    base_url: str | None
    limits: CommandLimits
    context_budget: int
    lease_ttl: float
    log_level: str
    max_tokens: int | None = None
    thinking_budget: int | None = None
    context_window: int | None = None
    # Models (fnmatch globs) the provider's endpoint gives no images: prompts with one
    # are refused before their turn, and `initialize` says so for the default model.
    text_only_models: tuple[str, ...] = ()
    mcp_start_timeout: float = 20.0
    mcp_call_timeout: float = 120.0
    checkpoints: bool = True
    spool_cap: int = 64 * 1024 * 1024
    checkpoint_max_file_bytes: int = 10 * 1024 * 1024
    checkpoint_max_files: int = 100_000  # 0: no bound (sidecar/checkpoints/store.py)
    # --store postgres: the libpq URL (its password is never shown), the timeout of a
    # request's waits, the pool size; and the host id leases name (pids are compared
    # only between sidecars with the same one).
    database_url: str | None = field(default=None, repr=False)
    db_timeout: float = 10.0
    db_pool_size: int = 10
    host_id: str = ""
    agents: tuple[AgentDefinition, ...] = ()  # --agent NAME=COMMAND
    agents_file: Path | None = None  # agents.toml
    agent_start_timeout: float = 60.0
    prewarm: tuple[str, ...] = ()  # --prewarm AGENT


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(
        prog="python -m sidecar",
        description="ACP sidecar: newline-delimited JSON-RPC 2.0 on stdin/stdout, logs on stderr.",
    )
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("SIDECAR_DATA_DIR") or platformdirs.user_data_dir(APP_NAME),
        help="where the session store lives (env SIDECAR_DATA_DIR; default: the user data dir)",
    )
    parser.add_argument("--store", choices=("sqlite", "memory", "postgres"), default="sqlite")
    parser.add_argument(
        "--database-url",
        default=os.environ.get("SIDECAR_DATABASE_URL"),
        help="--store postgres: a libpq URL, postgresql://user@host:port/dbname (env "
        "SIDECAR_DATABASE_URL; the password may also come from PGPASSWORD or ~/.pgpass)",
    )
    parser.add_argument(
        "--db-timeout",
        type=float,
        default=10.0,
        help="--store postgres: seconds a request may wait for a connection or a row lock",
    )
    parser.add_argument(
        "--db-pool-size", type=int, default=10, help="--store postgres: most connections"
    )
    parser.add_argument(
        "--host-id",
        default=os.environ.get("SIDECAR_HOST_ID") or "",
        help="this machine's name in leases (env SIDECAR_HOST_ID; default: the host name "
        "and /etc/machine-id); give each host its own",
    )
    parser.add_argument("--provider", choices=("offline", "openai", "anthropic"), default="offline")
    parser.add_argument("--model", default=None, help="model name for the provider")
    parser.add_argument(
        "--base-url",
        default=None,
        help="provider server URL (or env OPENAI_BASE_URL / ANTHROPIC_BASE_URL)",
    )
    parser.add_argument("--tool-timeout", type=float, default=600.0, help="seconds per command")
    parser.add_argument(
        "--tool-output-cap", type=int, default=64 * 1024, help="bytes of command output kept"
    )
    parser.add_argument(
        "--tool-stream-cap",
        type=int,
        default=1024 * 1024,
        help="bytes of command output streamed live to clients (events)",
    )
    parser.add_argument(
        "--context-budget",
        type=int,
        default=400_000,
        help="characters of provider context before older turns are compacted (0: never)",
    )
    parser.add_argument(
        "--interrupt-grace",
        type=float,
        default=0.5,
        help="seconds between SIGINT (the cooperative stop) and SIGTERM",
    )
    parser.add_argument(
        "--kill-grace", type=float, default=2.0, help="seconds between SIGTERM and SIGKILL"
    )
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=15.0,
        help="seconds a session's lease lasts without renewal (renewed every third of it)",
    )
    parser.add_argument(
        "--max-tokens", type=int, default=None, help="most tokens a model reply may have"
    )
    parser.add_argument(
        "--thinking-budget",
        type=int,
        default=None,
        help="anthropic: tokens the model may think before answering (extended thinking)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="openai: the model's context window in tokens, for usage reports",
    )
    parser.add_argument(
        "--text-only-model",
        action="append",
        default=[],
        metavar="GLOB",
        help="a model the provider's endpoint gives no images (a glob: 'llama3*', '*': "
        "every model); repeatable; prompts with images are refused before the turn",
    )
    parser.add_argument(
        "--mcp-start-timeout",
        type=float,
        default=20.0,
        help="seconds an MCP server may take to connect",
    )
    parser.add_argument(
        "--mcp-call-timeout", type=float, default=120.0, help="seconds one MCP tool call may take"
    )
    parser.add_argument(
        "--tool-spool-cap",
        type=int,
        default=64 * 1024 * 1024,
        help="bytes of each command's whole output kept on disk for the user (0: none)",
    )
    parser.add_argument(
        "--checkpoint-max-file-bytes",
        type=int,
        default=10 * 1024 * 1024,
        help="files larger than this are left out of checkpoints (listed as skipped)",
    )
    parser.add_argument(
        "--checkpoint-max-files",
        type=int,
        default=100_000,
        help="a session directory with more files than this (what .gitignore leaves in) is "
        "not checkpointed, and says so (0: no bound)",
    )
    parser.add_argument(
        "--no-checkpoints",
        action="store_true",
        help="take no checkpoints of the working tree (no changes lists, no code rewind)",
    )
    parser.add_argument(
        "--agent",
        action="append",
        default=[],
        metavar="NAME=COMMAND",
        help="an external ACP agent sessions may run (repeatable; COMMAND split as a shell "
        "would, leading VAR=VALUE words are its environment); beats agents.toml and presets",
    )
    parser.add_argument(
        "--agents-file",
        default=None,
        help="the agents.toml to read (default: agents.toml in the user config dir)",
    )
    parser.add_argument(
        "--agent-start-timeout",
        type=float,
        default=60.0,
        help="seconds an external agent has for initialize and session/new",
    )
    parser.add_argument(
        "--prewarm",
        action="append",
        default=[],
        metavar="AGENT",
        help="keep one initialized process of this external agent ready (repeatable), for "
        "the directory of its last session: a new session there starts without the wait",
    )
    parser.add_argument("--log-level", default="INFO")
    args = parser.parse_args(argv)
    if args.agent_start_timeout <= 0:
        parser.error("--agent-start-timeout must be positive")
    try:
        cli_agents = tuple(parse_cli_agent(text) for text in args.agent)
    except AgentConfigError as exc:
        parser.error(str(exc))
    if args.tool_spool_cap < 0:
        parser.error("--tool-spool-cap must be >= 0")
    if args.checkpoint_max_file_bytes <= 0:
        parser.error("--checkpoint-max-file-bytes must be positive")
    if args.checkpoint_max_files < 0:
        parser.error("--checkpoint-max-files must be >= 0 (0: no bound)")
    if args.mcp_start_timeout <= 0 or args.mcp_call_timeout <= 0:
        parser.error("--mcp-start-timeout and --mcp-call-timeout must be positive")
    for name in ("max_tokens", "thinking_budget", "context_window"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            parser.error(f"--{name.replace('_', '-')} must be positive")
    if args.tool_timeout <= 0 or args.tool_output_cap <= 0 or args.tool_stream_cap <= 0:
        parser.error("--tool-timeout, --tool-output-cap and --tool-stream-cap must be positive")
    if args.lease_ttl <= 0:
        parser.error("--lease-ttl must be positive")
    if args.store == "postgres" and not args.database_url:
        parser.error("--store postgres needs --database-url (or SIDECAR_DATABASE_URL)")
    if args.db_timeout <= 0 or args.db_pool_size < 1:
        parser.error("--db-timeout must be positive and --db-pool-size at least 1")
    if any(not glob.strip() for glob in args.text_only_model):
        parser.error("--text-only-model needs a model name or glob")
    if args.context_budget < 0:
        parser.error("--context-budget must be >= 0")
    if args.kill_grace < 0 or args.interrupt_grace < 0:
        parser.error("--interrupt-grace and --kill-grace must be >= 0")
    return Config(
        data_dir=Path(args.data_dir).expanduser().resolve(),
        store=args.store,
        provider=args.provider,
        model=args.model,
        base_url=args.base_url,
        limits=CommandLimits(
            timeout=args.tool_timeout,
            output_cap=args.tool_output_cap,
            stream_cap=args.tool_stream_cap,
            interrupt_grace=args.interrupt_grace,
            kill_grace=args.kill_grace,
        ),
        context_budget=args.context_budget,
        lease_ttl=args.lease_ttl,
        log_level=args.log_level.upper(),
        max_tokens=args.max_tokens,
        thinking_budget=args.thinking_budget,
        context_window=args.context_window,
        text_only_models=tuple(args.text_only_model),
        mcp_start_timeout=args.mcp_start_timeout,
        mcp_call_timeout=args.mcp_call_timeout,
        checkpoints=not args.no_checkpoints,
        spool_cap=args.tool_spool_cap,
        checkpoint_max_file_bytes=args.checkpoint_max_file_bytes,
        checkpoint_max_files=args.checkpoint_max_files,
        database_url=args.database_url,
        db_timeout=args.db_timeout,
        db_pool_size=args.db_pool_size,
        host_id=args.host_id.strip(),
        agents=cli_agents,
        agents_file=(
            Path(args.agents_file).expanduser()
            if args.agents_file
            else Path(platformdirs.user_config_dir(APP_NAME)) / "agents.toml"
        ),
        agent_start_timeout=args.agent_start_timeout,
        prewarm=tuple(dict.fromkeys(args.prewarm)),
    )


async def open_store(config: Config) -> SessionStore:
    """Raises StoreError (naming the database, never its password) if it cannot be used."""
    if config.store == "memory":
        from sidecar.store.memory import MemorySessionStore

        return MemorySessionStore()
    if config.store == "postgres" and config.database_url:
        from sidecar.store.postgres import PostgresSessionStore

        return await PostgresSessionStore.open(
            config.database_url, timeout=config.db_timeout, pool_size=config.db_pool_size
        )
    from sidecar.store.sqlite import SqliteSessionStore

    return SqliteSessionStore(config.data_dir / "sessions.db")


def checkpoint_store(config: Config) -> CheckpointStore:
    root = config.data_dir / "checkpoints" if config.checkpoints else None
    return CheckpointStore(
        root,
        config.checkpoint_max_file_bytes,
        max_files=config.checkpoint_max_files,
        data_dir=config.data_dir,
    )


def output_spools(config: Config) -> OutputSpools:
    return OutputSpools(config.data_dir / "output", config.spool_cap)


def hidden_dirs(config: Config) -> tuple[str, ...]:
    """What no sandboxed command or MCP server may see (sidecar/agent/sandbox.py: `hide`):
    this sidecar's data dir (store, checkpoints, output spools: every session's transcript
    and MCP secrets), the user's default one and SIDECAR_DATA_DIR's (other sidecars of
    ours), and the user config dir the window keeps its MCP server definitions in."""
    dirs = [
        config.data_dir,
        Path(platformdirs.user_data_dir(APP_NAME)),
        Path(platformdirs.user_config_dir(APP_NAME)),
    ]
    if os.environ.get("SIDECAR_DATA_DIR"):
        dirs.append(Path(os.environ["SIDECAR_DATA_DIR"]).expanduser())
    return tuple(dict.fromkeys(str(path.resolve()) for path in dirs))


def provider_problem(config: Config) -> str | None:
    """Why the configured provider cannot work at all (a hosted API and no key), if so."""
    if config.provider == "openai":
        key, url = "OPENAI_API_KEY", config.base_url or os.environ.get("OPENAI_BASE_URL")
        default = "https://api.openai.com/v1"
    elif config.provider == "anthropic":
        key, url = "ANTHROPIC_API_KEY", config.base_url or os.environ.get("ANTHROPIC_BASE_URL")
        default = "https://api.anthropic.com"
    else:
        return None
    return keys.missing_key(keys.resolve_key(None, key), url or None, default, key)


def takes_images(config: Config) -> bool:
    """`initialize`'s `promptCapabilities.image`: the offline provider reads text only; an
    API's default model takes images unless `--text-only-model` names it."""
    if config.provider == "offline":
        return False
    return gives_images(model_name(config), config.text_only_models)


def model_name(config: Config) -> str:
    if config.provider == "openai":
        return config.model or DEFAULT_OPENAI_MODEL
    if config.provider == "anthropic":
        return config.model or DEFAULT_ANTHROPIC_MODEL
    return config.model or "offline-echo"


def provider_factory(config: Config) -> Callable[[SessionRecord], Provider]:
    """Resolved once at start-up (imports need file descriptors, which may run out later);
    the factory makes a new provider client per runtime generation, never shared."""
    if config.provider == "openai":
        from sidecar.agent.providers.openai_provider import OpenAIProvider

        def make_openai(record: SessionRecord) -> Provider:
            return OpenAIProvider(
                model=record.model or model_name(config),
                base_url=config.base_url,
                max_tokens=config.max_tokens,
                context_window=config.context_window,
                text_only_models=config.text_only_models,
            )

        return make_openai
    if config.provider == "anthropic":
        from sidecar.agent.providers.anthropic_provider import AnthropicProvider

        def make_anthropic(record: SessionRecord) -> Provider:
            return AnthropicProvider(
                model=record.model or model_name(config),
                base_url=config.base_url,
                max_tokens=config.max_tokens,
                thinking_budget=config.thinking_budget,
                text_only_models=config.text_only_models,
            )

        return make_anthropic
    from sidecar.agent.providers.offline import OfflineProvider

    def make_offline(record: SessionRecord) -> Provider:
        return OfflineProvider(record.model or model_name(config))

    return make_offline


def model_lister(config: Config) -> Callable[[], Awaitable[list[str]]]:
    """How to ask the provider which models it offers (one request; the catalog caches)."""
    if config.provider == "openai":
        from sidecar.agent.providers.openai_provider import list_models as openai_models

        return lambda: openai_models(config.base_url)
    if config.provider == "anthropic":
        from sidecar.agent.providers.anthropic_provider import list_models as claude_models

        return lambda: claude_models(config.base_url)

    async def offline_models() -> list[str]:
        return [model_name(config)]

    return offline_models
