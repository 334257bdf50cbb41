"""Message models for what ACP does not define: the session summary, transcript entries,
our `_meta` keys on `session/new`, and the params of our extension methods and HTTP
bodies (both transports validate with the same models).

Wire names are camelCase (ACP's convention); Python names are snake_case.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from protocol.values import Approval, Backend, Mode, RewindScope, Sandbox, Status


class WireModel(BaseModel):
    # defer_build: a model's validator is built on its first use, not at import (start-up
    # pays only for the models its first requests use).
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, defer_build=True
    )

    def to_wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json")


def _integral(value: Any) -> Any:
    """JSON has one number type: 24.0 is the integer 24 (to JSON Schema and to any client
    that writes floats). Anything else is left for the strict int check to refuse."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# An integer as JSON means it: 24 and 24.0, never "24", true or 24.5.
JsonInt = Annotated[StrictInt, BeforeValidator(_integral)]
SessionId = Annotated[str, Field(min_length=1, max_length=200)]
# Enum fields accept their string values (the models are otherwise strict).
ModeField = Annotated[Mode, Field(strict=False)]
BackendField = Annotated[Backend, Field(strict=False)]
StatusField = Annotated[Status, Field(strict=False)]
ApprovalField = Annotated[Approval, Field(strict=False)]
SandboxField = Annotated[Sandbox, Field(strict=False)]


class HttpEndpoint(WireModel):
    """Where a live session listens. The bearer token is not here: `_session/http`."""

    url: str


class HttpAccess(WireModel):
    """`_session/http` result: the listener and its token, for a client that asks."""

    url: str
    token: str


class McpServerStatus(WireModel):
    """One MCP server of the session; never its env values or headers."""

    name: str
    transport: Literal["stdio", "http", "sse"]
    status: Literal["connecting", "connected", "failed", "closed"]
    tools: int
    error: str | None


class InstructionFileUsed(WireModel):
    """A project instruction file (AGENTS.md, CLAUDE.md) the builtin engine's prompt holds,
    as the live runtime last read it."""

    path: str
    bytes: int  # its size on disk
    cut: bool  # only its first part is in the prompt (the cut is marked there)
    skipped: str | None = None  # why it is left out (binary, outside the project, unreadable)


class AwaitingPermission(WireModel):
    tool_call_id: str
    title: str
    since: str


class TokenTotals(WireModel):
    input_tokens: int
    output_tokens: int


class WorktreeSummary(WireModel):
    """A session's own git worktree: where, which branch off which base, and how it
    stands as of its last turn (null while it is not live)."""

    repo: str
    path: str
    branch: str
    base: str
    ahead: int | None
    behind: int | None
    dirty: bool | None


class SessionSummary(WireModel):
    """The one shape of a session everywhere: stdio, `session/list` `_meta`, HTTP."""

    session_id: str
    cwd: str
    title: str
    status: StatusField
    mode: ModeField
    backend: BackendField
    generation: int
    # Bumped by every change the store makes to the record: the higher is the newer summary.
    version: int = Field(ge=1)
    live: bool
    message_count: int
    last_error: str | None
    interrupted: bool
    forked_from: str | None = None
    archived: bool = False  # hidden from session/list unless asked for (_session/archive)
    imported_from: str | None = None  # the exported session's id (_session/import)
    agent: str = "builtin"  # what runs the turns: our loop, or an external ACP agent's name
    worktree: WorktreeSummary | None = None  # its own git worktree, when made in one
    # Set when another live sidecar process runs this session (it holds the lease).
    held_by: str | None = None
    model: str | None = None
    usage: TokenTotals
    turns: int
    approval: ApprovalField
    sandbox: SandboxField  # the setting (workspace unless chosen)
    effective_sandbox: SandboxField  # what commands run under (plan: always read-only)
    sandbox_problem: str | None  # why commands cannot be contained here, if they cannot
    checkpoint_problem: str | None  # why turns are not checkpointed, if they are not
    awaiting_permission: AwaitingPermission | None
    mcp_servers: list[McpServerStatus]
    # Observed by the live builtin runtime (never stored): empty when not live, and for
    # external agents, which read their own.
    instructions: list[InstructionFileUsed] = []
    created_at: str
    updated_at: str
    http: HttpEndpoint | None


