// Sessions waiting for you: awaiting approval, or a turn that ended while you were not
// looking at that session (another one selected, or the window not focused). Their count
// is in the sidebar's head and the window's title; an unseen session has a dot. The page
// tells the host when the window gains or loses the focus (system notifications are for
// when it has not), and the Notify button turns the notifications off and on (kept). A click
// on a notification makes the host push `select_session`.
"use strict";

(window.AcpUi = window.AcpUi || {}).attention = (ui) => {
  const { byId, state, store } = ui;
  let told = ""; // what the host was last told (the count and the unseen sessions)

  function renderAttention() {
    const n = store.waitingCount(state);
    const badge = byId("waiting-count");
    badge.hidden = n === 0;
    badge.textContent = `${n} waiting`;
    badge.title = `${n} session${n === 1 ? "" : "s"} waiting for you (approval, or a reply you have not seen)`;
    document.title = n ? `(${n}) ACP Session Host` : "ACP Session Host";
    const unseen = [...state.unseen];
    const now = `${n} ${unseen.join(" ")}`;
    if (now !== told) {
      told = now;
      ui.quietCall("set_waiting", n, unseen);
    }
  }

  // A turn ended (the session left `running`).
  function turnEnded(sessionId) {
    if (store.turnEnded(state, sessionId)) ui.renderSidebar();
    renderAttention();
  }

  function onFocus(focused) {
    if (store.focusChanged(state, focused)) ui.renderSidebar();
    ui.quietCall("set_focus", state.focused);
    renderAttention();
  }

  function renderNotifications(on) {
    state.notifications = on !== false;
    const button = byId("notifications-toggle");
    button.textContent = state.notifications ? "Notify: on" : "Notify: off";
    button.setAttribute("aria-pressed", String(state.notifications));
    button.setAttribute("aria-label", `System notifications: ${state.notifications ? "on" : "off"}`);
  }

  async function toggleNotifications() {
    const next = !state.notifications;
    renderNotifications(next);
    const saved = await ui.call("set_notifications", next);
    if (!saved) renderNotifications(!next);
  }

  // A notification was clicked: that session, in front.
  function onSelectSession(data) {
    if (!state.sessions.has(data.sessionId)) return;
    state.focused = true;
    ui.quietCall("set_focus", true);
    ui.select(data.sessionId).then(renderAttention);
  }

  function wire() {
    window.addEventListener("focus", (e) => e.target === window && onFocus(true));
    window.addEventListener("blur", (e) => e.target === window && onFocus(false));
    byId("notifications-toggle").addEventListener("click", toggleNotifications);
  }

  return { renderAttention, turnEnded, onFocus, renderNotifications, onSelectSession, wireAttention: wire };
};
