// The steering part of the page's store (desktop/ui/store_steer.js): the queue as the
// sidecar says it, the pinned plan, and the sessions waiting for the user.
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

const item = (id, text) => ({ id, prompt: [{ type: "text", text }], createdAt: "2026-01-01T12:00:00Z" });

test("the queue is what the sidecar said last, whole", () => {
  const state = withSessions(summary("a"));
  assert.deepEqual(store.queueOf(state, "a"), { items: [], paused: false, refused: null });
  assert.equal(store.queueArrived(state, "a", { queue: [item("q1", "one"), item("q2", "two")], paused: false }), true);
  assert.deepEqual(store.queueOf(state, "a").items.map(store.queueText), ["one", "two"]);
  store.queueArrived(state, "a", { queue: [item("q2", "two")], paused: true });
  assert.deepEqual(store.queueOf(state, "a").items.map((i) => i.id), ["q2"]);
  assert.equal(store.queueOf(state, "a").paused, true);
  assert.equal(store.queueArrived(state, "a", { error: { code: 1 } }), false, "an error is no queue");
  assert.equal(store.queueOf(state, "a").items.length, 1);
});

test("a message its turn refused is kept with the queue, and why", () => {
  const state = withSessions(summary("a"));
  store.queueArrived(state, "a", { queue: [item("q1", "one")], paused: true, refused: { id: "q1", reason: "no images" } });
  assert.deepEqual(store.queueOf(state, "a").refused, { id: "q1", reason: "no images" });
  store.queueArrived(state, "a", { queue: [], paused: true, refused: null });
  assert.equal(store.queueOf(state, "a").refused, null);
  assert.equal(store.queueOf(state, "b").refused, null, "an unknown session's queue refused nothing");
});

test("an item being edited that ran or was removed stops being edited", () => {
  const state = withSessions(summary("a"));
  store.queueArrived(state, "a", { queue: [item("q1", "one")], paused: false });
  state.queueEditing = "q1";
  store.queueArrived(state, "a", { queue: [], paused: false });
  assert.equal(state.queueEditing, null);
});

test("a queued message's text is its text blocks, nothing else", () => {
  const it = { id: "x", prompt: [{ type: "text", text: "a" }, { type: "image", data: "..." }, { type: "text", text: "b" }] };
  assert.equal(store.queueText(it), "a\nb");
  assert.equal(store.queueText({ id: "y" }), "");
});

test("Enter queues while a turn runs and sends when idle", () => {
  const state = withSessions(summary("a"), summary("b", { status: "running" }));
  assert.equal(store.shouldQueue(state, "a"), false);
  assert.equal(store.shouldQueue(state, "b"), true);
  store.markRunning(state, "a", NOW); // this page just sent one
  assert.equal(store.shouldQueue(state, "a"), true);
});

test("moving up and down stops at the ends", () => {
  const state = withSessions(summary("a"));
  store.queueArrived(state, "a", { queue: [item("q1", "1"), item("q2", "2"), item("q3", "3")], paused: false });
  assert.equal(store.movedIndex(state, "a", "q1", -1), null);
  assert.equal(store.movedIndex(state, "a", "q1", 1), 1);
  assert.equal(store.movedIndex(state, "a", "q3", 1), null);
  assert.equal(store.movedIndex(state, "a", "q3", -1), 1);
  assert.equal(store.movedIndex(state, "a", "gone", 1), null);
});

test("the plan from the transcript is the last update_plan call that succeeded", () => {
  const call = (id, entries) => ({ type: "assistant", text: "", toolCalls: [{ toolCallId: id, tool: "update_plan", input: { entries } }] });
  const result = (id, ok) => ({ type: "tool_result", toolCallId: id, tool: "update_plan", ok, text: "" });
  const first = [{ content: "look", status: "completed" }];
  const second = [{ content: "look", status: "completed" }, { content: "fix", status: "in_progress" }];
  const refused = [{ content: "bad", status: "nope" }];
  const entries = [call("c1", first), result("c1", true), call("c2", second), result("c2", true), call("c3", refused), result("c3", false)];
  assert.deepEqual(store.planFromEntries(entries), second);
  assert.equal(store.planFromEntries([call("c1", first)]), null, "a call without its result is not the plan yet");
  assert.equal(store.planFromEntries([]), null);
});

