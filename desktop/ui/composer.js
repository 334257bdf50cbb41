// The composer: sending a prompt (shown at once, given back if refused), Retry, edit and
// resend, fork; drafts per session (kept on the Python side too, so a rebuilt page starts
// with them); the "Working… 12 s" line; and what a rebuilt page comes back to
// (selection, each transcript's scroll, the focus).
"use strict";

(window.AcpUi = window.AcpUi || {}).composer = (ui) => {
  const { $, byId, el, state, store } = ui;

  async function send(event) {
    if (event) event.preventDefault();
    ui.clearError();
    const input = byId("prompt-input");
    const text = input.value.trim();
    const sessionId = state.selected;
    if (!text || !sessionId) return;
    input.value = ""; // at once, so typing the next message is never wiped by this answer
    setDraft(sessionId, "");
    input.focus();
    state.lastPrompt.set(sessionId, text);
    // The message shows at once; the stored copy replaces it when the turn ends.
    const pending = el("div", { class: "msg user pending", "data-testid": "pending-user", text });
    ui.liveAppend(pending);
    byId("transcript").scrollTop = byId("transcript").scrollHeight;
    markRunning(sessionId);
    const result = await ui.call("prompt", sessionId, text);
    if (!result) {
      pending.remove(); // refused: give the text back, to the session it was for
      store.promptRefused(state, sessionId); // not "busy"
      if (state.selected === sessionId && !input.value) {
        input.value = text;
        setDraft(sessionId, text);
      } else if (!state.drafts[sessionId]) setDraft(sessionId, text);
      updateWorking();
    }
  }

  async function resendText(text) {
    byId("prompt-input").value = text;
    await send();
  }

  async function editAndResend(m) {
    const sessionId = state.selected;
    if (!sessionId) return;
    const done = await ui.call("rewind", sessionId, m.turn, "conversation", false, false);
    if (!done) return;
    await ui.afterRewind(sessionId);
    const input = byId("prompt-input");
    input.value = m.text;
    setDraft(sessionId, m.text);
    input.focus();
    ui.showNotice(`The conversation is back to before turn ${m.turn}: edit the message and send it.`);
  }

  async function forkAt(m) {
    const from = state.selected;
    if (!from) return;
    const summary = await ui.call("fork", from, m.turn);
    if (!summary) return;
    ui.updateSession(summary);
    store.setDraft(state, summary.sessionId, m.text);
    ui.quietCall("save_draft", summary.sessionId, m.text);
    await ui.select(summary.sessionId);
    ui.showNotice(`Forked before turn ${m.turn} into “${summary.title}”: edit the message and send it there.`);
  }

  // Retry a failed turn: the last prompt again (this page's, else the transcript's last).
  async function retry() {
    const sessionId = state.selected;
    if (!sessionId) return;
    const text = store.retryText(state, sessionId);
    if (!text) return;
    const input = byId("prompt-input");
    const draft = input.value;
    input.value = text;
    await send();
    if (draft && !input.value) {
      input.value = draft; // the draft typed meanwhile stays
      setDraft(sessionId, draft);
    }
  }

  // ---- drafts ------------------------------------------------------------------------

  let draftTimer = null;
  function setDraft(sessionId, text) {
    if (!sessionId) return;
    store.setDraft(state, sessionId, text);
    clearTimeout(draftTimer);
    draftTimer = null;
    ui.quietCall("save_draft", sessionId, text);
  }

  function onDraftInput() {
    const sessionId = state.selected;
    if (!sessionId) return;
    const text = byId("prompt-input").value;
    store.setDraft(state, sessionId, text);
    clearTimeout(draftTimer);
    draftTimer = setTimeout(() => ui.quietCall("save_draft", sessionId, text), 250);
  }

  function showDraft() {
    byId("prompt-input").value = store.draft(state, state.selected);
  }

  // ---- what a rebuilt page comes back to ---------------------------------------------------

  function viewMemory() {
    const box = byId("transcript");
    store.rememberScroll(state, ui.nearBottom(box), box.scrollTop);
    return store.memory(state);
  }

  let rememberTimer = null;
  function remember(now) {
    clearTimeout(rememberTimer);
    if (now) return ui.quietCall("remember", ...viewMemory());
    rememberTimer = setTimeout(() => ui.quietCall("remember", ...viewMemory()), 300);
    return null;
  }

  async function rebuild() {
    const input = byId("prompt-input");
    if (state.selected) {
      clearTimeout(draftTimer);
      await ui.quietCall("save_draft", state.selected, input.value);
    }
    await remember(true);
    ui.call("rebuild_ui");
  }

  // ---- progress ------------------------------------------------------------------------

  function markRunning(sessionId) {
    store.markRunning(state, sessionId, Date.now());
    updateWorking();
  }

  // "Working… 12 s" while the selected session's turn runs; "Waiting for approval" while
  // a permission request waits for the user.
  function updateWorking() {
    const node = byId("working");
    const now = store.working(state, Date.now());
    if (!now) {
      node.hidden = true;
      return;
    }
    node.dataset.state = now.waiting ? "waiting" : "working";
    $(".working-text", node).textContent = now.waiting ? `Waiting for your approval · ${now.seconds} s` : `Working… ${now.seconds} s`;
    node.hidden = false;
  }

  function wire() {
    $(".composer").addEventListener("submit", send);
    byId("prompt-input").addEventListener("input", onDraftInput);
    byId("transcript").addEventListener("scroll", () => remember(), { passive: true });
    byId("prompt-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
    });
    byId("stop").addEventListener("click", () => {
      if (!state.selected) return;
      ui.call("cancel", state.selected);
      byId("prompt-input").focus();
    });
    byId("retry-turn").addEventListener("click", retry);
  }

  return { resendText, editAndResend, forkAt, setDraft, showDraft, viewMemory, remember, rebuild, updateWorking, wireComposer: wire };
};
