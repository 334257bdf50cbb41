// The transcript's part of the page's state (see store.js, which includes these in its
// exports): the page of the store that is shown and how it grows (older pages, the tail
// after a turn), a turn's changes and diffs, tool updates waiting for their card. No DOM.
//
// The transcript object's identity is the token a late answer is checked against: after
// an await, an answer for a transcript no longer shown changes nothing.
"use strict";

((root, factory) => {
  const part = factory();
  if (typeof module === "object" && module.exports) module.exports = part;
  else (root.AcpUi = root.AcpUi || {}).storeTranscript = part;
})(typeof self !== "undefined" ? self : this, () => {
  const PAGE = 50; // transcript entries per page
  const TAIL = 200; // entries asked for at once after a turn
  const MAX_ORPHANS = 5000; // tool_call_updates kept for cards not drawn yet

  // The transcript shown: one page of the store (`messages`, from `offset` to `end`) plus
  // what the views draw live below it.
  function openTranscript(state, sessionId) {
    const t = {
      sessionId,
      messages: [],
      offset: 0,
      end: 0,
      loaded: false,
      changes: new Map(), // turn -> {turn, files, total}: what it changed
      diffs: new Map(), // turn -> {byPath, truncated}: its diff, once asked for
      asked: new Set(), // turns whose changes were asked for
      openFiles: new Set(), // "turn\npath" of the file diffs shown
      fetches: Promise.resolve(),
      tail: Promise.resolve(),
    };
    state.transcript = t;
    state.orphans = [];
    return t;
  }

  // The newest page arrived (null: it failed, nothing to append to). True if it is shown.
  function firstPage(state, t, page) {
    if (state.transcript !== t || t.loaded) return false;
    if (!page) {
      state.transcript = null;
      return false;
    }
    Object.assign(t, { messages: page.messages, offset: page.offset, end: page.offset + page.messages.length, loaded: true });
    return true;
  }

  // The page before the first one shown: {offset, limit}, or null at the start.
  function olderRange(t) {
    if (!t || t.offset === 0) return null;
    const offset = Math.max(0, t.offset - PAGE);
    return { offset, limit: t.offset - offset };
  }

  const indexOf = (m) => (m && typeof m.index === "number" ? m.index : null);

  function olderPage(state, t, offset, page) {
    if (!page || state.transcript !== t || offset >= t.offset) return false;
    const first = indexOf(t.messages[0]);
    const before = page.messages.filter((m) => first === null || indexOf(m) === null || indexOf(m) < first);
    t.messages = before.concat(t.messages);
    t.offset = offset;
    return true;
  }

  // Entries past the end of what is shown (`end`: the position after the last one
  // fetched). A page asked for twice, or answered after a newer one, adds only the entries
  // not shown yet (by their `index`). How many were added, or null if it is stale.
  function tailPage(state, t, page) {
    if (!page || state.transcript !== t) return null;
    const last = indexOf(t.messages[t.messages.length - 1]);
    const fresh = page.messages.filter((m) => last === null || indexOf(m) === null || indexOf(m) > last);
    t.messages = t.messages.concat(fresh);
    const from = typeof page.offset === "number" ? page.offset : t.end;
    t.end = Math.max(t.end, from + page.messages.length);
    return fresh.length;
  }

  // ---- per-turn changes (turns.js) ---------------------------------------------------

  // Whether to ask for a turn's changes now (once per transcript shown).
  function changesWanted(t, turn) {
    if (t.changes.has(turn) || t.asked.has(turn)) return false;
    t.asked.add(turn);
    return true;
  }

  // A turn's changes: `pushed` (`_session/turn_changes`, the turn ended) replaces what was
  // known and forgets its diff; a fetched answer fills in only what no push said first.
  // Whether they are the ones to draw.
  function changesArrived(state, t, changes, pushed) {
    if (state.transcript !== t || !changes) return false;
    if (!pushed && t.changes.has(changes.turn)) return false;
    t.changes.set(changes.turn, changes);
    if (pushed) t.diffs.delete(changes.turn);
    return true;
  }

  function diffArrived(t, turn, found) {
    t.diffs.set(turn, found);
  }

  // A file's diff opened or closed (kept so when the transcript is drawn again).
  function fileDiffShown(t, turn, path, open) {
    t.openFiles[open ? "add" : "delete"](`${turn}\n${path}`);
  }

  // A tool_call_update whose card is not drawn yet (a page loading mid-command).
  function orphan(state, params) {
    if (state.orphans.length < MAX_ORPHANS) state.orphans.push(params);
  }

  function takeOrphans(state) {
    return state.orphans.splice(0);
  }

  return {
    PAGE, TAIL, openTranscript, firstPage, olderRange, olderPage, tailPage, changesWanted,
    changesArrived, diffArrived, fileDiffShown, orphan, takeOrphans,
  };
});
