// The composer: sending a prompt (shown at once, given back if refused; queued while a
// turn runs, see queue.js), Retry, edit and resend in place (`_session/edit`), fork;
// drafts per session (kept on the Python side too, so a rebuilt page starts with them);
// the "Working… 12 s" line; and what a rebuilt page comes back to (selection, each
// transcript's scroll, the focus).
"use strict";

(window.AcpUi = window.AcpUi || {}).composer = (ui) => {
  const { $, byId, el, state, store } = ui;

  async function send(event) {
    if (event) event.preventDefault();
    ui.clearError();
    ui.clearComposerError();
    ui.closeMentions();
    const input = byId("prompt-input");
    const text = input.value.trim();
    const sessionId = state.selected;
    if (!sessionId) return;
    // Beside the text: the picked `@` mentions still in it, the attached images. A
    // message of only an image (a screenshot pasted, then Enter) goes without text.
    const attachments = [...ui.mentionBlocks(sessionId, text), ...ui.imageBlocks(sessionId)];
    if (!text && !attachments.some((b) => b.type === "image")) return;
    if (store.shouldQueue(state, sessionId)) return ui.queueMessage(text, false, attachments); // waits its turn
    input.value = ""; // at once, so typing the next message is never wiped by this answer
    setDraft(sessionId, "");
    input.focus();
    state.lastPrompt.set(sessionId, text);
    // The message shows at once; the stored copy replaces it when the turn ends.
    const pending = el("div", { class: "msg user pending", "data-testid": "pending-user", text: text || "(image)" });
    ui.liveAppend(pending);
    byId("transcript").scrollTop = byId("transcript").scrollHeight;
    markRunning(sessionId);
    const result = await sendCall(sessionId, text, attachments);
    if (result) sent(sessionId);
    else {
      pending.remove(); // refused: give the text back, to the session it was for
      store.promptRefused(state, sessionId); // not "busy"
      if (state.selected === sessionId && !input.value) {
        input.value = text;
        setDraft(sessionId, text);
      } else if (!state.drafts[sessionId]) setDraft(sessionId, text);
      updateWorking();
    }
  }

  // `prompt`; a refusal of a message with attachments is shown next to the composer
  // (where the chips it kept are), else in the banner.
  async function sendCall(sessionId, text, attachments) {
    if (!attachments.length) return ui.call("prompt", sessionId, text);
    const result = await ui.ask("prompt", sessionId, text, attachments);
    if (!result || !result.error) return result;
    const e = result.error;
    if (state.selected === sessionId) ui.showComposerError(`${e.title || "Not sent"}: ${e.message || e.code}`);
    else ui.showError(e);
    return null;
  }

  // Sent: the images and the remembered mentions were for this message.
  function sent(sessionId) {
    ui.clearImages(sessionId);
    ui.forgetMentions(sessionId);
  }

  async function resendText(text) {
    byId("prompt-input").value = text;
    await send();
  }

  // Edit and resend, in place: the message becomes an editor; Save sends the edited text
  // as `_session/edit` (the conversation, or the conversation and the code, back to
  // before that turn, then the new turn, as one step). The earlier turns stay in the
  // transcript, behind the rewind's marker; the new turn streams below it.
  function editAndResend(m, node) {
    const bubble = node.querySelector(".msg.user");
    if (!bubble || node.querySelector("[data-testid=edit-form]")) return;
    const area = el("textarea", { class: "edit-input", "data-testid": "edit-input", rows: "3", "aria-label": `Edit turn ${m.turn}` });
    area.value = m.text;
    const scope = el(
      "select",
      { "data-testid": "edit-scope", "aria-label": "What goes back" },
      el("option", { value: "conversation", text: "conversation only" }),
      el("option", { value: "both", text: "conversation and code" }),
    );
    const cancel = () => {
      form.remove();
      bubble.hidden = false;
    };
    const form = el(
      "form",
      { class: "edit-form", "data-testid": "edit-form", "aria-label": `Edit turn ${m.turn} and resend` },
      area,
      el(
        "div",
        { class: "edit-actions" },
        el("label", { class: "inline", text: "Rewind " }, scope),
        el("button", { type: "button", class: "ghost small", "data-testid": "edit-cancel", text: "Cancel", onclick: cancel }),
        el("button", { type: "submit", class: "primary small", "data-testid": "edit-save", text: "Save and resend" }),
      ),
    );
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      saveEdit(m, area.value, scope.value, form);
    });
    area.addEventListener("keydown", (e) => {
      if (e.key === "Escape") {
        e.preventDefault();
        e.stopPropagation();
        cancel();
      } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    bubble.hidden = true;
    bubble.after(form);
    area.focus();
  }

  async function saveEdit(m, text, scope, form) {
    const sessionId = state.selected;
    if (!text.trim() || !sessionId) return;
    const pending = el("div", { class: "msg user pending", "data-testid": "pending-user", text: text.trim() });
    ui.liveAppend(pending);
    markRunning(sessionId);
    const result = await ui.call("edit_resend", sessionId, m.turn, text.trim(), scope);
    if (!result) {
      pending.remove(); // refused: the editor stays, with the text
      store.promptRefused(state, sessionId);
      updateWorking();
      return;
    }
    state.lastPrompt.set(sessionId, text.trim());
    if (scope === "both") {
      ui.showNotice(`Turn ${m.turn} edited and sent again; the files went back to before it.`, {
        label: "Undo code rewind",
        run: async () => {
          if (await ui.call("rewind", sessionId, null, "code", false, false)) ui.showNotice("The code rewind was undone.");
        },
      });
    }
    const bubble = form.previousElementSibling;
    if (bubble) bubble.hidden = false; // the earlier message stays, behind the marker
    form.remove();
    byId("prompt-input").focus();
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
    ui.closeMentions();
    ui.clearComposerError();
    ui.renderChips(); // the selected session's images
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
    ui.renderStopClear(); // Send reads "Queue" while a turn runs
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
      if (ui.mentionKey(e)) return; // the `@` popup's Up/Down/Enter/Tab/Esc
      if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
      e.preventDefault();
      if (e.ctrlKey || e.metaKey) ui.sendNow(); // cancel the running turn, run this next
      else send(e);
    });
    byId("retry-turn").addEventListener("click", retry);
  }

  return { sendPrompt: send, sentWith: sent, resendText, editAndResend, forkAt, setDraft, showDraft, viewMemory, remember, rebuild, updateWorking, wireComposer: wire };
};