test("the pinned plan marks done, in progress and pending, and counts", () => {
  const state = withSessions(summary("a"));
  assert.equal(store.planView(state, "a"), null);
  store.planArrived(state, "a", [
    { content: "read the code", status: "completed", priority: "medium" },
    { content: "write the fix", status: "in_progress", priority: "high" },
    { content: "<b>test</b>", status: "pending", priority: "low" },
    { content: "odd", status: "whatever" },
  ]);
  const view = store.planView(state, "a");
  assert.deepEqual(view.rows.map((r) => [r.mark, r.label]), [["✓", "done"], ["◐", "in progress"], ["○", "pending"], ["○", "pending"]]);
  assert.equal(view.rows[2].text, "<b>test</b>", "text as it is (drawn as textContent)");
  assert.equal(view.rows[1].high, true);
  assert.deepEqual([view.done, view.total, view.current], [1, 4, "write the fix"]);
  assert.equal(store.planArrived(state, "a", "nope"), false);
  store.planArrived(state, "a", []);
  assert.equal(store.planView(state, "a"), null, "an empty plan pins nothing");
});

test("a turn that ends unseen counts until the user looks at that session", () => {
  const state = withSessions(summary("a"), summary("b"));
  store.select(state, "a");
  assert.equal(store.turnEnded(state, "a"), false, "the selected session in a focused window is seen");
  assert.equal(store.turnEnded(state, "b"), true);
  assert.equal(store.waitingCount(state), 1);
  assert.equal(store.waitingFor(state, state.sessions.get("b")), "unseen");
  store.focusChanged(state, false);
  store.turnEnded(state, "a");
  assert.equal(store.waitingCount(state), 2, "the window not focused: the selected one is unseen too");
  store.focusChanged(state, true);
  assert.equal(store.waitingCount(state), 1, "focusing the window sees the selected one");
  store.select(state, "b");
  assert.equal(store.waitingCount(state), 0);
});

test("a session awaiting approval waits for the user; an archived one is not counted", () => {
  const state = withSessions(summary("a", { awaitingPermission: { toolCallId: "c", title: "ls", since: "" } }), summary("b", { archived: true, awaitingPermission: { toolCallId: "d", title: "x", since: "" } }));
  assert.equal(store.waitingFor(state, state.sessions.get("a")), "approval");
  assert.equal(store.waitingCount(state), 1);
});

test("an answer overtaken by a push does not undo it", () => {
  const state = withSessions(summary("a"));
  const asked = store.queueAsked(state, "a");
  store.queueArrived(state, "a", { queue: [], paused: false }); // the push: the item ran
  assert.equal(store.queueArrived(state, "a", { queue: [item("q1", "late")], paused: false }, asked), false);
  assert.deepEqual(store.queueOf(state, "a").items, []);
  const again = store.queueAsked(state, "a");
  assert.equal(store.queueArrived(state, "a", { queue: [item("q2", "now")], paused: true }, again), true, "no push since: the answer is the latest word");
  assert.equal(store.queueOf(state, "a").paused, true);
});

test("the unseen sessions come back to a rebuilt page", () => {
  const state = store.createState();
  store.restore(state, { drafts: {}, scroll: {}, selected: null, unseen: ["a"] }, {});
  store.listArrived(state, [summary("a"), summary("b")], store.listAsked(state), NOW);
  assert.equal(store.waitingCount(state), 1);
  assert.equal(store.waitingFor(state, state.sessions.get("a")), "unseen");
});
