"""A freedesktop notification server for tests: owns `org.freedesktop.Notifications` on
the session bus in DBUS_SESSION_BUS_ADDRESS (dbus-fast, the library the desktop uses),
appends every Notify call to a JSON Lines file, and emits `ActionInvoked` when told.

    python tests/notification_server.py RECORD_FILE

Prints `ready` once it owns the name. Reads commands on stdin, one a line:
`click ID [ACTION]` emits ActionInvoked(ID, ACTION or "default") from the name's owner,
as a real server does when the user clicks a notification.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from dbus_fast import Message, MessageType, RequestNameReply
from dbus_fast.aio import MessageBus

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"


class Server:
    """Answers the Notifications interface's method calls (low-level messages, so it
    takes exactly what the wire says)."""

    def __init__(self, record: Path) -> None:
        self.record = record
        self.count = 0

    def handle(self, message: Message) -> Message | None:
        if message.message_type != MessageType.METHOD_CALL or message.interface != NAME:
            return None
        if message.member == "Notify" and message.signature == "susssasa{sv}i":
            app, _replaces, _icon, summary, body, actions, _hints, _expire = message.body
            self.count += 1
            entry = {
                "id": self.count,
                "app": app,
                "summary": summary,
                "body": body,
                "actions": list(actions),
            }
            with self.record.open("a") as out:
                out.write(json.dumps(entry) + "\n")
            return Message.new_method_return(message, "u", [self.count])
        if message.member == "GetCapabilities":
            return Message.new_method_return(message, "as", [["actions", "body"]])
        if message.member == "GetServerInformation":
            return Message.new_method_return(message, "ssss", ["test", "tests", "1", "1.2"])
        if message.member == "CloseNotification":
            return Message.new_method_return(message)
        return Message.new_error(message, "org.freedesktop.DBus.Error.UnknownMethod", "no")


async def main(record: Path) -> None:
    bus = await MessageBus().connect()
    server = Server(record)
    bus.add_message_handler(server.handle)
    reply = await bus.request_name(NAME)
    if reply != RequestNameReply.PRIMARY_OWNER:
        raise SystemExit(f"could not own {NAME}: {reply}")
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            return
        words = line.split()
        if len(words) >= 2 and words[0] == "click":
            action = words[2] if len(words) > 2 else "default"
            signal = Message.new_signal(PATH, NAME, "ActionInvoked", "us", [int(words[1]), action])
            await bus.send(signal)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
