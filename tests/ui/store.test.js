// The page's store (desktop/ui/store.js), without a window: the ordering rules that the
// window tests could only catch as races. Run: node --test tests/ui/
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const store = require(path.join(__dirname, "..", "..", "desktop", "ui", "store.js"));

const NOW = Date.parse("2026-01-01T12:00:00Z");

function summary(id, extra = {}) {
  return { sessionId: id, title: id, cwd: `/w/${id}`, status: "idle", generation: 1, live: true, updatedAt: "2026-01-01T10:00:00Z", ...extra };
}

function withSessions(...sessions) {
  const state = store.createState();
  store.listArrived(state, sessions, store.listAsked(state), NOW);
  return state;
}

const ids = (state) => [...state.sessions.keys()];

test("a list asked for before a push does not undo the pushed summary", () => {
  const state = withSessions(summary("a"), summary("b"));
  const asked = store.listAsked(state);
  store.pushedState(state, summary("a", { status: "running" }), NOW); // while the list is on its way
  store.listArrived(state, [summary("a", { status: "idle" }), summary("b")], asked, NOW);
  assert.equal(state.sessions.get("a").status, "running");
  assert.deepEqual(ids(state).sort(), ["a", "b"]);
});

test("a list asked for after a push is the latest word", () => {
  const state = withSessions(summary("a"));
  store.pushedState(state, summary("a", { status: "running" }), NOW);
  const asked = store.listAsked(state);
  store.listArrived(state, [summary("a", { status: "idle", title: "renamed" })], asked, NOW);
  assert.equal(state.sessions.get("a").status, "idle");
  assert.equal(state.sessions.get("a").title, "renamed");
});

test("a session created while the list was on its way stays, after the listed ones", () => {
  const state = withSessions(summary("a"));
  const asked = store.listAsked(state);
  store.learn(state, summary("new"));
  store.listArrived(state, [summary("a"), summary("b")], asked, NOW);
  assert.deepEqual(ids(state), ["a", "b", "new"]);
});

test("a session gone from a list asked for later is dropped, and so is its selection", () => {
  const state = withSessions(summary("a"), summary("b"));
  store.select(state, "b");
  const got = store.listArrived(state, [summary("a")], store.listAsked(state), NOW);
  assert.deepEqual(ids(state), ["a"]);
  assert.equal(state.selected, null);
  assert.equal(got.selectionDropped, true);
});

test("a deleted session never comes back: not from a late list, not from a push", () => {
  const state = withSessions(summary("a"), summary("b"));
  const asked = store.listAsked(state);
  store.select(state, "b");
  store.removed(state, "b");
  assert.equal(state.selected, null);
  store.listArrived(state, [summary("a"), summary("b")], asked, NOW);
  assert.deepEqual(ids(state), ["a"]);
  assert.equal(store.pushedState(state, summary("b", { status: "closed" }), NOW), null);
  store.listArrived(state, [summary("a"), summary("b")], store.listAsked(state), NOW);
  assert.deepEqual(ids(state), ["a"]);
});

test("the list's first page adds what it holds and drops nothing; the whole list then judges", () => {
  const state = withSessions(summary("old"), summary("gone"), summary("a", { version: 5, title: "newest" }));
  const asked = store.listAsked(state);
  store.pageArrived(state, [summary("a", { version: 3, title: "stale" }), summary("b", { status: "running" })], NOW);
  assert.deepEqual(ids(state), ["old", "gone", "a", "b"]); // only the whole list can say a session is gone
  assert.equal(state.sessions.get("a").title, "newest"); // an older copy never replaces a newer
  assert.ok(state.turnStarted.has("b"));
  store.listArrived(state, [summary("a", { version: 6 }), summary("b", { status: "running" }), summary("old")], asked, NOW);
  assert.deepEqual(ids(state).sort(), ["a", "b", "old"]);
});

test("a page never brings back a session deleted here", () => {
  const state = withSessions(summary("a"), summary("b"));
  store.removed(state, "b");
  store.pageArrived(state, [summary("a"), summary("b")], NOW);
  assert.deepEqual(ids(state), ["a"]);
});