class StrictParams(WireModel):
    # Unknown keys are tolerated (ACP lets clients add `_meta` and future fields);
    # wrong types on known keys are not.
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, strict=True, defer_build=True
    )


def _title(value: Any) -> Any:
    if isinstance(value, str):
        stripped = value.strip()
        if not stripped:
            raise ValueError("must be non-empty text")
        return stripped
    return value


Title = Annotated[str, BeforeValidator(_title), Field(min_length=1, max_length=200)]


class NewSessionParams(StrictParams):
    """ACP's `session/new` params, the fields of its schema (`acp.schema.NewSessionRequest`,
    which tests/test_protocol_methods.py pins these to): read with this model so the first
    session request need not wait for ACP's schema to load. The servers' own shapes are
    checked by the MCP definitions' parser."""

    cwd: str
    mcp_servers: list[Any] = Field(default_factory=list)
    additional_directories: list[Any] | None = None  # unused; ACP's model drops bad items


class ListSessionsParams(StrictParams):
    """ACP's `session/list` params (`acp.schema.ListSessionsRequest`, pinned likewise)."""

    cwd: str | None = None
    cursor: str | None = None


class WorktreeMeta(StrictParams):
    """`_meta.worktree` as an object: the new branch (default `acp/<short id>`) and the
    base it starts from (default: the repository's current branch)."""

    branch: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    base: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class NewSessionMeta(StrictParams):
    """Our keys inside `session/new` `params._meta`."""

    mode: ModeField = Mode.CRAFT
    backend: BackendField = Backend.PIPE
    title: Title = "Untitled session"
    approval: ApprovalField = Approval.ASK
    sandbox: SandboxField | None = None  # the mode's default (workspace; plan: read-only)
    # What runs the turns: "builtin" or an external agent's name (`_session/agents`).
    agent: Annotated[str, Field(min_length=1, max_length=40)] = "builtin"
    # Work in a new git worktree of the cwd's repository (true, or a branch and base).
    worktree: StrictBool | WorktreeMeta | None = None


class WorktreeDiffParams(StrictParams):
    session_id: SessionId
    cursor: JsonInt = Field(default=0, ge=0)
    limit: JsonInt = Field(default=100, ge=1, le=1000)


class WorktreeMergeParams(StrictParams):
    session_id: SessionId
    strategy: Literal["merge", "squash", "rebase"] = "merge"
    message: Annotated[str, Field(min_length=1, max_length=10_000)] | None = None


class WorktreePatchParams(StrictParams):
    session_id: SessionId
    directory: Annotated[str, Field(min_length=1, max_length=4096)] | None = None


class WorktreeOrphansParams(StrictParams):
    """Worktrees in our `<repo>.worktrees/` directories whose session is gone."""

    repo: Annotated[str, Field(min_length=1, max_length=4096)] | None = None  # default: known
    prune: StrictBool = False  # remove them (their branches are kept)


HunkId = Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]


class RevertParams(StrictParams):
    """`_session/revert`: these hunks (none: the whole file) of one file of one turn."""

    session_id: SessionId
    turn: JsonInt = Field(ge=1)
    path: Annotated[str, Field(min_length=1, max_length=4096)]  # as `_session/changes` names it
    hunks: Annotated[list[HunkId], Field(max_length=10_000)] = []
    force: StrictBool = False  # take them back even where the lines changed since

    @model_validator(mode="after")
    def _relative(self) -> RevertParams:
        parts = self.path.split("/")
        if self.path.startswith("/") or ".." in parts or "" in parts or "\0" in self.path:
            raise ValueError("path must be relative to the session's directory, as listed")
        return self


