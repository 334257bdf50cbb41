"""The terminal client's session commands: `/sessions` (numbered, with title, status, last
activity and a preview), picking a session by number or id prefix, `/new` with a
directory, a title and an agent, `/agents` (who can run a session), `/switch`, `/close`, `/resume` (a session in error is restarted),
`/forget` (asks first) and `/retry`. Views are asked of the sidecar when shown; the only
thing kept is the numbering of the last listing, so that `/resume 3` means the third row
the user saw."""

from __future__ import annotations

import asyncio
import os
import shlex
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from desktop import mcp_servers, sessions
from desktop.tui_changes import UsageError
from protocol.methods import Method

if TYPE_CHECKING:
    from desktop.host import SidecarHost

TAIL: Final = 6  # messages shown on /switch
PREVIEW: Final = 70  # characters of the last message in /sessions
NEW_USAGE: Final = (
    "usage: /new [--cwd DIR] [--title T] [--agent NAME] [--worktree] [--branch B] [--base B]"
    " [craft|plan|ask] [pipe|pty] [--mcp 'NAME=COMMAND|URL']"
)
BUILTIN: Final = "builtin"
MODES: Final = ("craft", "plan", "ask")
BACKENDS: Final = ("pipe", "pty")


def agent_of(s: dict[str, Any]) -> str | None:
    """The agent a session runs, when it is worth saying (not our builtin loop)."""
    agent = s.get("agent")
    return agent if isinstance(agent, str) and agent and agent != BUILTIN else None


def describe_summary(s: dict[str, Any]) -> str:
    agent = agent_of(s)
    return f"{s['status']}, gen {s['generation']}, mode {s['mode']}" + (
        f", agent {agent}" if agent else ""
    )