test("a push for an unknown session adds it, unless it is archived", () => {
  const state = withSessions(summary("a"));
  assert.equal(store.pushedState(state, summary("z", { archived: true }), NOW), null);
  assert.equal(state.sessions.has("z"), false);
  const got = store.pushedState(state, summary("c"), NOW);
  assert.equal(got.created, true);
  assert.equal(state.sessions.has("c"), true);
});

test("with versions, the higher version wins whatever the order of arrival", () => {
  const state = withSessions(summary("a", { version: 3 }));
  const asked = store.listAsked(state);
  assert.notEqual(store.pushedState(state, summary("a", { version: 5, status: "running" }), NOW), null);
  // An older push (an answer to an earlier call) after it changes nothing.
  assert.equal(store.pushedState(state, summary("a", { version: 4, status: "idle" }), NOW), null);
  assert.equal(store.learn(state, summary("a", { version: 4, title: "old" })), null);
  assert.equal(state.sessions.get("a").status, "running");
  // A list asked for before the push, but answered with a newer version: the list wins,
  // where the counter alone would have kept the page's copy.
  store.listArrived(state, [summary("a", { version: 6, status: "idle", title: "newest" })], asked, NOW);
  assert.equal(state.sessions.get("a").title, "newest");
  // A list asked for after everything, but carrying an older version: the page's stays.
  store.listArrived(state, [summary("a", { version: 2, title: "stale" })], store.listAsked(state), NOW);
  assert.equal(state.sessions.get("a").title, "newest");
});

test("a search merges newer summaries only and filters the sidebar", () => {
  const state = withSessions(summary("a", { version: 2, title: "fresh" }), summary("b", { updatedAt: "2026-01-01T11:00:00Z" }));
  store.searchArrived(state, [summary("a", { version: 1, title: "stale" }), summary("b", { title: "found", updatedAt: "2026-01-01T11:00:00Z" })]);
  assert.equal(state.sessions.get("a").title, "fresh");
  assert.equal(state.sessions.get("b").title, "found");
  assert.deepEqual(store.visibleSessions(state).map((s) => s.sessionId), ["b", "a"]);
  store.clearFilter(state);
  assert.equal(state.filterIds, null);
});

test("the sidebar: by last activity, archived ones hidden, a page at a time", () => {
  const state = withSessions(
    summary("old", { updatedAt: "2026-01-01T08:00:00Z" }),
    summary("arch", { archived: true, updatedAt: "2026-01-01T11:30:00Z" }),
    summary("new", { updatedAt: "2026-01-01T11:00:00Z" }),
  );
  assert.deepEqual(store.visibleSessions(state).map((s) => s.sessionId), ["new", "old"]);
  assert.equal(state.sidebarLimit, store.SIDEBAR_PAGE);
  store.showMore(state);
  assert.equal(state.sidebarLimit, 2 * store.SIDEBAR_PAGE);
  store.showMore(state, true);
  assert.equal(state.sidebarLimit, 3);
});

test("the quick switch matches every word in title, folder or id", () => {
  const state = withSessions(summary("alpha", { title: "Fix the parser" }), summary("beta", { title: "Docs" }));
  assert.deepEqual(store.quickMatches(state, "parser w/alpha").map((s) => s.sessionId), ["alpha"]);
  assert.deepEqual(store.quickMatches(state, "").map((s) => s.sessionId), ["alpha", "beta"]);
});

test("pushes during boot are handled after the first load, in order", () => {
  const state = store.createState();
  assert.deepEqual(store.enqueue(state, [{ n: 1 }, { n: 2 }]), []);
  assert.deepEqual(store.enqueue(state, [{ n: 3 }]), []);
  assert.deepEqual(store.booted(state), [{ n: 1 }, { n: 2 }, { n: 3 }]);
  assert.deepEqual(store.enqueue(state, [{ n: 4 }]), [{ n: 4 }]);
  assert.deepEqual(state.queued, []);
});

test("a running turn's start: from the push, kept while it runs, gone when it ends", () => {
  const state = withSessions(summary("a"));
  store.pushedState(state, summary("a", { status: "running" }), NOW);
  store.pushedState(state, summary("a", { status: "running" }), NOW + 5000);
  assert.equal(state.turnStarted.get("a"), NOW);
  assert.deepEqual(store.working(state, NOW + 12500), null); // nothing selected
  store.select(state, "a");
  assert.deepEqual(store.working(state, NOW + 12500), { waiting: false, seconds: 12 });
  const got = store.pushedState(state, summary("a", { status: "idle" }), NOW);
  assert.equal(got.wasRunning, true);
  assert.equal(state.turnStarted.has("a"), false);
});

