#!/usr/bin/env node
// A deliberately small, hand-written ACP agent for testing client.mjs itself.
//
// It speaks raw newline-delimited JSON-RPC (no SDK), so it can send what a real
// agent must never send. `client.mjs --only permission` and `--only selftest`
// run against it (tests/test_acp_ts_sdk.py): the first checks the client's
// `session/request_permission` answers, the second that every kind of protocol
// violation is caught and reported.
//
//   prompt "/permission"  -> asks for permission, then reports the answer it got
//                            in the prompt response's `_meta.permissionResponse`
//   prompt "/violations"  -> sends a series of invalid messages, then end_turn
//   any other prompt      -> one agent_message_chunk "Echo: <text>", end_turn

import { createInterface } from "node:readline";

let nextId = 1000;
const pending = new Map(); // our request id -> resolve
const sessions = new Set();

function send(message) {
  process.stdout.write(JSON.stringify(message) + "\n");
}
function sendRaw(line) {
  process.stdout.write(line + "\n");
}
function respond(id, result) {
  send({ jsonrpc: "2.0", id, result });
}
function respondError(id, code, message, data) {
  send({ jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } });
}
function notify(method, params) {
  send({ jsonrpc: "2.0", method, params });
}
function request(method, params) {
  const id = nextId++;
  send({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve) => pending.set(id, resolve));
}
function update(sessionId, update) {
  notify("session/update", { sessionId, update });
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function promptText(params) {
  return (params?.prompt ?? [])
    .filter((block) => block?.type === "text")
    .map((block) => block.text)
    .join("\n");
}

async function permission(id, sessionId) {
  const answer = await request("session/request_permission", {
    sessionId,
    toolCall: {
      toolCallId: "call_perm_1",
      title: "rm -rf build",
      kind: "execute",
      status: "pending",
      rawInput: { command: "rm -rf build" },
    },
    options: [
      { optionId: "opt-allow-always", name: "Always allow", kind: "allow_always" },
      { optionId: "opt-allow", name: "Allow", kind: "allow_once" },
      { optionId: "opt-reject", name: "Reject", kind: "reject_once" },
      { optionId: "opt-reject-always", name: "Always reject", kind: "reject_always" },
    ],
  });
  update(sessionId, {
    sessionUpdate: "agent_message_chunk",
    content: { type: "text", text: `permission: ${JSON.stringify(answer)}` },
  });
  respond(id, { stopReason: "end_turn", _meta: { permissionResponse: answer } });
}

async function violations(id, sessionId) {
  // 1. A content block without its `type` tag: the SDK's zod check rejects it.
  update(sessionId, { sessionUpdate: "agent_message_chunk", content: { text: "no type tag" } });
  // 2. An invalid tool status: the SDK silently salvages it (defaultOnError).
  update(sessionId, { sessionUpdate: "tool_call_update", toolCallId: "call_1", status: "bogus" });
  // 3. A field outside `_meta` at the root of a spec type: silently stripped.
  update(sessionId, {
    sessionUpdate: "agent_message_chunk",
    content: { type: "text", text: "ok text" },
    extraRootField: 1,
  });
  // 4. An unknown session update variant.
  update(sessionId, { sessionUpdate: "no_such_update", payload: 1 });
  // 5. A notification that is neither ACP nor an extension.
  notify("session/bogus", { sessionId });
  // 6. An extension notification nobody registered.
  notify("_fake/unregistered", { sessionId });
  // 7. A line that is not JSON (the SDK answers it with -32700).
  sendRaw("this is not json");
  // 8. A response to a request that was never sent.
  respond(987654, {});
  // 9. A client method the client does not implement (the SDK answers -32601).
  const readAnswer = request("fs/read_text_file", { sessionId, path: "/etc/hostname" });
  await Promise.race([readAnswer, sleep(2000)]);
  await sleep(50);
  // 10. A response with a field outside `_meta`.
  respond(id, { stopReason: "end_turn", extraResultField: true });
}

async function handleRequest(message) {
  const { id, method, params } = message;
  switch (method) {
    case "initialize":
      return respond(id, {
        protocolVersion: 1,
        agentCapabilities: { loadSession: false },
        authMethods: [],
        agentInfo: { name: "fake-agent", version: "0.0.0" },
      });
    case "session/new": {
      const sessionId = `fake_${sessions.size + 1}`;
      sessions.add(sessionId);
      return respond(id, { sessionId });
    }
    case "session/prompt": {
      const sessionId = params?.sessionId;
      if (!sessions.has(sessionId)) {
        return respondError(id, -32002, "Resource not found", { sessionId });
      }
      const text = promptText(params);
      if (text === "/permission") return permission(id, sessionId);
      if (text === "/violations") return violations(id, sessionId);
      update(sessionId, { sessionUpdate: "agent_message_chunk", content: { type: "text", text: `Echo: ${text}` } });
      return respond(id, { stopReason: "end_turn" });
    }
    default:
      return respondError(id, -32601, "Method not found", { method });
  }
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  let message;
  try {
    message = JSON.parse(line);
  } catch {
    return;
  }
  if (typeof message.method === "string" && "id" in message) {
    void handleRequest(message);
  } else if (!("method" in message) && pending.has(message.id)) {
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve("result" in message ? message.result : { error: message.error });
  }
  // Notifications (session/cancel) and stray responses are ignored.
});
lines.on("close", () => process.exit(0));
