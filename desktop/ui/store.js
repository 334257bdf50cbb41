// The page's state and the rules that change it: no DOM, no bridge, so node can test it
// (`node --test tests/ui/`); the transcript's rules are in store_transcript.js, included
// in this module's exports. The views read `state` and draw; bridge.js and the views
// call these reducers with what arrived, and redraw from what they return.
//
// Reducers mutate the one state object the store creates (`createState`) and return what
// changed, instead of returning a fresh state: the session map holds thousands of
// summaries and a push arrives per streamed event, so copying it per action would cost
// O(sessions) each time; and the page's async code uses object identity as its
// "still current?" token (`state.transcript !== t` after an await), which a copied state
// would break. Only the store's functions write to `state`; views only read it.
//
// "Keep the newer summary": a session's summary arrives from pushes (`_session/state`),
// from answers to the page's own calls, and in whole lists (`session/list`, searches)
// that answer as of when they were asked. One function decides (`isNewer`):
//   - when both summaries carry `version` (a per-session counter the sidecar increases
//     with every change), the higher version is newer: one comparison, whatever the order
//     of arrival;
//   - otherwise (today's sidecar), a list is older than every summary the page learnt
//     after it asked for the list: each learnt summary is stamped with a counter
//     (`learnt`), and the list is asked for with the counter's value (`listAsked`).
// A session deleted from this page never comes back (ids are never reused), whatever a
// late list or push says; pushes that arrive before the first full load are queued and
// handled after it (`enqueue`, `booted`).
"use strict";

