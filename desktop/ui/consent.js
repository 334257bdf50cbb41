// Approval cards for permission requests, drawn in the live part of the transcript of
// the session that asks. The host keeps the requests, so a rebuilt page fetches them
// (`pending_permissions`) and an answer from it still counts.
"use strict";

(window.AcpUi = window.AcpUi || {}).consent = (ui) => {
  const { el, state, store } = ui;

  const ANSWERS = [
    ["allow_once", "Allow once", "primary"],
    ["allow_always", "Always allow", ""],
    ["reject_once", "Reject", "danger"],
    ["reject_always", "Always reject", "danger"],
  ];

  function approvalCard(p) {
    const call = p.toolCall;
    const session = state.sessions.get(p.sessionId) || {};
    const diffs = (call.content || []).filter((c) => c.type === "diff");
    const diff = diffs.length
      ? el("div", { class: "approval-diffs", "data-testid": "approval-diffs" }, ...diffs.map((d) => window.Diff.fromTexts(ui.shortFile(d.path), d.oldText, d.newText)))
      : null;
    const buttons = ANSWERS.map(([id, label, cls]) =>
      el("button", { type: "button", class: `small ${cls}`, "data-testid": `approve-${id}`, text: label, onclick: () => answerPermission(p, id) }),
    );
    const card = el(
      "div",
      { class: "approval", role: "alertdialog", "aria-label": `Approve: ${call.title}`, "data-testid": "approval-card", "data-tool-call-id": call.toolCallId, tabindex: "-1" },
      el("div", { class: "approval-head", text: "Waiting for your approval" }),
      el("code", { class: "approval-cmd", "data-testid": "approval-command", text: call.title }),
      el("div", { class: "approval-where", "data-testid": "approval-where", text: `in ${session.cwd || "?"} · sandbox: ${session.effectiveSandbox || "?"}` }),
      diff,
      el("div", { class: "approval-actions" }, ...buttons),
      el("div", { class: "hint", text: "Enter: allow once · Esc: reject" }),
    );
    card.addEventListener("keydown", (e) => {
      // Enter on the card itself: on a focused button or a diff's summary it is theirs.
      if (e.key === "Enter" && e.target === card) { e.preventDefault(); answerPermission(p, "allow_once"); }
      else if (e.key === "Escape") { e.preventDefault(); answerPermission(p, "reject_once"); }
    });
    return card;
  }

  function showPermission(p) {
    store.permissionAsked(state, p);
    renderPermissions();
    ui.updateWorking();
  }

  function settlePermission(sessionId, toolCallId) {
    store.permissionSettled(state, sessionId, toolCallId);
    ui.updateWorking();
    renderPermissions();
  }

  function renderPermissions() {
    for (const card of document.querySelectorAll("[data-testid=approval-card]")) card.remove();
    if (!state.selected) return;
    let first = null;
    for (const p of store.permissionsFor(state, state.selected)) {
      const card = approvalCard(p);
      ui.liveAppend(card);
      first = first || card;
    }
    if (first) first.focus();
  }

  async function answerPermission(p, optionId) {
    await ui.call("answer_permission", p.sessionId, p.toolCall.toolCallId, optionId);
    store.permissionSettled(state, p.sessionId, p.toolCall.toolCallId);
    renderPermissions();
  }

  // A rebuilt page: the requests the host still holds.
  async function loadPermissions() {
    for (const p of (await ui.quietCall("pending_permissions")) || []) store.permissionAsked(state, p);
    renderPermissions();
  }

  return { showPermission, settlePermission, renderPermissions, loadPermissions };
};
