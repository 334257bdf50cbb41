// Steering a running agent, the page's part of the state (see store.js, which includes
// these in its exports): each session's queue of messages (as `_session/queue_update`
// and `_session/queue/list` say), its plan (the latest ACP `plan` update, or the last
// `update_plan` call of the transcript shown), and the sessions waiting for the user
// (awaiting approval, or a turn that ended while nobody looked). No DOM.
"use strict";

((root, factory) => {
  const part = factory();
  if (typeof module === "object" && module.exports) module.exports = part;
  else (root.AcpUi = root.AcpUi || {}).storeSteer = part;
})(typeof self !== "undefined" ? self : this, () => {
  const EMPTY = Object.freeze({ items: Object.freeze([]), paused: false, refused: null });
  const PLAN_MARKS = { completed: "✓", in_progress: "◐", pending: "○" };
  const PLAN_LABELS = { completed: "done", in_progress: "in progress", pending: "pending" };

  function steerState() {
    return {
      queues: new Map(), // sessionId -> {items: [{id, prompt, createdAt}], paused, refused: {id, reason} | null}
      queuePushes: new Map(), // sessionId -> how many queue_update pushes came
      plans: new Map(), // sessionId -> [{content, status, priority}]
      planOpen: true, // the pinned plan is expanded
      unseen: new Set(), // sessions whose turn ended while nobody looked at them
      focused: true, // the window has the focus (the page's window focus/blur)
      queueEditing: null, // the id of the queued message being edited in place
    };
  }

  // ---- the queue ---------------------------------------------------------------------

  // A queue as the sidecar said it: the whole queue, so the latest word replaces what was
  // known. A push (`asked` null: `_session/queue_update`, sent on every change, in order)
  // always is the latest word; an answer (to list, add, edit, remove, move, run) is one
  // only if no push came since it was asked for (`queueAsked`): a push may overtake it.
  // Whether it is the queue now.
  function queueArrived(state, sessionId, answer, asked = null) {
    if (!sessionId || !answer || !Array.isArray(answer.queue)) return false;
    const pushes = state.queuePushes.get(sessionId) || 0;
    if (asked === null) state.queuePushes.set(sessionId, pushes + 1);
    else if (asked !== pushes) return false;
    const refused = answer.refused && typeof answer.refused.id === "string" ? { id: answer.refused.id, reason: String(answer.refused.reason || "") } : null;
    state.queues.set(sessionId, { items: answer.queue, paused: Boolean(answer.paused), refused });
    if (state.queueEditing && !answer.queue.some((i) => i.id === state.queueEditing)) state.queueEditing = null;
    return true;
  }

  // The token to ask for a session's queue (or change it) with (see queueArrived).
  function queueAsked(state, sessionId) {
    return state.queuePushes.get(sessionId) || 0;
  }

  function queueOf(state, sessionId) {
    return state.queues.get(sessionId) || EMPTY;
  }

  // A queued message's words (its text blocks).
  function queueText(item) {
    return (item && Array.isArray(item.prompt) ? item.prompt : [])
      .filter((b) => b && b.type === "text" && typeof b.text === "string")
      .map((b) => b.text)
      .join("\n");
  }

  // Whether Enter queues (a turn runs) rather than sends.
  function shouldQueue(state, sessionId) {
    const s = state.sessions.get(sessionId);
    return Boolean(s && (s.status === "running" || state.turnStarted.has(sessionId)));
  }

  // Where "move up" / "move down" takes an item: its new index, or null at an end.
  function movedIndex(state, sessionId, itemId, by) {
    const items = queueOf(state, sessionId).items;
    const at = items.findIndex((i) => i.id === itemId);
    const to = at + by;
    return at < 0 || to < 0 || to >= items.length ? null : to;
  }

  // ---- the plan ----------------------------------------------------------------------

  function planArrived(state, sessionId, entries) {
    if (!sessionId || !Array.isArray(entries)) return false;
    state.plans.set(sessionId, entries);
    return true;
  }

  // The plan the transcript's entries hold: the last `update_plan` call that succeeded
  // (its input's entries), or null when there is none.
  function planFromEntries(entries) {
    const calls = new Map();
    let plan = null;
    for (const m of entries || []) {
      if (m.type === "assistant") {
        for (const c of m.toolCalls || []) if (c.tool === "update_plan") calls.set(c.toolCallId, c.input);
      } else if (m.type === "tool_result" && calls.has(m.toolCallId)) {
        const input = calls.get(m.toolCallId);
        if (m.ok !== false && input && Array.isArray(input.entries)) plan = input.entries;
      }
    }
    return plan;
  }

  // What the pinned plan draws: null (nothing to pin), or its rows and counts.
  function planView(state, sessionId) {
    const entries = state.plans.get(sessionId);
    if (!Array.isArray(entries) || !entries.length) return null;
    const rows = entries.map((e) => {
      const status = PLAN_MARKS[e && e.status] ? e.status : "pending";
      return { text: String((e && e.content) || ""), status, mark: PLAN_MARKS[status], label: PLAN_LABELS[status], high: Boolean(e && e.priority === "high") };
    });
    const done = rows.filter((r) => r.status === "completed").length;
    const current = rows.find((r) => r.status === "in_progress");
    return { rows, done, total: rows.length, current: current ? current.text : null };
  }

  // ---- sessions waiting for the user -------------------------------------------------

  // A turn ended: unseen unless the user is looking at that session now.
  function turnEnded(state, sessionId) {
    if (state.focused && state.selected === sessionId) return false;
    state.unseen.add(sessionId);
    return true;
  }

  // The user looks at `sessionId` (selected, in a focused window): seen.
  function looked(state) {
    if (!state.focused || !state.selected) return false;
    return state.unseen.delete(state.selected);
  }

  function focusChanged(state, focused) {
    state.focused = Boolean(focused);
    return looked(state);
  }

  // Why a session waits for the user: "approval", "unseen", or null.
  function waitingFor(state, session) {
    if (!session) return null;
    if (session.awaitingPermission) return "approval";
    return state.unseen.has(session.sessionId) ? "unseen" : null;
  }

  function waitingCount(state) {
    let n = 0;
    for (const s of state.sessions.values()) if (!s.archived && waitingFor(state, s)) n += 1;
    return n;
  }

  return {
    steerState, queueArrived, queueAsked, queueOf, queueText, shouldQueue, movedIndex, planArrived,
    planFromEntries, planView, turnEnded, looked, focusChanged, waitingFor, waitingCount,
  };
});