def ago(iso: str | None, now: datetime | None = None) -> str:
    """'just now', '5m ago', '3h ago', '2d ago' (or the date, past a month)."""
    if not iso:
        return "?"
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return "?"
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = ((now or datetime.now(UTC)) - when).total_seconds()
    if seconds < 45:
        return "just now"
    for size, unit in ((86400 * 30, ""), (86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return when.date().isoformat() if not unit else f"{int(seconds // size)}{unit} ago"
    return "1m ago"


def preview(entry: dict[str, Any] | None) -> str:
    """The last transcript entry, on one line."""
    if entry is None:
        return "(no messages yet)"
    kind = entry.get("type")
    text = " ".join(str(entry.get("text") or "").split())
    if kind == "assistant" and not text:
        calls = entry.get("toolCalls") or []
        text = f"$ {calls[-1].get('title')}" if calls else ""
    who = {"user": "you", "assistant": "agent", "tool_result": "tool"}.get(str(kind), str(kind))
    if kind == "marker":
        return f"[{entry.get('kind')}]"
    line = f"{who}: {text}"
    return line if len(line) <= PREVIEW else line[: PREVIEW - 1] + "…"


def directory(value: str) -> str:
    """`--cwd`'s value: `~` expanded, made absolute; an existing directory or UsageError."""
    path = os.path.abspath(os.path.expanduser(value))
    if not os.path.isdir(path):
        what = "not a directory" if os.path.exists(path) else "no such directory"
        raise UsageError(f"{what}: {path} (give an existing directory to --cwd)")
    return path


def tilde(path: str) -> str:
    home = os.path.expanduser("~")
    if home != os.sep and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def notes(s: dict[str, Any]) -> str:
    found = []
    if agent_of(s):
        found.append(f"agent: {agent_of(s)}")
    if s.get("heldBy"):
        found.append(f"live in another sidecar: {s['heldBy']}")
    if s.get("interrupted"):
        found.append("interrupted")
    if s.get("status") == "error" and s.get("lastError"):
        found.append(f"error: {s['lastError']}")
    return "".join(f"  [{n}]" for n in found)


class SessionCommands:
    """Mixed into `desktop.tui.Tui` (which provides these attributes)."""

    host: SidecarHost
    current: str | None
    say: Callable[[str], None]
    send_prompt: Callable[[str], None]
    show_entry: Callable[[dict[str, Any]], None]
    sized: dict[str, tuple[int, int]]
    last_prompt: dict[str, str]
    shown_state: dict[str, tuple[Any, Any, Any]]
    clean: Callable[[str], str]

    numbers: list[str]  # the session ids of the last /sessions listing, in its order
    known: list[dict[str, Any]]  # the last summaries seen (for completion)
    pending_forget: dict[str, Any] | None = None  # a /forget waiting for its y/N

    async def list_sessions(self) -> list[dict[str, Any]]:
        self.known = await sessions.list_all(self.host)
        return self.known

    async def resolve(self, arg: str, *, default_current: bool = False) -> dict[str, Any]:
        """The summary of the session `arg` names: a number from the last /sessions, a
        full id or a unique prefix (with or without `sess_`); no argument means the
        current session when that makes sense."""
        arg = arg.strip()
        if not arg:
            if not default_current:
                raise UsageError("give a session number or id (see /sessions)")
            if self.current is None:
                raise UsageError("no current session; /new creates one, /switch N picks one")
            arg = self.current
        listed = await self.list_sessions()
        by_id = {s["sessionId"]: s for s in listed}
        number = arg.removeprefix("#")
        if number.isdigit():  # a number from the listing, never an id prefix (`sess_3…` is)
            if not 1 <= int(number) <= len(self.numbers or listed):
                raise UsageError(
                    f"no session matches '{arg}' (see /sessions; for an id prefix of digits "
                    "write sess_ before it)"
                )
            sid = (self.numbers or [s["sessionId"] for s in listed])[int(number) - 1]
            if sid not in by_id:
                raise UsageError(f"session {number} is gone; /sessions lists them again")
            return by_id[sid]
        found = [arg] if arg in by_id else [i for i in by_id if i.startswith((arg, "sess_" + arg))]
        if not found:
            raise UsageError(f"no session matches '{arg}' (see /sessions)")
        if len(found) > 1:
            raise UsageError(f"'{arg}' matches {len(found)} sessions; type more of the id")
        return by_id[found[0]]

    async def _last_entry(self, s: dict[str, Any]) -> dict[str, Any] | None:
        count = int(s.get("messageCount") or 0)
        if not count:
            return None
        params = {"sessionId": s["sessionId"], "offset": count - 1, "limit": 1}
        try:
            got = (await self.host.request(Method.MESSAGES, params))["messages"]
        except Exception:  # noqa: BLE001 -- a preview is not worth failing the listing
            return None
        return got[-1] if got else None

    async def cmd_sessions(self, arg: str) -> None:
        listed = await self.list_sessions()
        self.numbers = [s["sessionId"] for s in listed]
        if not listed:
            self.say("no sessions yet; /new creates one")
            return
        lasts = await asyncio.gather(*(self._last_entry(s) for s in listed))
        for n, (s, last) in enumerate(zip(listed, lasts, strict=True), 1):
            mark = "*" if s["sessionId"] == self.current else " "
            cwd = tilde(s["cwd"])
            self.say(
                f"{mark}{n:>3}  {s['title'][:40]:<40} {s['status']:<8} "
                f"{ago(s.get('updatedAt')):>9}  {s['sessionId'][:13]}  {s['mode']} "
                f"{s['backend']} gen {s['generation']}  {cwd}{notes(s)}"
            )
            self.say(f"       {preview(last)}")
        self.say("/switch N or /resume N picks one (N: the number above)")

    async def cmd_new(self, arg: str) -> None:
        try:
            words = shlex.split(arg)
        except ValueError as exc:
            raise UsageError(f"{NEW_USAGE} ({exc})") from None
        servers: list[dict[str, Any]] = []
        meta: dict[str, Any] = {}
        cwd = os.getcwd()
        while words:
            word = words.pop(0)
            if word == "--worktree":
                meta["worktree"] = meta.get("worktree") or True
                continue
            if word in ("--mcp", "--cwd", "--title", "--agent", "--branch", "--base"):
                if not words:
                    raise UsageError(NEW_USAGE)
                value = words.pop(0)
            elif word.startswith(
                ("--cwd=", "--title=", "--mcp=", "--agent=", "--branch=", "--base=")
            ):
                word, _, value = word.partition("=")
            elif word in MODES and "mode" not in meta:
                meta["mode"] = word
                continue
            elif word in BACKENDS and "backend" not in meta:
                meta["backend"] = word
                continue
            else:
                raise UsageError(f"{NEW_USAGE} ('{word}' is none of these)")
            if word == "--cwd":
                cwd = directory(value)
            elif word == "--title":
                if not value.strip():
                    raise UsageError("--title needs some text")
                meta["title"] = value.strip()
            elif word in ("--branch", "--base"):
                if not value.strip():
                    raise UsageError(f"{word} needs a name")
                tree = meta["worktree"] if isinstance(meta.get("worktree"), dict) else {}
                tree[word.removeprefix("--")] = value.strip()
                meta["worktree"] = tree  # a branch or base means a worktree
            elif word == "--agent":
                if not value.strip():
                    raise UsageError("--agent needs a name (see /agents)")
                meta["agent"] = value.strip()  # the sidecar knows the names; it says if not
            else:
                if "=" not in value:
                    raise UsageError(NEW_USAGE)
                name, _, target = value.partition("=")
                try:
                    servers.append(mcp_servers.to_acp(name, target))
                except mcp_servers.BadServer as exc:
                    raise UsageError(str(exc)) from None
        if "agent" in meta:
            await self.check_agent(meta["agent"])
        params = {"cwd": cwd, "mcpServers": servers, "_meta": meta}
        s = (await self.host.request(Method.SESSION_NEW, params))["_meta"]
        self.current = s["sessionId"]
        self.seen(s)
        where = "" if cwd == os.getcwd() else f", in {cwd}"
        tree = s.get("worktree")
        if isinstance(tree, dict):
            where = (
                f", on branch {self.clean(str(tree['branch']))} in {self.clean(str(tree['path']))}"
            )
        self.say(f"created {self.current} ({describe_summary(s)}, backend {s['backend']}{where})")

    async def cmd_merge(self, arg: str) -> None:
        """/merge [merge|squash|rebase]: the current session's worktree into its base."""
        strategy = arg.strip() or "merge"
        if strategy not in ("merge", "squash", "rebase"):
            raise UsageError("usage: /merge [merge|squash|rebase]")
        sid = (await self.resolve("", default_current=True))["sessionId"]
        done = await self.host.request(
            Method.WORKTREE_MERGE, {"sessionId": sid, "strategy": strategy}
        )
        self.say(f"merged into {self.clean(str(done['base']))} ({strategy}): {done['after'][:12]}")

    async def cmd_discard(self, arg: str) -> None:
        """/discard: remove the current (closed) session's worktree and branch."""
        sid = (await self.resolve(arg, default_current=True))["sessionId"]
        await self.host.request(Method.WORKTREE_DISCARD, {"sessionId": sid})
        self.say("worktree and branch removed; the session and its transcript are kept")

    async def cmd_agents(self, arg: str) -> None:
        """The agents a session can run, builtin first: available, or how to install it."""
        rows = (await self.host.request(Method.AGENTS, {}))["agents"]
        rows.sort(key=lambda a: a.get("name") != BUILTIN)  # stable: the sidecar's order after
        width = max([len(str(a.get("name"))) for a in rows] + [8])
        for a in rows:
            name = self.clean(str(a.get("name")))
            command = self.clean(str(a.get("command") or ""))
            source = self.clean(str(a.get("source") or ""))
            if a.get("available"):
                what = "available" + (f"  {command}" if command else "")
            elif a.get("install"):
                what = f"not installed: {self.clean(str(a['install']))}"
            else:
                what = f"not installed: {command or '?'} was not found"
            self.say(f"  {name:<{width}}  {what}  [{source}]")
        self.say("/new --agent NAME starts a session with one")

    async def check_agent(self, name: str) -> None:
        """An agent listed but not installed: say how to install it instead of creating a
        session that fails at once (an unknown name is the sidecar's to refuse)."""
        rows = (await self.host.request(Method.AGENTS, {}))["agents"]
        agent = next((a for a in rows if a.get("name") == name), None)
        if agent is None or agent.get("available"):
            return
        how = agent.get("install")
        fix = f"install it with: {how}" if how else f"{agent.get('command')!r} was not found"
        raise UsageError(self.clean(f"agent '{name}' is not installed; {fix} (see /agents)"))

    def seen(self, s: dict[str, Any]) -> None:
        """A session started (or started again): its state as the answer says is the one
        on screen (its state lines may still come in after the answer: not repeated), and
        its new runtime is told the terminal's size before its first prompt."""
        self.shown_state[s["sessionId"]] = (s["status"], s["generation"], s.get("lastError"))
        self.sized.pop(s["sessionId"], None)

    async def cmd_switch(self, arg: str) -> None:
        s = await self.resolve(arg)
        sid = self.current = s["sessionId"]
        self.say(f"switched to {sid} ({describe_summary(s)}{self.next_step(s)})")
        offset = max(0, s["messageCount"] - TAIL)
        params = {"sessionId": sid, "offset": offset, "limit": TAIL}
        if offset:
            self.say(f"... {offset} earlier message(s)")
        for entry in (await self.host.request(Method.MESSAGES, params))["messages"]:
            self.show_entry(entry)

    def next_step(self, s: dict[str, Any]) -> str:
        """What the user can do with a session that cannot take a prompt as it is."""
        if s.get("heldBy"):
            return f"; live in another sidecar ({s['heldBy']}): it is read-only here"
        if s.get("status") == "error":
            return f"; failed: {s.get('lastError')}; /retry to try again or /resume"
        if not s.get("live"):
            return "; not live: /resume to continue it (a prompt resumes it too)"
        return ""

    async def cmd_close(self, arg: str) -> None:
        sid = (await self.resolve(arg, default_current=True))["sessionId"]
        s = (await self.host.request(Method.SESSION_CLOSE, {"sessionId": sid}))["_meta"]
        self.say(f"closed {sid} ({describe_summary(s)}); the record is kept")

    async def cmd_resume(self, arg: str) -> None:
        found = await self.resolve(arg, default_current=True)
        sid = found["sessionId"]
        if found.get("heldBy"):
            raise UsageError(
                f"{sid} is live in another sidecar ({found['heldBy']}); close it there first"
            )
        restarted = ""
        if found.get("live") and found.get("status") == "error":
            # A runtime in error takes no turn: close it (record kept), start a new one.
            await self.host.request(Method.SESSION_CLOSE, {"sessionId": sid})
            restarted = f" after its error ({found.get('lastError')})"
        elif found.get("live"):
            self.current = sid
            raise UsageError(
                f"{sid} is already live ({found['status']}); it is current now: type a prompt"
            )
        s = await sessions.resume(self.host, sid, found["cwd"])
        self.current = sid
        self.seen(s)
        self.say(f"resumed {sid} ({describe_summary(s)}){restarted}")

    async def cmd_forget(self, arg: str) -> None:
        words = arg.split()
        yes = "--yes" in words
        words = [w for w in words if w != "--yes"]
        if len(words) != 1:
            raise UsageError("usage: /forget N|ID [--yes]: delete a session and its transcript")
        s = await self.resolve(words[0])
        if s.get("heldBy"):
            raise UsageError(
                f"{s['sessionId']} is live in another sidecar ({s['heldBy']}); close it there first"
            )
        if yes:
            await self.forget(s)
            return
        self.pending_forget = s
        how = "close and delete" if s.get("live") else "delete"
        self.say(f"{how} '{s['title']}' ({s['sessionId']}) and its transcript for good? y/N")

    async def answer_forget(self, line: str) -> bool:
        """The y/N for a pending /forget; True if `line` was that answer."""
        s, self.pending_forget = self.pending_forget, None
        if s is None:
            return False
        if line in ("y", "yes"):
            await self.forget(s)
            return True
        self.say("[not deleted]")
        return line in ("n", "no", "N", "")

    async def forget(self, s: dict[str, Any]) -> None:
        sid = s["sessionId"]
        if s.get("live"):
            await self.host.request(Method.SESSION_CLOSE, {"sessionId": sid})
        await self.host.request(Method.SESSION_DELETE, {"sessionId": sid})
        if self.current == sid:
            self.current = None
        self.numbers = [n for n in self.numbers if n != sid]
        self.say(f"forgot {sid}")

    async def cmd_retry(self, arg: str) -> None:
        """Send the current session's last prompt again (a session in error is restarted
        by the sidecar first)."""
        if self.current is None:
            raise UsageError("no current session; /new creates one, /switch N picks one")
        text = self.last_prompt.get(self.current) or await self._last_user_text(self.current)
        if text is None:
            raise UsageError("nothing to retry: this session has no prompt yet")
        self.say(f"[retrying: {text if len(text) < 60 else text[:59] + '…'}]")
        self.send_prompt(text)

    async def _last_user_text(self, sid: str) -> str | None:
        page = await sessions.messages_page(self.host, sid, None, 50)
        for entry in reversed(page["messages"]):
            if entry.get("type") == "user":
                return str(entry.get("text") or "")
        return None