test("a new generation forgets the config options; a fetch answered after a push does not undo it", () => {
  const state = withSessions(summary("a"));
  const s = state.sessions.get("a");
  assert.equal(store.configWanted(state, s), true);
  assert.equal(store.configWanted(state, s), false); // asked once
  store.configArrived(state, "a", [{ id: "model", currentValue: "pushed" }], false);
  store.configArrived(state, "a", [{ id: "model", currentValue: "fetched" }], true);
  assert.equal(state.config.get("a")[0].currentValue, "pushed");
  store.pushedState(state, summary("a", { generation: 2 }), NOW);
  assert.equal(state.config.has("a"), false);
});

test("a first page for a transcript no longer shown changes nothing", () => {
  const state = withSessions(summary("a"), summary("b"));
  store.select(state, "a");
  const ta = store.openTranscript(state, "a");
  store.select(state, "b");
  const tb = store.openTranscript(state, "b");
  assert.equal(store.firstPage(state, ta, { offset: 0, messages: [{ index: 0, type: "user", text: "for a" }] }), false);
  assert.equal(state.transcript, tb);
  assert.deepEqual(tb.messages, []);
  assert.equal(store.firstPage(state, tb, { offset: 10, messages: [{ index: 10, type: "user", text: "b" }] }), true);
  assert.deepEqual([tb.offset, tb.end, tb.loaded], [10, 11, true]);
  // A second copy of the first page, late: the tail appended meanwhile stays.
  store.tailPage(state, tb, { offset: 11, messages: [{ index: 11, type: "assistant", text: "live" }] });
  assert.equal(store.firstPage(state, tb, { offset: 10, messages: [{ index: 10, type: "user", text: "b" }] }), false);
  assert.deepEqual(tb.messages.map((m) => m.index), [10, 11]);
});

test("a failed first page leaves no transcript to append to", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  assert.equal(store.firstPage(state, t, null), false);
  assert.equal(state.transcript, null);
  assert.equal(store.tailPage(state, t, { offset: 0, messages: [{ index: 0 }] }), null);
});

test("tail pages: a late or repeated one adds only what is not shown yet", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  store.firstPage(state, t, { offset: 0, messages: [{ index: 0 }, { index: 1 }] });
  assert.equal(store.tailPage(state, t, { offset: 2, messages: [{ index: 2 }, { index: 3 }] }), 2);
  assert.equal(store.tailPage(state, t, { offset: 2, messages: [{ index: 2 }, { index: 3 }] }), 0);
  assert.equal(store.tailPage(state, t, { offset: 3, messages: [{ index: 3 }, { index: 4 }] }), 1);
  assert.deepEqual(t.messages.map((m) => m.index), [0, 1, 2, 3, 4]);
  assert.equal(t.end, 5);
});

test("older pages: asked for by range, prepended once", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  const page = (from, to) => ({ offset: from, messages: Array.from({ length: to - from }, (_, i) => ({ index: from + i })) });
  store.firstPage(state, t, page(70, 120));
  const range = store.olderRange(t);
  assert.deepEqual(range, { offset: 20, limit: 50 });
  assert.equal(store.olderPage(state, t, range.offset, page(20, 70)), true);
  assert.equal(store.olderPage(state, t, range.offset, page(20, 70)), false); // a second click's answer
  assert.deepEqual(store.olderRange(t), { offset: 0, limit: 20 });
  store.olderPage(state, t, 0, page(0, 20));
  assert.equal(store.olderRange(t), null);
  assert.deepEqual(t.messages.map((m) => m.index), Array.from({ length: 120 }, (_, i) => i));
});

