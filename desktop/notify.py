"""System notifications: freedesktop Notifications over the D-Bus session bus (dbus-fast).

Runs on the host's asyncio loop. The bus is reached lazily, at the first notification,
so an app that never notifies never touches D-Bus. A missing session bus or a missing
notification server is not an error the user is shown: the app goes on, and the log
says so once (later failures go to the debug log). A click on a notification (the
server's `ActionInvoked` signal with the "default" action, from the server that
answered our Notify) hands the key the notification was sent with to the click listener.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

NAME = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
APP_NAME = "ACP Session Host"
MAX_BODY = 300  # characters of the body (a server may show less)
MAX_KEPT = 200  # notifications remembered for their clicks
TIMEOUT = 5.0  # a bus or a server that does not answer is as good as none

ClickListener = Callable[[str], None]


class Notifier:
    """Sends notifications; `on_click(key)` when the user clicks one."""

    def __init__(self, on_click: ClickListener) -> None:
        self._on_click = on_click
        self._bus: Any = None  # dbus_fast.aio.MessageBus once connected
        self._keys: dict[int, str] = {}  # the server's notification id -> our key
        self._server: str | None = None  # the unique bus name of the server that answered
        self._complained = False

    def _trouble(self, what: str, exc: BaseException | str) -> None:
        if not self._complained:
            self._complained = True
            log.warning("system notifications are off: %s (%s)", what, exc)
        else:
            log.debug("notification not shown: %s (%s)", what, exc)

    async def _connect(self) -> Any:
        if self._bus is not None and self._bus.connected:
            return self._bus
        try:
            from dbus_fast import BusType, Message, MessageType
            from dbus_fast.aio import MessageBus
        except ImportError as exc:
            self._trouble("dbus-fast is not installed", exc)
            return None
        try:
            bus = await asyncio.wait_for(MessageBus(bus_type=BusType.SESSION).connect(), TIMEOUT)
        except Exception as exc:  # noqa: BLE001 (no address, nothing listening, auth refused)
            self._trouble("no D-Bus session bus", exc)
            return None
        rule = f"type='signal',interface='{NAME}',member='ActionInvoked',path='{PATH}'"
        try:
            reply = await asyncio.wait_for(
                bus.call(
                    Message(
                        destination="org.freedesktop.DBus",
                        path="/org/freedesktop/DBus",
                        interface="org.freedesktop.DBus",
                        member="AddMatch",
                        signature="s",
                        body=[rule],
                    )
                ),
                TIMEOUT,
            )
        except TimeoutError as exc:
            self._trouble("the session bus did not answer", exc)
            bus.disconnect()
            return None
        if reply is None or reply.message_type == MessageType.ERROR:
            log.debug("AddMatch for ActionInvoked refused: clicks will do nothing")
        bus.add_message_handler(self._on_message)
        self._bus = bus
        return bus

    def _on_message(self, message: Any) -> None:
        from dbus_fast import MessageType

        if (
            message.message_type != MessageType.SIGNAL
            or message.interface != NAME
            or message.member != "ActionInvoked"
            or message.signature != "us"
            or message.sender != self._server
        ):
            return
        notification_id, action = message.body
        key = self._keys.get(int(notification_id))
        if key is None or action != "default":
            return  # another app's notification, or another action
        try:
            self._on_click(key)
        except Exception:
            log.exception("the notification click listener failed")

    async def send(self, title: str, body: str, key: str) -> bool:
        """Show a notification (`key`: what a click on it hands back); whether it was
        shown. Never raises for D-Bus trouble."""
        bus = await self._connect()
        if bus is None:
            return False
        from dbus_fast import Message, MessageType, Variant

        if len(body) > MAX_BODY:
            body = body[: MAX_BODY - 1] + "…"
        message = Message(
            destination=NAME,
            path=PATH,
            interface=NAME,
            member="Notify",
            signature="susssasa{sv}i",
            body=[
                APP_NAME,
                0,
                "",
                title,
                body,
                ["default", "Open"],
                {"urgency": Variant("y", 1), "category": Variant("s", "im.received")},
                -1,
            ],
        )
        try:
            reply = await asyncio.wait_for(bus.call(message), TIMEOUT)
        except TimeoutError as exc:
            self._trouble("the notification server did not answer", exc)
            return False
        except Exception as exc:  # noqa: BLE001 (a bus that went away)
            self._trouble("the session bus went away", exc)
            self._bus = None
            return False
        if reply is None or reply.message_type == MessageType.ERROR:
            detail = reply.body[0] if reply is not None and reply.body else "no reply"
            self._trouble(f"no notification server ({reply.error_name if reply else ''})", detail)
            return False
        (notification_id,) = reply.body
        self._server = reply.sender
        self._keys[int(notification_id)] = key
        while len(self._keys) > MAX_KEPT:
            self._keys.pop(next(iter(self._keys)))
        return True

    def close(self) -> None:
        if self._bus is not None:
            self._bus.disconnect()
            self._bus = None