# ACP content blocks (checked against ACP's own ContentBlock by the edge).
PromptBlocks = Annotated[list[dict[str, Any]], Field(min_length=1, max_length=1000)]
QueueItemId = Annotated[str, Field(pattern=r"^q_[0-9a-f]{16}$")]


class ImageParams(StrictParams):
    """`_session/image`: the bytes of an image a user message of the session refers to."""

    session_id: SessionId
    id: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class QueueParams(StrictParams):
    """`_session/queue`: a message for the session's next free turn."""

    session_id: SessionId
    prompt: PromptBlocks
    now: StrictBool = False  # cancel the running turn and run this next ("send now")


class QueueEditParams(StrictParams):
    session_id: SessionId
    id: QueueItemId
    prompt: PromptBlocks


class QueueItemParams(StrictParams):
    session_id: SessionId
    id: QueueItemId


class QueueMoveParams(StrictParams):
    session_id: SessionId
    id: QueueItemId
    index: JsonInt = Field(ge=0)


class EditParams(StrictParams):
    """`_session/edit`: an earlier message edited and sent again."""

    session_id: SessionId
    turn: JsonInt = Field(ge=1)
    text: Annotated[str, Field(min_length=1, max_length=1_000_000)]
    scope: Literal["conversation", "both"] = "conversation"


def _path_query(value: Any) -> Any:
    if isinstance(value, str) and ("\x00" in value or "\n" in value or "\r" in value):
        raise ValueError("must not contain NUL or line breaks")
    return value


class FilesParams(StrictParams):
    """`_session/files`: paths under the session's cwd that match `query` fuzzily (an
    empty query: the top level first), at most `limit` of them."""

    session_id: SessionId
    query: Annotated[str, Field(max_length=1024), BeforeValidator(_path_query)] = ""
    limit: JsonInt = Field(default=50, ge=1, le=500)


class AgentsParams(StrictParams):
    """`_session/agents` takes nothing (unknown keys are refused, as everywhere)."""


class StatusParams(StrictParams):
    session_id: SessionId


class MessagesParams(StrictParams):
    session_id: SessionId
    offset: JsonInt = Field(default=0, ge=0)
    limit: JsonInt = Field(default=100, ge=1, le=1000)
    # By turn instead: whole turns from `turn` on (a page never splits a turn, so never a
    # tool call from its result); offset/limit are then not used.
    turn: JsonInt | None = Field(default=None, ge=1)
    turns: JsonInt = Field(default=10, ge=1, le=100)


class TerminalSize(StrictParams):
    rows: JsonInt = Field(ge=1, le=1000)
    cols: JsonInt = Field(ge=1, le=1000)


class ResizeParams(TerminalSize):
    session_id: SessionId


ResizeBody = TerminalSize


class CompactParams(StrictParams):
    session_id: SessionId
    keep_turns: JsonInt = Field(default=2, ge=0, le=1000)


class OutputParams(StrictParams):
    session_id: SessionId
    tool_call_id: Annotated[str, Field(min_length=1, max_length=256)]
    offset: JsonInt = Field(default=0, ge=0)
    limit: JsonInt = Field(default=256 * 1024, ge=1, le=1024 * 1024)


class ChangesParams(StrictParams):
    session_id: SessionId
    turn: JsonInt | None = Field(default=None, ge=1)  # None: the last turn


class RewindParams(StrictParams):
    session_id: SessionId
    turn: JsonInt | None = Field(default=None, ge=1)
    scope: Annotated[RewindScope, Field(strict=False)] = RewindScope.BOTH
    force: StrictBool = False  # overwrite files changed outside the session since
    dry_run: StrictBool = False  # say what would change, change nothing
    undo: StrictBool = False  # take back the last code rewind (instead of a turn)

    @model_validator(mode="after")
    def _turn_or_undo(self) -> RewindParams:
        if self.undo == (self.turn is not None):
            raise ValueError("give either turn (rewind to before it) or undo: true")
        return self