test("drafts: per session, an empty one forgotten", () => {
  const state = store.createState();
  store.restore(state, { drafts: { a: "kept" }, scroll: { a: 40 }, selected: "a" }, { recentFolders: ["/w"] });
  assert.equal(store.draft(state, "a"), "kept");
  store.setDraft(state, "b", "typed");
  store.setDraft(state, "a", "");
  assert.deepEqual(state.drafts, { b: "typed" });
  assert.equal(store.draft(state, null), "");
  assert.deepEqual(state.recent, ["/w"]);
  store.addRecent(state, "/x");
  store.addRecent(state, "/w");
  assert.deepEqual(state.recent, ["/x", "/w"]);
});

test("scroll memory: none for a transcript still loading, -1 for at the end", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  store.rememberScroll(state, true, 0); // still loading: its empty page is not "at the end"
  assert.deepEqual(state.scroll, {});
  store.firstPage(state, t, { offset: 0, messages: [] });
  store.rememberScroll(state, false, 120);
  assert.equal(store.scrollFor(state, "a"), 120);
  store.rememberScroll(state, true, 400);
  assert.equal(store.scrollFor(state, "a"), null);
  state.lastFocus = "prompt-input";
  assert.deepEqual(store.memory(state), ["a", { a: -1 }, "prompt-input"]);
});

test("permissions: per session, settled by id; they make the progress line wait", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  store.markRunning(state, "a", NOW);
  const p = { sessionId: "a", toolCall: { toolCallId: "t1", title: "rm x" } };
  store.permissionAsked(state, p);
  store.permissionAsked(state, { sessionId: "b", toolCall: { toolCallId: "t1" } });
  assert.deepEqual(store.permissionsFor(state, "a"), [p]);
  assert.equal(store.working(state, NOW).waiting, true);
  store.permissionSettled(state, "a", "t1");
  assert.deepEqual(store.permissionsFor(state, "a"), []);
  assert.equal(store.working(state, NOW).waiting, false);
  assert.equal(state.permissions.size, 1);
});

test("retry: this page's last prompt, else the transcript's last user message", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  assert.equal(store.retryText(state, "a"), "");
  store.firstPage(state, t, { offset: 0, messages: [{ index: 0, type: "user", text: "one" }, { index: 1, type: "assistant", text: "x" }, { index: 2, type: "user", text: "two" }] });
  assert.equal(store.retryText(state, "a"), "two");
  state.lastPrompt.set("a", "mine");
  assert.equal(store.retryText(state, "a"), "mine");
});

test("a refused prompt: not running unless the session says so", () => {
  const state = withSessions(summary("a"), summary("b", { status: "running" }));
  store.markRunning(state, "a", NOW);
  store.promptRefused(state, "a");
  assert.equal(state.turnStarted.has("a"), false);
  store.promptRefused(state, "b");
  assert.equal(state.turnStarted.has("b"), true);
});

test("tool updates for cards not drawn yet are kept, within a bound, and taken once", () => {
  const state = store.createState();
  for (let i = 0; i < 5003; i++) store.orphan(state, { i });
  assert.equal(store.takeOrphans(state).length, 5000);
  assert.deepEqual(store.takeOrphans(state), []);
});

test("a turn's changes: asked for once; a push replaces them and forgets the diff; a late fetch does not undo a push", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  assert.equal(store.changesWanted(t, 3), true);
  assert.equal(store.changesWanted(t, 3), false);
  store.diffArrived(t, 3, { byPath: new Map(), truncated: false });
  const pushed = { sessionId: "a", turn: 3, files: [{ path: "x" }], total: 1 };
  assert.equal(store.changesArrived(state, t, pushed, true), true);
  assert.equal(t.diffs.has(3), false, "the diff of the turn as it was is forgotten");
  // The fetch asked for before the turn ended answers now, with what it saw then.
  assert.equal(store.changesArrived(state, t, { turn: 3, files: [], total: 0 }, false), false);
  assert.equal(t.changes.get(3), pushed);
  assert.equal(store.changesWanted(t, 3), false, "known: not asked for again");
  // For a transcript no longer shown: nothing.
  store.openTranscript(state, "a");
  assert.equal(store.changesArrived(state, t, { turn: 4, files: [], total: 0 }, true), false);
});

