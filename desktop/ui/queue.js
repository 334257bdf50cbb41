// The queue above the composer: messages sent while a turn runs wait here (the sidecar's
// `_session/queue`, stored with the session) and run in order as turns end. Each can be
// edited in place, removed, or moved; a paused queue (after Stop, or a crash that cut a
// turn short) says so and offers Resume. Also Send now (Ctrl/Cmd+Enter: the running turn
// is cancelled and this message runs next) and Stop and clear queue. The queue is drawn
// from the store, kept current by `_session/queue_update` pushes.
"use strict";

(window.AcpUi = window.AcpUi || {}).queue = (ui) => {
  const { byId, el, state, store } = ui;

  // The composer's text, queued (`now`: cancel the running turn and run it next), with
  // its attachments (mentions, images: composer.js).
  async function queueMessage(text, now, attachments = []) {
    const sessionId = state.selected;
    const input = byId("prompt-input");
    input.value = "";
    ui.setDraft(sessionId, "");
    input.focus();
    const asked = store.queueAsked(state, sessionId);
    const answer = await ui.call("queue", sessionId, text, now, attachments);
    if (!answer) {
      if (state.selected === sessionId && !input.value) input.value = text; // given back
      ui.setDraft(sessionId, text);
      return;
    }
    ui.sentWith(sessionId);
    state.lastPrompt.set(sessionId, text);
    if (store.queueArrived(state, sessionId, answer, asked)) renderQueue();
  }

  async function loadQueue(sessionId) {
    const asked = store.queueAsked(state, sessionId);
    const answer = await ui.quietCall("queue_list", sessionId);
    if (answer && store.queueArrived(state, sessionId, answer, asked) && sessionId === state.selected) renderQueue();
  }

  function onQueueUpdate(params) {
    if (store.queueArrived(state, params.sessionId, params) && params.sessionId === state.selected) renderQueue();
  }

  // An answer to a change: the queue as it is now.
  async function change(name, ...args) {
    const sessionId = state.selected;
    const asked = store.queueAsked(state, sessionId);
    const answer = await ui.call(name, sessionId, ...args);
    if (answer && store.queueArrived(state, sessionId, answer, asked) && sessionId === state.selected) renderQueue();
    return answer;
  }

  function renderQueue() {
    const box = byId("queue");
    const q = store.queueOf(state, state.selected);
    const s = store.selected(state);
    box.hidden = !q.items.length;
    byId("queue-count").textContent = `${q.items.length} queued`;
    byId("queue-paused").hidden = !q.paused;
    // A message its turn refused (the model changed since it was queued): why it paused.
    const refused = byId("queue-refused");
    refused.hidden = !q.refused;
    refused.textContent = q.refused ? `A message was not sent: ${q.refused.reason}. Edit or remove it, then Resume queue.` : "";
    byId("queue-resume").hidden = !q.paused || !(s && s.live);
    const focused = document.activeElement && document.activeElement.closest && document.activeElement.closest("[data-testid=queue-item]");
    const keep = focused ? [focused.dataset.itemId, document.activeElement.dataset.testid] : null;
    byId("queue-list").replaceChildren(...q.items.map((item, i) => queueItem(item, i, q.items.length)));
    if (keep) {
      const again = byId("queue-list").querySelector(`[data-item-id="${CSS.escape(keep[0])}"] [data-testid="${keep[1]}"]`);
      if (again && !again.disabled) again.focus();
    }
    renderStopClear();
  }

  function queueItem(item, index, count) {
    const text = store.queueText(item);
    const refusedHere = Boolean(store.queueOf(state, state.selected).refused && store.queueOf(state, state.selected).refused.id === item.id);
    const li = el("li", { class: refusedHere ? "queue-item refused" : "queue-item", "data-testid": "queue-item", "data-item-id": item.id });
    if (state.queueEditing === item.id) {
      const area = el("textarea", { class: "queue-edit-input", "data-testid": "queue-edit-input", rows: "2", "aria-label": "Edit the queued message" });
      area.value = text;
      area.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
          e.preventDefault();
          saveEdit(item.id, area.value);
        } else if (e.key === "Escape") {
          e.preventDefault();
          e.stopPropagation();
          state.queueEditing = null;
          renderQueue();
        }
      });
      li.append(
        area,
        el("div", { class: "queue-actions" },
          button("queue-save", "Save", "Save the edited message", () => saveEdit(item.id, area.value)),
          button("queue-cancel", "Cancel", "Keep the message as it was", () => {
            state.queueEditing = null;
            renderQueue();
          }),
        ),
      );
      setTimeout(() => area.isConnected && area.focus(), 0);
      return li;
    }
    li.append(
      el("span", { class: "queue-pos", text: `${index + 1}.` }),
      el("span", { class: "queue-text", "data-testid": "queue-text", text, title: text }),
      ...imagesNote(item),
      el("div", { class: "queue-actions", role: "group", "aria-label": `Queued message ${index + 1}` },
        button("queue-up", "↑", "Move up", () => move(item.id, -1), index === 0),
        button("queue-down", "↓", "Move down", () => move(item.id, 1), index === count - 1),
        button("queue-edit", "Edit", "Edit this queued message", () => {
          state.queueEditing = item.id;
          renderQueue();
        }),
        button("queue-remove", "Remove", "Remove this message from the queue", () => change("queue_remove", item.id)),
      ),
    );
    return li;
  }

  // "🖼 2" beside a queued message that carries images (one of only an image has no text).
  function imagesNote(item) {
    const count = (item.prompt || []).filter((b) => b && b.type === "image").length;
    if (!count) return [];
    const label = `${count} image${count > 1 ? "s" : ""}`;
    return [el("span", { class: "queue-images", "data-testid": "queue-images", text: `🖼 ${count}`, title: label, "aria-label": label })];
  }

  function button(testid, text, title, onclick, disabled = false) {
    return el("button", { type: "button", class: "ghost small", "data-testid": testid, text, title, "aria-label": title, onclick, disabled });
  }

  async function saveEdit(itemId, text) {
    if (!text.trim()) return;
    state.queueEditing = null;
    // Only the text is edited here: the message's images and mentions stay with it.
    const item = store.queueOf(state, state.selected).items.find((i) => i.id === itemId);
    const kept = ((item && item.prompt) || []).filter((b) => b && b.type !== "text");
    const answer = await change("queue_edit", itemId, text, kept);
    if (!answer) renderQueue(); // too late (it ran, or was removed): the queue as it is
  }

  function move(itemId, by) {
    const to = store.movedIndex(state, state.selected, itemId, by);
    if (to !== null) change("queue_move", itemId, to);
  }

  // "Stop and clear queue" is offered while a turn runs or messages wait; Send now while a
  // turn runs.
  function renderStopClear() {
    const q = store.queueOf(state, state.selected);
    const running = store.shouldQueue(state, state.selected);
    byId("stop-clear").hidden = !q.items.length;
    byId("send-now").hidden = !running;
    byId("send").textContent = running ? "Queue" : "Send";
    byId("send").title = running ? "Queue the message: it runs when this turn ends (Enter)" : "Send (Enter)";
  }

  function stop(clear) {
    if (!state.selected) return;
    ui.call("cancel", state.selected, clear);
    byId("prompt-input").focus();
  }

  function sendNow() {
    const text = byId("prompt-input").value.trim();
    if (!text || !state.selected) return;
    const sid = state.selected;
    if (store.shouldQueue(state, sid)) queueMessage(text, true, [...ui.mentionBlocks(sid, text), ...ui.imageBlocks(sid)]);
    else ui.sendPrompt();
  }

  function wire() {
    byId("stop").addEventListener("click", () => stop(false));
    byId("stop-clear").addEventListener("click", () => stop(true));
    byId("send-now").addEventListener("click", sendNow);
    byId("queue-resume").addEventListener("click", () => change("queue_run"));
  }

  return { queueMessage, loadQueue, onQueueUpdate, renderQueue, renderStopClear, sendNow, wireQueue: wire };
};