((root, factory) => {
  // The transcript's, the agents', the review's and the steering's reducers are in
  // store_transcript.js, store_agents.js, store_review.js and store_steer.js (loaded first
  // by index.html).
  const node = typeof module === "object" && module.exports;
  const parts = node
    ? ["./store_transcript.js", "./store_agents.js", "./store_review.js", "./store_steer.js"].map((f) => require(f))
    : [root.AcpUi.storeTranscript, root.AcpUi.storeAgents, root.AcpUi.storeReview, root.AcpUi.storeSteer];
  const store = factory(...parts);
  if (node) module.exports = store;
  else (root.AcpUi = root.AcpUi || {}).store = store;
})(typeof self !== "undefined" ? self : this, (transcript, agents, review, steer) => {
  const SIDEBAR_PAGE = 100; // sidebar items drawn per page

  function createState() {
    return {
      info: null, // page_ready's answer
      sessions: new Map(), // sessionId -> summary, in list order (newest first)
      learnt: 0, // counts the session summaries the page has learnt
      learntAt: new Map(), // sessionId -> `learnt` when its latest summary came
      deleted: new Set(), // sessions deleted from this page (for good: ids are never reused)
      selected: null,
      transcript: null, // see openTranscript
      started: false,
      booting: true, // pushes are queued until the first full load is done
      queued: [],
      drafts: {}, // sessionId -> text not sent yet (kept on the Python side too)
      scroll: {}, // sessionId -> scrollTop, or -1 for "at the end"
      turnStarted: new Map(), // sessionId -> when its running turn started (ms)
      lastPrompt: new Map(), // sessionId -> the last prompt sent from this page (Retry)
      orphans: [], // tool_call_updates for cards not drawn yet (see restoreLive)
      lastFocus: null, // data-testid of the last focused control
      filterIds: null, // a search's (or the archived view's) sessions, else null: all
      sidebarLimit: SIDEBAR_PAGE, // how many sidebar items are drawn (grows a page at a time)
      listRun: 0, // the session list being asked for (a newer one supersedes it)
      listPending: false, // its first page is in, later pages are still on their way
      groupByProject: false,
      recent: [], // recently used working directories (newest first)
      theme: "system",
      config: new Map(), // sessionId -> its ACP config options (null while being fetched)
      context: new Map(), // sessionId -> {used, size}: the last usage_update
      permissions: new Map(), // "sessionId toolCallId" -> a pending permission request
      rewind: null, // the rewind being confirmed (turns.js)
      agents: [{ name: "builtin", command: "", available: true, source: "builtin" }], // _session/agents
      agentsAsked: 0, // counts the asks for the agent list (a late answer is dropped)
      branch: null, // the branch's Changes view shown (store_review.js)
      review: new Map(), // reviewKey -> "accepted" | "rejected": the hunks reviewed here
      ...steer.steerState(), // queues, plans, sessions waiting for the user (store_steer.js)
    };
  }

  // ---- sessions: keep the newer ------------------------------------------------------

  const hasVersion = (s) => Boolean(s) && typeof s.version === "number";

  // Whether `known` (the page's, learnt at `learntAt`) is newer than `incoming`, which
  // was current when the page's counter was `asked` (null: it is arriving just now).
  function isNewer(state, known, incoming, asked = null) {
    if (!known) return false;
    if (hasVersion(known) && hasVersion(incoming)) return known.version > incoming.version;
    if (asked === null) return false; // a push or an answer: the latest word
    return (state.learntAt.get(known.sessionId) || 0) > asked;
  }

  // A summary learnt (a push, a call's answer, a local edit): merged over what was known.
  // Returns {session, before}, or null when what the page has is newer (it stays).
  function learn(state, summary) {
    const before = state.sessions.get(summary.sessionId);
    if (isNewer(state, before, summary)) return null;
    const session = { ...(before || {}), ...summary };
    state.sessions.set(summary.sessionId, session);
    state.learntAt.set(summary.sessionId, ++state.learnt);
    return { session, before };
  }

  // `_session/state`: the whole summary. A session the page does not know was created
  // elsewhere (another page, another client) and is added, unless archived or deleted
  // here. Returns null when nothing is to be drawn, else what the views need to know.
  function pushedState(state, p, now) {
    const s = state.sessions.get(p.sessionId);
    if (!s) {
      if (p.archived || state.deleted.has(p.sessionId)) return null;
      const got = learn(state, p);
      return got && { ...got, created: true, wasRunning: false, settled: false };
    }
    if (isNewer(state, s, p)) return null;
    const wasRunning = s.status === "running";
    if (p.status === "running") {
      if (!state.turnStarted.has(p.sessionId)) state.turnStarted.set(p.sessionId, now);
    } else state.turnStarted.delete(p.sessionId);
    if (s.generation !== p.generation) state.config.delete(p.sessionId); // a new runtime: ask again
    const got = learn(state, p);
    return {
      ...got,
      created: false,
      wasRunning,
      // An approval settled (it may have added a rule: "always").
      settled: Boolean(s.awaitingPermission && !p.awaitingPermission),
    };
  }

  // The token to ask for a whole list with (see listArrived).
  function listAsked(state) {
    return state.learnt;
  }

  // The whole list, as of `asked`: replaces the map, but a summary learnt since stays, a
  // session deleted here stays gone, and a selection that is gone is dropped.
  function listArrived(state, list, asked, now) {
    const previous = state.sessions;
    const sessions = new Map();
    const listed = new Set();
    const kept = new Set(); // listed, but the page's copy is newer
    for (const s of list) {
      if (state.deleted.has(s.sessionId)) continue;
      listed.add(s.sessionId);
      if (isNewer(state, previous.get(s.sessionId), s, asked)) kept.add(s.sessionId);
      else sessions.set(s.sessionId, s);
    }
    // The newer ones, and those learnt after the list was asked for (created since): kept,
    // after the list.
    for (const s of previous.values()) {
      const since = (state.learntAt.get(s.sessionId) || 0) > asked;
      if (kept.has(s.sessionId) || (!listed.has(s.sessionId) && since)) sessions.set(s.sessionId, s);
    }
    state.sessions = sessions;
    for (const s of sessions.values()) {
      if (s.status === "running" && !state.turnStarted.has(s.sessionId)) state.turnStarted.set(s.sessionId, Date.parse(s.updatedAt) || now);
      else if (s.status !== "running") state.turnStarted.delete(s.sessionId);
    }
    const dropped = Boolean(state.selected && !sessions.has(state.selected));
    if (dropped) {
      state.selected = null;
      state.transcript = null;
    }
    return { selectionDropped: dropped };
  }

  // The list's first page while the rest is still being asked for: its summaries merged
  // in (nothing is dropped: only the whole list can say a session is gone).
  function pageArrived(state, page, now) {
    for (const s of page) {
      if (state.deleted.has(s.sessionId)) continue;
      if (isNewer(state, state.sessions.get(s.sessionId), s)) continue;
      state.sessions.set(s.sessionId, s);
      if (s.status === "running" && !state.turnStarted.has(s.sessionId)) state.turnStarted.set(s.sessionId, Date.parse(s.updatedAt) || now);
      else if (s.status !== "running") state.turnStarted.delete(s.sessionId);
    }
  }

  // A search's (or the archived view's) answer: its summaries merged in, the sidebar
  // showing only them.
  function searchArrived(state, found) {
    for (const s of found) {
      const known = state.sessions.get(s.sessionId);
      if (!isNewer(state, known, s)) state.sessions.set(s.sessionId, { ...(known || {}), ...s });
    }
    state.filterIds = new Set(found.map((s) => s.sessionId));
    state.sidebarLimit = SIDEBAR_PAGE;
  }

  function clearFilter(state) {
    state.filterIds = null;
    state.sidebarLimit = SIDEBAR_PAGE;
  }

  // Deleted from this page: for good.
  function removed(state, sessionId) {
    state.sessions.delete(sessionId);
    state.deleted.add(sessionId);
    if (state.selected === sessionId) {
      state.selected = null;
      state.transcript = null;
    }
  }

  // ---- what the sidebar shows --------------------------------------------------------

  // By last activity; a search or the archived view shows the sidecar's answer.
  function visibleSessions(state) {
    const byActivity = (a, b) => String(b.updatedAt || "").localeCompare(String(a.updatedAt || ""));
    if (state.filterIds) return [...state.filterIds].map((id) => state.sessions.get(id)).filter(Boolean).sort(byActivity);
    return [...state.sessions.values()].filter((s) => !s.archived).sort(byActivity);
  }

  function showMore(state, all = false) {
    state.sidebarLimit = all ? state.sessions.size : state.sidebarLimit + SIDEBAR_PAGE;
  }

  // The quick switch's matches: every word in the title, folder or id.
  function quickMatches(state, query, max = 20) {
    const words = String(query).toLowerCase().split(/\s+/).filter(Boolean);
    return [...state.sessions.values()].filter((s) => {
      const hay = `${s.title} ${s.cwd} ${s.sessionId}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    }).slice(0, max);
  }

  // ---- selection and the transcript --------------------------------------------------

  function selected(state) {
    return state.sessions.get(state.selected) || null;
  }

  function select(state, sessionId) {
    state.selected = sessionId;
    state.transcript = null;
    state.orphans = [];
    state.rewind = null;
    state.branch = null;
    state.queueEditing = null;
    steer.looked(state);
  }

  // After a full load: the first session, when none is selected.
  function selectFirst(state) {
    if (!state.selected && state.sessions.size) state.selected = state.sessions.keys().next().value;
  }

  // ---- the rewind being confirmed (turns.js) ----------------------------------------

  function rewindPlanned(state, rewind) {
    state.rewind = rewind;
  }

  function rewindCleared(state) {
    const r = state.rewind;
    state.rewind = null;
    return r;
  }

  // What Retry sends: this page's last prompt, else the transcript's last user message.
  function retryText(state, sessionId) {
    let text = state.lastPrompt.get(sessionId);
    const t = state.transcript;
    if (!text && t && t.loaded && t.sessionId === sessionId) {
      const users = t.messages.filter((m) => m.type === "user");
      text = users.length ? users[users.length - 1].text : "";
    }
    return text || "";
  }

  // ---- drafts, scroll, what a rebuilt page comes back to -----------------------------

  function setDraft(state, sessionId, text) {
    if (!sessionId) return;
    if (text) state.drafts[sessionId] = text;
    else delete state.drafts[sessionId];
  }

  function draft(state, sessionId) {
    return (sessionId && state.drafts[sessionId]) || "";
  }

  // The scroll position of the transcript shown (a transcript still loading has none).
  function rememberScroll(state, atBottom, top) {
    const t = state.transcript;
    if (state.selected && t && t.loaded) state.scroll[state.selected] = atBottom ? -1 : top;
  }

  // Where to scroll a transcript that loaded: a number, or null for "at the end".
  function scrollFor(state, sessionId) {
    const want = state.scroll[sessionId];
    return typeof want === "number" && want >= 0 ? want : null;
  }

  function memory(state) {
    return [state.selected, state.scroll, state.lastFocus];
  }

  // page_ready's memory and settings.
  function restore(state, memory, settings) {
    state.drafts = { ...((memory && memory.drafts) || {}) };
    state.scroll = { ...((memory && memory.scroll) || {}) };
    state.selected = (memory && memory.selected) || null; // dropped by listArrived if it is gone
    state.recent = (settings && settings.recentFolders) || [];
    state.unseen = new Set((memory && memory.unseen) || []);
  }

  function addRecent(state, cwd) {
    if (!state.recent.includes(cwd)) state.recent.unshift(cwd);
  }

  // ---- config options and context ----------------------------------------------------

  // Whether to ask for a session's config options now (asked once; null until answered).
  function configWanted(state, session) {
    if (state.config.get(session.sessionId) !== undefined || !session.live) return false;
    state.config.set(session.sessionId, null);
    return true;
  }

  // Options fetched (only if still wanted: a push meanwhile is newer) or pushed.
  function configArrived(state, sessionId, options, fetched) {
    if (fetched && state.config.get(sessionId) !== null) return;
    state.config.set(sessionId, options || []);
  }

  function usage(state, sessionId, used, size) {
    state.context.set(sessionId, { used, size });
  }

  // ---- turns running, permissions ----------------------------------------------------

  function markRunning(state, sessionId, now) {
    if (!state.turnStarted.has(sessionId)) state.turnStarted.set(sessionId, now);
  }

  function turnOver(state, sessionId) {
    state.turnStarted.delete(sessionId);
  }

  // A prompt refused: not running, unless the session says it is.
  function promptRefused(state, sessionId) {
    const now = state.sessions.get(sessionId);
    if (!now || now.status !== "running") state.turnStarted.delete(sessionId);
  }

  const permissionKey = (sessionId, toolCallId) => `${sessionId} ${toolCallId}`;

  function permissionAsked(state, p) {
    state.permissions.set(permissionKey(p.sessionId, p.toolCall.toolCallId), p);
  }

  function permissionSettled(state, sessionId, toolCallId) {
    state.permissions.delete(permissionKey(sessionId, toolCallId));
  }

  function permissionsFor(state, sessionId) {
    return [...state.permissions.values()].filter((p) => p.sessionId === sessionId);
  }

  // The selected session's progress line: null, or {waiting, seconds}.
  function working(state, now) {
    const s = selected(state);
    const started = s && state.turnStarted.get(s.sessionId);
    if (!started) return null;
    const seconds = Math.max(0, Math.floor((now - started) / 1000));
    const waiting = Boolean(s.awaitingPermission) || permissionsFor(state, s.sessionId).length > 0;
    return { waiting, seconds };
  }

  // ---- the boot queue ----------------------------------------------------------------

  // Pushed events: the ones to handle now (none while the first load runs: queued).
  function enqueue(state, events) {
    if (!state.booting) return events;
    state.queued.push(...events);
    return [];
  }

  // The first load is done: what was pushed meanwhile, in order.
  function booted(state) {
    state.booting = false;
    return state.queued.splice(0);
  }

  return {
    ...transcript, ...agents, ...review, ...steer, SIDEBAR_PAGE, createState, isNewer, learn, pushedState,
    listAsked, listArrived, pageArrived, searchArrived, clearFilter, removed, visibleSessions, showMore, quickMatches, selected, select,
    selectFirst, rewindPlanned, rewindCleared, retryText, setDraft, draft, rememberScroll,
    scrollFor, memory, restore, addRecent, configWanted, configArrived, usage, markRunning,
    turnOver, promptRefused, permissionKey, permissionAsked, permissionSettled, permissionsFor,
    working, enqueue, booted,
  };
});