class McpReconnectParams(StrictParams):
    session_id: SessionId
    name: Annotated[str, Field(min_length=1, max_length=64)]


class RenameParams(StrictParams):
    session_id: SessionId
    title: Title


class ListMeta(StrictParams):
    """Our keys inside `session/list` `params._meta`."""

    # Plain words (any punctuation separates; nothing is query syntax): sessions with every
    # word, as a word prefix, in the title or transcript text. Empty: no filter.
    query: Annotated[str, Field(max_length=1000)] | None = None
    archived: StrictBool = False  # true: only archived sessions (false: only the others)


def _meta_object(value: Any) -> Any:
    """`_meta` absent or null reads as no keys (our defaults); anything else must be an
    object, refused by its name (`Invalid params: _meta: must be an object`)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise PydanticCustomError("object", "must be an object")
    return value


class _WithMeta(StrictParams):
    """ACP's params of a method and our keys inside `params._meta`, in one model: the
    params' own errors come first (they are its first fields), then `_meta`'s, named
    `_meta.<key>`."""

    @model_validator(mode="before")
    @classmethod
    def _meta_by_its_wire_name(cls, data: Any) -> Any:
        # populate_by_name would read a key `meta` as `_meta`: to a client it is an
        # unknown key, ignored like any other.
        if isinstance(data, dict) and "meta" in data:
            return {key: value for key, value in data.items() if key != "meta"}
        return data


class NewSessionWithMeta(NewSessionParams, _WithMeta):
    """`session/new` as read: ACP's params (NewSessionParams, pinned to ACP's) and our
    `_meta` keys. `mcp_servers` holds the client's list as sent (stored verbatim)."""

    meta: Annotated[NewSessionMeta, BeforeValidator(_meta_object)] = Field(
        default_factory=NewSessionMeta, alias="_meta"
    )


class ListSessionsWithMeta(ListSessionsParams, _WithMeta):
    """`session/list` as read: ACP's params and our `_meta` keys."""

    meta: Annotated[ListMeta, BeforeValidator(_meta_object)] = Field(
        default_factory=ListMeta, alias="_meta"
    )


class SetPermissionsParams(StrictParams):
    session_id: SessionId
    # As given: `sidecar.domain.rules.parse_rules` checks them and names what is wrong.
    rules: Any = None


class ShutdownParams(StrictParams):
    """`_sidecar/shutdown` reads nothing (any keys are ignored, as they always were)."""


class ArchiveParams(StrictParams):
    session_id: SessionId
    archived: StrictBool = True


class ExportParams(StrictParams):
    session_id: SessionId
    format: Literal["jsonl", "markdown"] = "jsonl"
    # An existing directory (absolute): the file is written there and its path returned.
    # Without it the content comes back in the result, up to a bound.
    directory: Annotated[str, Field(min_length=1, max_length=4096)] | None = None


class ImportParams(StrictParams):
    """A JSON Lines export, as a file (`path`, absolute) or inline (`content`)."""

    path: Annotated[str, Field(min_length=1, max_length=4096)] | None = None
    content: str | None = None
    cwd: Annotated[str, Field(min_length=1, max_length=4096)] | None = None  # else the export's

    @model_validator(mode="after")
    def _one_source(self) -> ImportParams:
        if (self.path is None) == (self.content is None):
            raise ValueError("give either path or content")
        return self


# ---- the session export (`_session/export` JSON Lines; `_session/import` reads it) -------

EXPORT_FORMAT: Final = "acp-session-host/session"
EXPORT_VERSION: Final = 1
# Every integer of an export ends up in a 64-bit SQLite (or PostgreSQL BIGINT) column or
# is used as an offset into one: a larger one is refused here, naming its field, not by
# the database as an internal error.
INT64_MAX: Final = 2**63 - 1
Count = Annotated[JsonInt, Field(ge=0, le=INT64_MAX)]
Int64 = Annotated[JsonInt, Field(ge=-INT64_MAX - 1, le=INT64_MAX)]