test("open file diffs and the rewind being confirmed are kept by the store", () => {
  const state = withSessions(summary("a"));
  store.select(state, "a");
  const t = store.openTranscript(state, "a");
  store.fileDiffShown(t, 2, "src/a.py", true);
  store.fileDiffShown(t, 2, "src/b.py", true);
  store.fileDiffShown(t, 2, "src/a.py", false);
  assert.deepEqual([...t.openFiles], ["2\nsrc/b.py"]);
  const r = { sessionId: "a", turn: 2, scope: "code", force: false, plan: {} };
  store.rewindPlanned(state, r);
  assert.equal(store.rewindCleared(state), r);
  assert.equal(state.rewind, null);
  store.rewindPlanned(state, r);
  store.select(state, "a"); // selecting again forgets it
  assert.equal(state.rewind, null);
});

test("the agent list: builtin first and alone until the sidecar answers; a late answer is dropped", () => {
  const state = store.createState();
  assert.deepEqual(state.agents.map((a) => a.name), ["builtin"], "the form offers builtin before any answer");
  const first = store.agentsWanted(state);
  const second = store.agentsWanted(state); // the form opened again meanwhile
  const listed = [
    { name: "claude", command: "claude-agent-acp", available: false, install: "npm install -g @zed-industries/claude-agent-acp", source: "preset" },
    { name: "builtin", command: "", available: true, source: "builtin" },
    { name: "scripted", command: "python agent.py", available: true, source: "config", capabilities: { loadSession: true } },
  ];
  assert.equal(store.agentsArrived(state, listed, second), true);
  assert.deepEqual(state.agents.map((a) => a.name), ["builtin", "claude", "scripted"]);
  assert.equal(store.agentsArrived(state, [{ name: "builtin", available: true }], first), false, "an older answer");
  assert.deepEqual(state.agents.map((a) => a.name), ["builtin", "claude", "scripted"]);
  // A sidecar without _session/agents (no answer): builtin alone.
  assert.equal(store.agentsArrived(state, null, store.agentsWanted(state)), true);
  assert.deepEqual(state.agents.map((a) => a.name), ["builtin"]);
});

test("an agent not installed: listed with its install command, and what the form says instead of creating", () => {
  const state = store.createState();
  store.agentsArrived(state, [
    { name: "builtin", command: "", available: true, source: "builtin" },
    { name: "claude", command: "claude-agent-acp", available: false, install: "npm install -g @zed-industries/claude-agent-acp", source: "preset" },
    { name: "bare", command: "no-such-cmd --acp", available: false, source: "command line" },
    { name: "scripted", command: "python agent.py", available: true, source: "config" },
  ], store.agentsWanted(state));
  const byName = Object.fromEntries(state.agents.map((a) => [a.name, a]));
  assert.equal(store.agentLabel(byName.claude), "claude — not installed: npm install -g @zed-industries/claude-agent-acp");
  assert.equal(store.agentLabel(byName.bare), "bare — not installed");
  assert.equal(store.agentLabel(byName.scripted), "scripted");
  assert.equal(store.agentProblem(state, "claude"), "claude is not installed. Install it with: npm install -g @zed-industries/claude-agent-acp");
  assert.equal(store.agentProblem(state, "bare"), "bare is not installed. Its command (no-such-cmd --acp) was not found.");
  assert.equal(store.agentProblem(state, "scripted"), null);
  assert.equal(store.agentProblem(state, "builtin"), null);
  assert.equal(byName.scripted.install, "", "an install hint only while not installed");
});

test("a session's agent: kept from its summary through pushes and lists, shown unless builtin", () => {
  const state = withSessions(summary("a", { agent: "scripted" }), summary("b", { agent: "builtin" }), summary("c"));
  assert.equal(store.agentShown(state.sessions.get("a")), "scripted");
  assert.equal(store.agentShown(state.sessions.get("b")), null);
  assert.equal(store.agentShown(state.sessions.get("c")), null, "a summary without one: builtin");
  store.pushedState(state, summary("a", { agent: "scripted", status: "running" }), NOW);
  store.learn(state, { sessionId: "a", title: "renamed" }); // a partial summary keeps the agent
  assert.equal(state.sessions.get("a").agent, "scripted");
  store.pushedState(state, summary("new", { agent: "codex" }), NOW); // created elsewhere
  assert.equal(store.agentShown(state.sessions.get("new")), "codex");
});
