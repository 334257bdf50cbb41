// The page's bridge (desktop/ui/bridge.js) over a stand-in for pywebview's js_api: the
// only code that calls Python and receives pushes. Run: node --test tests/ui/
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const UI = path.join(__dirname, "..", "..", "desktop", "ui");
const store = require(path.join(UI, "store.js"));

// bridge.js is a classic script for the page: it registers its factory on window.AcpUi.
global.window = { addEventListener() {} };
require(path.join(UI, "bridge.js"));
const makeBridge = global.window.AcpUi.bridge;

function setUp(api) {
  global.window.pywebview = { api };
  const seen = [];
  const state = store.createState();
  const ui = {
    state,
    store,
    onState: (p) => seen.push(["state", p.sessionId]),
    onUpdate: (p) => seen.push(["update", p.sessionId]),
    onHost: (event) => seen.push(["host", event]),
    onAutoResumed: () => seen.push(["auto_resumed"]),
    onPromptFailed: (d) => seen.push(["prompt_failed", d.sessionId]),
    turns: { onTurnChanges: (p) => seen.push(["turn_changes", p.turn]) },
    showError: (e) => seen.push(["error", e.title, e.message]),
  };
  return { bridge: makeBridge(ui), seen, state };
}

const pushed = (method, params) => ({ type: "notification", method, params });

test("pushes that arrive while the page boots are handled after it, in order", () => {
  let booted = 0;
  const { bridge, seen } = setUp({ page_ready: () => ({}) });
  bridge.start(() => booted++);
  assert.equal(booted, 1, "the bridge was there: boot at once");
  window.app.onPush([pushed("_session/state", { sessionId: "a" }), pushed("session/update", { sessionId: "a" })]);
  window.app.onPush([{ type: "host", event: "sidecar_exited", data: {} }]);
  assert.deepEqual(seen, []);
  bridge.booted();
  assert.deepEqual(seen, [["state", "a"], ["update", "a"], ["host", "sidecar_exited"]]);
  window.app.onPush([
    pushed("_session/turn_changes", { sessionId: "a", turn: 2 }),
    { type: "bridge", event: "prompt_failed", data: { sessionId: "b", error: {} } },
    { type: "bridge", event: "auto_resumed", data: {} },
  ]);
  assert.deepEqual(seen.slice(3), [["turn_changes", 2], ["prompt_failed", "b"], ["auto_resumed"]]);
});

test("a page loaded before the bridge boots when pywebview says it is ready", () => {
  const listeners = {};
  global.window.addEventListener = (name, fn) => (listeners[name] = fn);
  const { bridge } = setUp(undefined);
  let booted = 0;
  bridge.start(() => booted++);
  assert.equal(booted, 0);
  listeners.pywebviewready();
  assert.equal(booted, 1);
});

test("call shows a failure and answers null; quietCall only answers null; ask hands the error back", async () => {
  const { bridge, seen } = setUp({
    ok: async (x) => ({ got: x }),
    refused: async () => ({ error: { title: "Busy", message: "a turn is running" } }),
    broken: async () => {
      throw new Error("no such method");
    },
  });
  assert.deepEqual(await bridge.call("ok", 1), { got: 1 });
  assert.equal(await bridge.call("refused"), null);
  assert.equal(await bridge.call("broken"), null);
  assert.deepEqual(seen, [["error", "Busy", "a turn is running"], ["error", "Bridge error", "no such method"]]);
  assert.equal(await bridge.quietCall("refused"), null);
  assert.equal(await bridge.quietCall("broken"), null);
  assert.deepEqual(await bridge.ask("refused"), { error: { title: "Busy", message: "a turn is running" } });
  assert.deepEqual(await bridge.ask("broken"), { error: { title: "Bridge error", message: "no such method" } });
  assert.equal(seen.length, 2, "quiet calls and asks show nothing themselves");
});