class ExportedUsage(StrictParams):
    input_tokens: Count = 0
    output_tokens: Count = 0


class ExportedSession(StrictParams):
    session_id: SessionId
    title: Title
    cwd: Annotated[str, Field(min_length=1, max_length=4096)]
    mode: ModeField
    backend: BackendField
    model: str | None = None
    created_at: str
    updated_at: str
    message_count: Count
    turns: Count = 0
    context_from: Count = 0
    summary_index: Count | None = None
    forked_from: str | None = None
    imported_from: str | None = None
    agent: Annotated[str, Field(min_length=1, max_length=40)] = "builtin"
    archived: StrictBool = False
    approval: ApprovalField = Approval.ASK
    sandbox: SandboxField | None = None
    rules: list[dict[str, Any]] = Field(default_factory=list)
    usage: ExportedUsage = Field(default_factory=ExportedUsage)


class ExportHeader(StrictParams):
    """Line 1 of an export. MCP server definitions are never exported (they may hold
    secrets in env and headers)."""

    format: Literal["acp-session-host/session"]
    version: Literal[1]
    session: ExportedSession


class ExportedRow(StrictParams):
    """Every later line: one transcript entry as the store keeps it (its other keys, such
    as tool calls, exit codes and marker pointers, are kept as they are)."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        strict=True,
        extra="allow",
        defer_build=True,
    )

    role: Literal["user", "assistant", "tool", "system"]
    content: str
    created_at: str | None = None
    # The integers a row may carry (turn number, exit status, marker pointers): bounded.
    turn: Count | None = None
    exit_code: Int64 | None = None
    context_from: Count | None = None
    summary_index: Count | None = None
    previous: Count | None = None
    skips: list[list[Count]] | None = None


def _message(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        raise ValueError("must not be empty or whitespace only")
    return value


class PermissionAnswerBody(StrictParams):
    """`POST /agent/permissions`."""

    tool_call_id: Annotated[str, Field(min_length=1, max_length=200)]
    option_id: Annotated[str, Field(min_length=1, max_length=40)]


class SendBody(StrictParams):
    """`POST /agent/send`."""

    message: Annotated[str, BeforeValidator(_message)]


# ---- transcript entries: what `_session/messages` and `GET /agent/messages` serve --------


class _Entry(WireModel):
    index: int
    created_at: str


class ImageInfo(WireModel):
    """An image sent with a user message (its bytes: `_session/image`)."""

    id: str  # sha256 of its bytes
    mime_type: str
    bytes: int
    width: int
    height: int


class UserEntry(_Entry):
    type: Literal["user"]
    turn: int | None  # numbered from 1 in the order of the session's user messages
    text: str
    images: list[ImageInfo] = []


class ToolCallRef(WireModel):
    tool_call_id: str
    tool: str
    title: str
    input: dict[str, Any]


class AssistantEntry(_Entry):
    type: Literal["assistant"]
    text: str
    tool_calls: list[ToolCallRef]
    # The model's reasoning, where the provider streamed it (absent otherwise).
    thought: str | None = None


class ToolResultEntry(_Entry):
    type: Literal["tool_result"]
    tool_call_id: str
    tool: str
    text: str
    exit_code: int | None
    truncated: bool
    ok: bool  # the call succeeded (a command: exit status 0)


class MarkerEntry(_Entry):
    type: Literal["marker"]
    kind: str  # interrupted | compaction | cancelled | rewind | unknown
    text: str


TranscriptEntry = Annotated[
    UserEntry | AssistantEntry | ToolResultEntry | MarkerEntry, Field(discriminator="type")
]


class MessagesPage(WireModel):
    messages: list[TranscriptEntry]
    total: int
