#!/usr/bin/env node
// Drives an ACP agent (the sidecar) with the official TypeScript SDK,
// @agentclientprotocol/sdk 2.x, and reports every protocol problem it sees.
//
//   node client.mjs [--only GROUP,...] [--list] -- COMMAND [ARGS...]
//   ACP_TS_AGENT_CMD='["python","-m","sidecar","--store","memory"]' node client.mjs
//
// Output: one JSON line per step, {"step", "ok", "detail", "group"},
// then one {"summary": true, ...} line. Exit status 0 only if every step passed,
// nothing failed validation and the agent exited 0 on stdin EOF; 1 otherwise;
// 2 on a usage error; 3 if the run watchdog fired.
//
// Environment: ACP_TS_PERMISSION = allow | reject | cancel (how
// session/request_permission is answered; default allow), ACP_TS_TIMEOUT
// (seconds for the whole run, default 120), ACP_TS_STEP_TIMEOUT (seconds per
// step, default 20), ACP_TS_CWD (session cwd; default a fresh temp dir).
//
// How the SDK (2.4) treats what it receives, and how this script catches it:
// - An incoming notification whose params fail the SDK's zod schema (e.g. a
//   malformed `session/update`) is neither thrown nor answered: the handler is
//   not called and the SDK only logs `console.error("Error handling
//   notification", {method, code, message})`. console.error/warn are captured.
// - An incoming request with invalid params, or one nobody handles, is answered
//   to the agent with -32602 / -32601; a line that is not JSON is answered with
//   -32700 (id null). The bytes we write to the agent are tapped, so every
//   error response that leaves this client is reported.
// - Responses are NOT validated by the SDK at all (it only maps void results
//   to {}), and its schemas silently repair many invalid values
//   (`defaultOnError`, `vecSkipError`) and strip unknown fields. So every line
//   the agent writes is also checked here against the SDK's own generated zod
//   schemas, and the parsed value must equal what was sent.
// - Unknown notifications are silently ignored by the SDK unless a fallback
//   ("*") handler is registered; this script registers one and reports them.
// - `request("session/close" | "session/delete")` turns a -32002 error into
//   success; the wire log below still shows what the agent really answered.

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable, Writable } from "node:stream";
import { isDeepStrictEqual } from "node:util";

import * as acp from "@agentclientprotocol/sdk/unstable";

// The SDK's generated zod validators are not a public export; load the very
// modules its own dispatch uses (v1 stable and v1 unstable), by file.
const sdkEntry = import.meta.resolve("@agentclientprotocol/sdk");
const zStable = await import(new URL("../schema/zod.gen.js", sdkEntry).href);
const zUnstable = await import(new URL("../unstable/schema/zod.gen.js", sdkEntry).href);

const { methods, RequestError } = acp;

// ---------------------------------------------------------------- arguments

function usage(message) {
  process.stderr.write(`client.mjs: ${message}\n`);
  process.stderr.write("usage: node client.mjs [--only GROUP,...] [--list] -- COMMAND [ARGS...]\n");
  process.exit(2);
}

const argv = process.argv.slice(2);
let only = null;
let listOnly = false;
let agentCmd = null;
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i];
  if (arg === "--") {
    agentCmd = argv.slice(i + 1);
    break;
  } else if (arg === "--only") {
    only = (argv[++i] ?? "").split(",").filter(Boolean);
  } else if (arg.startsWith("--only=")) {
    only = arg.slice("--only=".length).split(",").filter(Boolean);
  } else if (arg === "--list") {
    listOnly = true;
  } else {
    usage(`unknown argument ${JSON.stringify(arg)}`);
  }
}
if (!agentCmd && process.env.ACP_TS_AGENT_CMD) {
  try {
    agentCmd = JSON.parse(process.env.ACP_TS_AGENT_CMD);
  } catch {
    usage("ACP_TS_AGENT_CMD must be a JSON array of strings");
  }
}

const PERMISSION_MODE = process.env.ACP_TS_PERMISSION || "allow";
if (!["allow", "reject", "cancel"].includes(PERMISSION_MODE)) {
  usage(`ACP_TS_PERMISSION must be allow, reject or cancel, not ${JSON.stringify(PERMISSION_MODE)}`);
}
const RUN_TIMEOUT_MS = Number(process.env.ACP_TS_TIMEOUT || 120) * 1000;
const STEP_TIMEOUT_MS = Number(process.env.ACP_TS_STEP_TIMEOUT || 20) * 1000;

// ---------------------------------------------------------------- reporting

const problems = {
  sdkReports: [], // console.error / console.warn calls (the SDK's only report channel)
  schemaViolations: [], // agent messages that fail, or do not survive, the SDK's schemas
  outgoingErrors: [], // error responses this client sent to the agent
  unknownNotifications: [], // non-extension notifications no handler knows
  unknownRequests: [], // agent requests no handler knows
  wireErrors: [], // non-JSON lines, bad envelopes, responses to unknown ids
  droppedBySdk: [], // valid-looking session/update the SDK did not deliver
  permissionProblems: [],
  harness: [], // unhandled rejections etc.
};
const info = {
  extensionNotifications: {}, // method -> count (handled by an explicit extension handler)
  unregisteredExtensionNotifications: {}, // `_` methods that reached the fallback
  stableOnlyDiffs: [], // fields only the unstable schema knows (advisory)
  permissionRequests: [],
  nodeWarnings: [],
};

const realConsoleError = console.error.bind(console);
for (const level of ["error", "warn"]) {
  console[level] = (...args) => {
    if (typeof args[0] === "string" && /^\(node:\d+\) /.test(args[0])) {
      info.nodeWarnings.push(args[0].split("\n")[0]); // Node's own process warnings: not the SDK's
    } else {
      problems.sdkReports.push({ level, args: args.map(plain) });
    }
    realConsoleError(`[captured console.${level}]`, ...args);
  };
}
process.on("unhandledRejection", (reason) => {
  problems.harness.push({ unhandledRejection: describeError(reason) });
});

function plain(value) {
  try {
    return JSON.parse(JSON.stringify(value ?? null));
  } catch {
    return String(value);
  }
}

function describeError(error) {
  if (error instanceof RequestError) {
    return { code: error.code, message: error.message, data: plain(error.data) };
  }
  if (error instanceof Fail) return error.detail;
  if (error instanceof Error) return { exception: `${error.name}: ${error.message}` };
  return { exception: plain(error) };
}

class Fail extends Error {
  constructor(detail) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail));
    this.detail = typeof detail === "string" ? { reason: detail } : detail;
  }
}

function check(condition, detail) {
  if (!condition) throw new Fail(detail);
}

const results = [];
function emit(line) {
  results.push(line);
  process.stdout.write(JSON.stringify(line) + "\n");
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Fail({ timeout: `${what} took longer than ${ms} ms` })), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

// ---------------------------------------------------------------- wire log and validation

const wire = []; // {seq, t, dir: "in"|"out", msg} in the order bytes crossed the pipe
const outgoingRequests = new Map(); // id -> {method, params}
let seq = 0;

function lineSplitter(onLine) {
  let buffered = Buffer.alloc(0);
  return (chunk) => {
    buffered = Buffer.concat([buffered, Buffer.from(chunk)]);
    let index;
    while ((index = buffered.indexOf(0x0a)) >= 0) {
      const line = buffered.subarray(0, index).toString("utf8");
      buffered = buffered.subarray(index + 1);
      if (line.trim()) onLine(line);
    }
  };
}

function onOutgoingLine(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    problems.harness.push({ unparsableOutgoing: line.slice(0, 200) });
    return;
  }
  wire.push({ seq: seq++, t: Date.now(), dir: "out", msg });
  if (typeof msg.method === "string" && "id" in msg) {
    outgoingRequests.set(msg.id, { method: msg.method, params: msg.params });
    checkOwnRequest(msg);
  } else if (!("method" in msg) && msg.error) {
    problems.outgoingErrors.push({ id: msg.id ?? null, error: msg.error });
  }
}

// What each answered method's result must parse as: [stable schema or null, unstable schema].
const RESPONSE_SCHEMAS = {
  initialize: "zInitializeResponse",
  "session/new": "zNewSessionResponse",
  "session/load": "zLoadSessionResponse",
  "session/list": "zListSessionsResponse",
  "session/delete": "zDeleteSessionResponse",
  "session/resume": "zResumeSessionResponse",
  "session/close": "zCloseSessionResponse",
  "session/set_mode": "zSetSessionModeResponse",
  "session/set_config_option": "zSetSessionConfigOptionResponse",
  "session/prompt": "zPromptResponse",
  "session/fork": "zForkSessionResponse",
};
// What we send must be valid too, or an agent's refusal would prove nothing.
const OWN_REQUEST_SCHEMAS = {
  initialize: "zInitializeRequest",
  "session/new": "zNewSessionRequest",
  "session/load": "zLoadSessionRequest",
  "session/list": "zListSessionsRequest",
  "session/delete": "zDeleteSessionRequest",
  "session/resume": "zResumeSessionRequest",
  "session/close": "zCloseSessionRequest",
  "session/set_mode": "zSetSessionModeRequest",
  "session/set_config_option": "zSetSessionConfigOptionRequest",
  "session/prompt": "zPromptRequest",
  "session/fork": "zForkSessionRequest",
};
function checkOwnRequest(msg) {
  const schemaName = OWN_REQUEST_SCHEMAS[msg.method];
  if (!schemaName) return;
  const result = zUnstable[schemaName].safeParse(msg.params);
  if (!result.success) {
    problems.harness.push({ problem: "this client sent an invalid request", method: msg.method, issues: result.error.issues.slice(0, 5) });
  }
}
const NOTIFICATION_SCHEMAS = { "session/update": "zSessionNotification" };
const REQUEST_SCHEMAS = { "session/request_permission": "zRequestPermissionRequest" };

// Where the parsed value differs from what was sent: dropped keys (unknown
// fields stripped, or invalid values repaired to "absent"), changed values,
// and array items skipped as invalid.
function diff(sent, parsed, where = "", out = []) {
  if (Array.isArray(sent)) {
    if (!Array.isArray(parsed)) {
      out.push({ path: where, kind: "changed", sent: plain(sent), parsed: plain(parsed) });
    } else if (sent.length !== parsed.length) {
      out.push({ path: where, kind: "items dropped", sent: sent.length, parsed: parsed.length });
    } else {
      sent.forEach((item, i) => diff(item, parsed[i], `${where}[${i}]`, out));
    }
  } else if (sent !== null && typeof sent === "object") {
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
      out.push({ path: where, kind: "changed", sent: plain(sent), parsed: plain(parsed) });
      return out;
    }
    for (const [key, value] of Object.entries(sent)) {
      const sub = where ? `${where}.${key}` : key;
      if (!Object.hasOwn(parsed, key) || (parsed[key] === undefined && value !== undefined)) {
        out.push({ path: sub, kind: "dropped", sent: plain(value) });
      } else {
        diff(value, parsed[key], sub, out);
      }
    }
  } else if (!Object.is(sent, parsed)) {
    out.push({ path: where, kind: "changed", sent, parsed: plain(parsed) });
  }
  return out;
}

function validate(kind, method, schemaName, value, context) {
  const schema = zUnstable[schemaName];
  const result = schema.safeParse(value);
  if (!result.success) {
    problems.schemaViolations.push({
      kind,
      method,
      ...context,
      verdict: "rejected",
      problem: "rejected by the SDK schema",
      issues: result.error.issues.slice(0, 10).map((issue) => ({
        path: issue.path.join("."),
        code: issue.code,
        message: issue.message,
      })),
      value: plain(value),
    });
    return;
  }
  const differences = diff(value, result.data);
  if (differences.length) {
    problems.schemaViolations.push({
      kind,
      method,
      ...context,
      verdict: "altered",
      problem: "not preserved by the SDK schema (stripped or repaired)",
      differences,
    });
    return;
  }
  const stable = zStable[schemaName];
  if (stable) {
    const stableResult = stable.safeParse(value);
    const stableDiffs = stableResult.success ? diff(value, stableResult.data) : [{ rejected: true }];
    if (stableDiffs.length) info.stableOnlyDiffs.push({ kind, method, ...context, differences: stableDiffs });
  }
}

const STATE_SHAPE = (params) =>
  params &&
  typeof params.sessionId === "string" &&
  typeof params.status === "string" &&
  Number.isInteger(params.generation) &&
  (params.lastError === null || typeof params.lastError === "string");

function onIncomingLine(line) {
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    problems.wireErrors.push({ problem: "line is not JSON", line: line.slice(0, 200) });
    return;
  }
  const entry = { seq: seq++, t: Date.now(), dir: "in", msg };
  wire.push(entry);
  if (msg === null || typeof msg !== "object" || Array.isArray(msg) || msg.jsonrpc !== "2.0") {
    problems.wireErrors.push({ problem: "not a JSON-RPC 2.0 object", msg: plain(msg) });
    return;
  }
  if (typeof msg.method === "string") {
    if ("id" in msg) {
      const schemaName = REQUEST_SCHEMAS[msg.method];
      if (schemaName) validate("request", msg.method, schemaName, msg.params, { id: msg.id });
    } else {
      const schemaName = NOTIFICATION_SCHEMAS[msg.method];
      if (schemaName) {
        validate("notification", msg.method, schemaName, msg.params, { seq: entry.seq });
        wireUpdates += 1;
      }
    }
    return;
  }
  // A response.
  const sent = outgoingRequests.get(msg.id);
  if (!sent) {
    problems.wireErrors.push({ problem: "response to a request we never sent", id: msg.id ?? null });
    return;
  }
  const hasResult = Object.hasOwn(msg, "result");
  const hasError = Object.hasOwn(msg, "error");
  if (hasResult === hasError) {
    problems.wireErrors.push({ problem: "response needs exactly one of result/error", method: sent.method, msg: plain(msg) });
    return;
  }
  const extra = Object.keys(msg).filter((key) => !["jsonrpc", "id", "result", "error"].includes(key));
  if (extra.length) problems.wireErrors.push({ problem: "unknown response fields", method: sent.method, fields: extra });
  if (hasError) {
    const error = msg.error;
    const ok =
      error &&
      typeof error === "object" &&
      Number.isInteger(error.code) &&
      typeof error.message === "string" &&
      Object.keys(error).every((key) => ["code", "message", "data"].includes(key));
    if (!ok) problems.wireErrors.push({ problem: "malformed error object", method: sent.method, error: plain(error) });
    return;
  }
  const schemaName = RESPONSE_SCHEMAS[sent.method];
  if (schemaName) validate("response", sent.method, schemaName, msg.result, { id: msg.id });
}

/** The request we sent last for `method` (matching `pred`) and the agent's answer, from the wire. */
function lastExchange(method, pred = () => true) {
  for (let i = wire.length - 1; i >= 0; i--) {
    const { dir, msg } = wire[i];
    if (dir === "out" && msg.method === method && "id" in msg && pred(msg.params ?? {})) {
      const answer = wire.find((e) => e.dir === "in" && !("method" in e.msg) && e.msg.id === msg.id);
      return { request: msg, response: answer?.msg ?? null };
    }
  }
  return { request: null, response: null };
}

// ---------------------------------------------------------------- what the SDK delivered

let wireUpdates = 0;
const delivered = []; // {t, n, params} for every session/update our handler received
const waiters = new Set();

function notifyWaiters() {
  for (const waiter of [...waiters]) {
    if (waiter.pred()) {
      waiters.delete(waiter);
      waiter.resolve(true);
    }
  }
}

function waitUntil(pred, ms) {
  if (pred()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const waiter = { pred, resolve };
    waiters.add(waiter);
    setTimeout(() => {
      if (waiters.delete(waiter)) resolve(false);
    }, ms);
  });
}

const updatesFor = (sessionId, from = 0) =>
  delivered.filter((u, i) => i >= from && u.params.sessionId === sessionId).map((u) => u.params.update);
const states = []; // _session/state params

function textOf(content) {
  return (content ?? [])
    .filter((c) => c?.type === "content" && c.content?.type === "text")
    .map((c) => c.content.text)
    .join("");
}

// ---------------------------------------------------------------- the client app

const app = acp
  .client({ name: "acp-ts-sdk-check" })
  .onNotification(methods.client.session.update, ({ params }) => {
    delivered.push({ t: Date.now(), params });
    notifyWaiters();
  })
  .onNotification(
    "_session/state",
    (params) => {
      if (!STATE_SHAPE(params)) throw new RequestError(-32602, "malformed _session/state", plain(params));
      return params;
    },
    ({ params, method }) => {
      info.extensionNotifications[method] = (info.extensionNotifications[method] ?? 0) + 1;
      states.push(params);
      notifyWaiters();
    },
  )
  .onNotification("*", ({ method, params }) => {
    if (method.startsWith("_")) {
      info.unregisteredExtensionNotifications[method] = (info.unregisteredExtensionNotifications[method] ?? 0) + 1;
    } else {
      problems.unknownNotifications.push({ method, params: plain(params) });
    }
  })
  .onRequest(methods.client.session.requestPermission, ({ params }) => {
    let outcome;
    if (PERMISSION_MODE === "cancel") {
      outcome = { outcome: "cancelled" };
    } else {
      const kind = PERMISSION_MODE === "allow" ? "allow_once" : "reject_once";
      const option = params.options.find((o) => o.kind === kind);
      if (option) {
        outcome = { outcome: "selected", optionId: option.optionId };
      } else {
        problems.permissionProblems.push({ problem: `no ${kind} option offered`, options: plain(params.options) });
        outcome = { outcome: "cancelled" };
      }
    }
    const response = { outcome };
    info.permissionRequests.push({ sessionId: params.sessionId, toolCallId: params.toolCall.toolCallId, mode: PERMISSION_MODE, response });
    return response;
  })
  .onRequest("*", ({ method }) => {
    problems.unknownRequests.push({ method });
    throw RequestError.methodNotFound(method);
  });

// ---------------------------------------------------------------- scenarios

const state = { cwd: null, init: null };
const sessionsByGroup = {};

function promptBlocks(text) {
  return [{ type: "text", text }];
}

/** Creates the group's session with the SDK's ActiveSession helper (update queue included). */
async function newActiveSession(ctx, group) {
  const session = await ctx.buildSession({ cwd: state.cwd, mcpServers: [] }).start();
  sessionsByGroup[group] = session;
  return session;
}

function need(group) {
  const session = sessionsByGroup[group];
  if (!session) throw new Fail({ skipped: true, reason: "no session: session_new failed" });
  return session;
}

async function initialize(ctx) {
  const response = await ctx.request(methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
    clientInfo: { name: "acp-ts-sdk-check", version: "0.0.0" },
  });
  state.init = response;
  check(response.protocolVersion === acp.PROTOCOL_VERSION, { protocolVersion: response.protocolVersion });
  return {
    protocolVersion: response.protocolVersion,
    agentInfo: response.agentInfo ?? null,
    loadSession: response.agentCapabilities?.loadSession ?? false,
    sessionCapabilities: Object.keys(response.agentCapabilities?.sessionCapabilities ?? {}),
  };
}

function sessionNewStep(group) {
  return async (ctx) => {
    const session = await newActiveSession(ctx, group);
    check(typeof session.sessionId === "string" && session.sessionId, { sessionId: session.sessionId });
    return {
      sessionId: session.sessionId,
      currentModeId: session.modes?.currentModeId ?? null,
      configOptions: (session.newSessionResponse.configOptions ?? []).map((o) => o.id),
    };
  };
}

async function promptHello(group) {
  const session = need(group);
  const pending = session.prompt("hello");
  let text = "";
  let chunks = 0;
  const kinds = [];
  for (;;) {
    const message = await session.nextUpdate();
    if (message.kind === "stop") break;
    kinds.push(message.update.sessionUpdate);
    if (message.update.sessionUpdate === "agent_message_chunk" && message.update.content.type === "text") {
      chunks += 1;
      text += message.update.content.text;
    }
  }
  const response = await pending;
  const detail = { stopReason: response.stopReason, chunks, text, updateKinds: [...new Set(kinds)] };
  check(response.stopReason === "end_turn", detail);
  check(chunks >= 1, { ...detail, reason: "no agent_message_chunk arrived before the prompt response" });
  check(text.includes("hello"), { ...detail, reason: "streamed text does not contain the prompt" });
  return detail;
}

const TOOL_COMMAND = "$ echo live-output-check; sleep 0.3; echo done";

async function runToolPrompt(ctx, group) {
  const session = need(group);
  const from = delivered.length;
  const started = Date.now();
  const response = await ctx.request(methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: promptBlocks(TOOL_COMMAND),
  });
  await sleep(20); // let the SDK finish dispatching notifications read before the response
  const updates = delivered.slice(from).filter((u) => u.params.sessionId === session.sessionId);
  return { response, updates, started };
}

/** The session/request_permission this client answered for `toolCallId`. */
function permissionsFor(toolCallId) {
  return info.permissionRequests.filter((p) => p.toolCallId === toolCallId);
}

/** The tool scenarios run with approval `ask` (the default): the sidecar must ask this
 *  client before it runs the command, and the command runs once it is allowed. */
function checkAskedAndAllowed(call, detail) {
  const asked = permissionsFor(call.toolCallId);
  detail.permission = asked.map((p) => p.response.outcome);
  check(PERMISSION_MODE === "allow", { ...detail, reason: "the tool scenarios need ACP_TS_PERMISSION=allow" });
  check(asked.length === 1, { ...detail, reason: `expected one session/request_permission for the call, got ${asked.length}` });
  check(asked[0].response.outcome.optionId === "allow_once", { ...detail, reason: "not answered allow_once" });
}

function toolSummary(run) {
  const { response, updates } = run;
  const calls = updates.filter((u) => u.params.update.sessionUpdate === "tool_call");
  const call = calls[0]?.params.update;
  const progress = updates.filter(
    (u) => u.params.update.sessionUpdate === "tool_call_update" && (!call || u.params.update.toolCallId === call.toolCallId),
  );
  const finalIndex = progress.findIndex((u) => ["completed", "failed"].includes(u.params.update.status));
  return { response, call, progress, finalIndex };
}

function toolCallStep(group) {
  return async (ctx) => {
    const run = await runToolPrompt(ctx, group);
    const { response, call, progress, finalIndex } = toolSummary(run);
    const final = finalIndex >= 0 ? progress[finalIndex].params.update : null;
    const detail = {
      stopReason: response.stopReason,
      toolCall: call ? { toolCallId: call.toolCallId, title: call.title, kind: call.kind ?? null, status: call.status ?? null } : null,
      toolCallUpdates: progress.length,
      finalStatus: final?.status ?? null,
      finalContent: final ? textOf(final.content) : null,
      rawOutput: final?.rawOutput ?? null,
    };
    check(call, { ...detail, reason: "no tool_call update" });
    checkAskedAndAllowed(call, detail);
    check(progress.length >= 1, { ...detail, reason: "no tool_call_update for the call" });
    check(final?.status === "completed", { ...detail, reason: "no tool_call_update with status completed" });
    check(detail.finalContent.includes("live-output-check") && detail.finalContent.includes("done"), {
      ...detail,
      reason: "the final update's content lacks the command output",
    });
    check(
      detail.rawOutput && detail.rawOutput.exitCode === 0 && detail.rawOutput.cancelled === false,
      { ...detail, reason: "the final update lacks rawOutput {exitCode: 0, cancelled: false}" },
    );
    check(response.stopReason === "end_turn", detail);
    return detail;
  };
}

function toolLiveStep(group) {
  return async (ctx) => {
    const run = await runToolPrompt(ctx, group);
    const { call, progress, finalIndex } = toolSummary(run);
    check(call && finalIndex >= 0, { skipped: true, reason: "no tool call with a final update" });
    const before = progress.slice(0, finalIndex);
    const live = before.filter((u) => textOf(u.params.update.content).includes("live-output-check"));
    const metaLive = before.filter((u) => JSON.stringify(u.params.update._meta ?? {}).includes("live-output-check"));
    const detail = {
      updatesBeforeFinal: before.length,
      withLiveOutputInContent: live.length,
      withLiveOutputInMeta: metaLive.length,
      firstLiveAfterMs: live.length ? live[0].t - run.started : null,
      finalAfterMs: progress[finalIndex].t - run.started,
      sample: before.slice(0, 3).map((u) => ({
        status: u.params.update.status ?? null,
        content: u.params.update.content ?? null,
        _meta: u.params.update._meta ?? null,
      })),
    };
    checkAskedAndAllowed(call, detail);
    check(live.length >= 1, {
      ...detail,
      reason:
        "no tool_call_update before the final one carries the running command's output in its standard " +
        "`content` field ([{type:'content', content:{type:'text', text}}])",
    });
    // The first live view comes while the command still runs (before "done" is printed,
    // 0.3 s later), and each later one is the accumulated output so far.
    const texts = before.map((u) => textOf(u.params.update.content)).filter(Boolean);
    detail.liveTexts = texts;
    check(texts.some((t) => t.includes("live-output-check") && !t.includes("done")), {
      ...detail,
      reason: "no live update showed the output before the command ended",
    });
    check(texts.every((t, i) => i === 0 || t.startsWith(texts[i - 1])), { ...detail, reason: "the live content does not accumulate" });
    check(texts.at(-1) === "live-output-check\ndone\n", { ...detail, reason: "the last live update is not the whole output" });
    check(metaLive.length === 0, { ...detail, reason: "`_meta.output` went to a client that did not ask for our extensions" });
    return detail;
  };
}

function cancelStep(group) {
  return async (ctx) => {
    const session = need(group);
    const started = Date.now();
    const pending = ctx.request(methods.agent.session.prompt, {
      sessionId: session.sessionId,
      prompt: promptBlocks("/sleep 5"),
    });
    pending.catch(() => {});
    const running = await waitUntil(
      () => states.some((s) => s.sessionId === session.sessionId && s.status === "running"),
      3000,
    );
    if (!running) await sleep(300); // an agent without _session/state: give the turn time to start
    await ctx.notify(methods.agent.session.cancel, { sessionId: session.sessionId });
    const cancelledAt = Date.now();
    const response = await pending;
    const detail = {
      stopReason: response.stopReason,
      sawRunningState: running,
      cancelAfterMs: cancelledAt - started,
      answeredAfterCancelMs: Date.now() - cancelledAt,
    };
    check(response.stopReason === "cancelled", detail);
    check(detail.answeredAfterCancelMs < 3000, { ...detail, reason: "cancel took too long" });
    return detail;
  };
}

function setModeStep(group) {
  return async (ctx) => {
    const session = need(group);
    const from = delivered.length;
    const response = await ctx.request(methods.agent.session.setMode, { sessionId: session.sessionId, modeId: "plan" });
    const sawUpdate = await waitUntil(
      () => updatesFor(session.sessionId, from).some((u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "plan"),
      2000,
    );
    const detail = { response, currentModeUpdate: sawUpdate };
    check(sawUpdate, { ...detail, reason: "no current_mode_update with currentModeId plan" });
    return detail;
  };
}

function setConfigOptionStep(group) {
  return async (ctx) => {
    const session = need(group);
    const advertised = (session.newSessionResponse.configOptions ?? []).map((o) => o.id);
    let response;
    try {
      response = await ctx.request(methods.agent.session.setConfigOption, {
        sessionId: session.sessionId,
        configId: "mode",
        value: "plan",
      });
    } catch (error) {
      throw new Fail({ request: "session/set_config_option {configId: mode, value: plan}", error: describeError(error), advertisedConfigOptions: advertised });
    }
    const mode = (response.configOptions ?? []).find((o) => o.id === "mode");
    const detail = { configOptions: response.configOptions, advertisedConfigOptions: advertised };
    check(mode && mode.currentValue === "plan", { ...detail, reason: "response's configOptions has no mode option with currentValue plan" });
    check(advertised.includes("mode"), { ...detail, reason: "session/new did not advertise a mode config option" });
    const notified = await waitUntil(
      () =>
        updatesFor(session.sessionId).some((u) => u.sessionUpdate === "current_mode_update" && u.currentModeId === "plan") &&
        updatesFor(session.sessionId).some(
          (u) => u.sessionUpdate === "config_option_update" && u.configOptions.find((o) => o.id === "mode")?.currentValue === "plan",
        ),
      2000,
    );
    check(notified, { ...detail, reason: "no current_mode_update and config_option_update for plan" });
    return detail;
  };
}

function setConfigOptionApprovalStep(group) {
  return async (ctx) => {
    const session = need(group);
    const from = delivered.length;
    const response = await ctx.request(methods.agent.session.setConfigOption, {
      sessionId: session.sessionId,
      configId: "approval",
      value: "auto",
    });
    const approval = (response.configOptions ?? []).find((o) => o.id === "approval");
    const detail = { approval: approval ?? null };
    check(approval?.currentValue === "auto", { ...detail, reason: "response's approval option is not auto" });
    const notified = await waitUntil(
      () =>
        updatesFor(session.sessionId, from).some(
          (u) => u.sessionUpdate === "config_option_update" && u.configOptions.find((o) => o.id === "approval")?.currentValue === "auto",
        ),
      2000,
    );
    check(notified, { ...detail, reason: "no config_option_update with approval auto" });
    // Approval auto: the command runs without asking this client.
    const run = await runToolPrompt(ctx, group);
    const { call, finalIndex, progress } = toolSummary(run);
    check(call && finalIndex >= 0, { ...detail, reason: "no tool call with a final update" });
    detail.asked = permissionsFor(call.toolCallId).length;
    detail.finalStatus = progress[finalIndex].params.update.status;
    check(detail.asked === 0, { ...detail, reason: "asked for permission with approval auto" });
    check(detail.finalStatus === "completed", { ...detail, reason: "the command did not complete" });
    return detail;
  };
}

async function listContains(ctx, sessionId) {
  const seen = [];
  let cursor;
  for (let page = 0; page < 50; page++) {
    const response = await ctx.request(methods.agent.session.list, cursor ? { cwd: state.cwd, cursor } : { cwd: state.cwd });
    seen.push(...response.sessions.map((s) => s.sessionId));
    if (!response.nextCursor) break;
    cursor = response.nextCursor;
  }
  return { found: seen.includes(sessionId), listed: seen.length };
}

function listStep(group) {
  return async (ctx) => {
    const session = need(group);
    const result = await listContains(ctx, session.sessionId);
    check(result.found, { ...result, reason: "session/list does not contain the session" });
    return result;
  };
}

async function close(ctx, sessionId) {
  const response = await ctx.request(methods.agent.session.close, { sessionId });
  const { response: raw } = lastExchange("session/close", (p) => p.sessionId === sessionId);
  return { sdkResult: Object.keys(response), wire: raw?.error ? { error: raw.error } : "result" };
}

function closeStep(group, label) {
  return async (ctx) => {
    const session = need(group);
    const detail = await close(ctx, session.sessionId);
    if (detail.wire !== "result") detail.note = `${label}: the SDK turned a -32002 error into success`;
    return detail;
  };
}

function loadStep(group) {
  return async (ctx) => {
    const session = need(group);
    const from = delivered.length;
    const response = await ctx.request(methods.agent.session.load, {
      sessionId: session.sessionId,
      cwd: state.cwd,
      mcpServers: [],
    });
    await sleep(20);
    const replay = updatesFor(session.sessionId, from);
    const user = replay.filter((u) => u.sessionUpdate === "user_message_chunk").map((u) => u.content?.text);
    const agentText = replay.filter((u) => u.sessionUpdate === "agent_message_chunk").map((u) => u.content?.text).join("");
    const detail = { replayed: replay.length, kinds: [...new Set(replay.map((u) => u.sessionUpdate))], user, agentText, currentModeId: response.modes?.currentModeId ?? null };
    check(user.includes("hello"), { ...detail, reason: "the replay lacks the user's 'hello'" });
    check(agentText.includes("hello"), { ...detail, reason: "the replay lacks the agent's answer" });
    return detail;
  };
}

function resumeStep(group) {
  return async (ctx) => {
    const session = need(group);
    const response = await ctx.request(methods.agent.session.resume, { sessionId: session.sessionId, cwd: state.cwd, mcpServers: [] });
    const detail = { currentModeId: response.modes?.currentModeId ?? null, generation: response._meta?.generation ?? null };
    const hello = await ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: promptBlocks("after resume") });
    detail.promptAfterResume = hello.stopReason;
    check(hello.stopReason === "end_turn", { ...detail, reason: "the resumed session does not answer a prompt" });
    return detail;
  };
}

function forkStep(group) {
  return async (ctx) => {
    const session = need(group);
    const response = await ctx.request(methods.agent.session.fork, { sessionId: session.sessionId, cwd: state.cwd, mcpServers: [] });
    sessionsByGroup[`${group}:fork`] = { sessionId: response.sessionId };
    const listed = await listContains(ctx, response.sessionId);
    const detail = { forkSessionId: response.sessionId, forkedFrom: response._meta?.forkedFrom ?? null, listed: listed.found };
    check(typeof response.sessionId === "string" && response.sessionId !== session.sessionId, { ...detail, reason: "fork did not return a new session id" });
    check(listed.found, { ...detail, reason: "session/list does not contain the fork" });
    return detail;
  };
}

function deleteStep(group) {
  return async (ctx) => {
    const session = need(group);
    const fork = sessionsByGroup[`${group}:fork`];
    const ids = [session.sessionId, ...(fork ? [fork.sessionId] : [])];
    const detail = {};
    for (const id of ids) {
      await close(ctx, id);
      await ctx.request(methods.agent.session.delete, { sessionId: id });
      const { response: raw } = lastExchange("session/delete", (p) => p.sessionId === id);
      const listed = await listContains(ctx, id);
      detail[id] = { wire: raw?.error ? { error: raw.error } : "result", stillListed: listed.found };
      check(!raw?.error, { ...detail, reason: "delete was answered with an error the SDK masked as success" });
      check(!listed.found, { ...detail, reason: "the deleted session is still listed" });
    }
    return detail;
  };
}

async function deleteUnknownStep(ctx) {
  const sessionId = "sess_does_not_exist_0000";
  let sdk;
  try {
    sdk = { resolved: await ctx.request(methods.agent.session.delete, { sessionId }) };
  } catch (error) {
    sdk = { rejected: describeError(error) };
  }
  const { response: raw } = lastExchange("session/delete", (p) => p.sessionId === sessionId);
  const detail = { sdk, wire: raw?.error ? { error: raw.error } : raw ? { result: raw.result } : null };
  check(raw?.error?.code === -32002, {
    ...detail,
    reason: `expected ACP error -32002 (resource not found), got ${raw?.error ? raw.error.code : "a success result"}`,
  });
  return detail;
}

async function failPrompt(ctx, session) {
  try {
    const response = await ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: promptBlocks("/fail boom") });
    throw new Fail({ reason: "/fail boom did not fail", response });
  } catch (error) {
    if (error instanceof Fail) throw error;
    check(error instanceof RequestError, { reason: "not a JSON-RPC error", error: describeError(error) });
    return describeError(error);
  }
}

function providerFailureStep(group) {
  return async (ctx) => {
    const session = need(group);
    const error = await failPrompt(ctx, session);
    // An extension request: the SDK 2.x has no extMethod(); request() takes any `_` method name.
    const status = await ctx.request("_session/status", { sessionId: session.sessionId });
    const detail = { error, status: status?.status ?? null, lastError: status?.lastError ?? null };
    check(status?.status === "error", { ...detail, reason: "_session/status does not say error" });
    return detail;
  };
}

function recoverStep(group) {
  return async (ctx) => {
    const session = need(group);
    const error = await failPrompt(ctx, session);
    try {
      const response = await ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: promptBlocks("hello after failure") });
      const status = await ctx.request("_session/status", { sessionId: session.sessionId });
      const detail = {
        failure: error,
        stopReason: response.stopReason,
        status: status?.status ?? null,
        generation: status?.generation ?? null,
        lastError: status?.lastError ?? null,
      };
      check(response.stopReason === "end_turn", detail);
      check(detail.status === "idle" && detail.generation === 2 && detail.lastError === null, {
        ...detail,
        reason: "the recovered session is not idle in generation 2 with lastError null",
      });
      return detail;
    } catch (caught) {
      if (caught instanceof Fail) throw caught;
      throw new Fail({ failure: error, nextPrompt: describeError(caught), reason: "the prompt after a provider failure was refused" });
    }
  };
}

function permissionStep(group) {
  return async (ctx) => {
    const session = need(group);
    const before = info.permissionRequests.length;
    const response = await ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: promptBlocks("/permission") });
    const asked = info.permissionRequests.slice(before);
    const detail = { mode: PERMISSION_MODE, answered: asked.map((a) => a.response), agentSaw: response._meta?.permissionResponse ?? null };
    check(asked.length === 1, { ...detail, reason: "expected exactly one session/request_permission" });
    return detail;
  };
}

function selftestStep(group) {
  return async (ctx) => {
    const session = need(group);
    const response = await ctx.request(methods.agent.session.prompt, { sessionId: session.sessionId, prompt: promptBlocks("/violations") });
    await sleep(50);
    return { stopReason: response.stopReason };
  };
}

// name -> [[step, run(ctx)], ...]
const GROUPS = {
  basic: (g) => [
    ["session_new", sessionNewStep(g)],
    ["prompt_hello", () => promptHello(g)],
  ],
  tool: (g) => [
    ["session_new", sessionNewStep(g)],
    ["tool_call", toolCallStep(g)],
  ],
  tool_live: (g) => [
    ["session_new", sessionNewStep(g)],
    ["live_output_in_content", toolLiveStep(g)],
  ],
  cancel: (g) => [
    ["session_new", sessionNewStep(g)],
    ["cancel_sleep", cancelStep(g)],
  ],
  set_mode: (g) => [
    ["session_new", sessionNewStep(g)],
    ["set_mode_plan", setModeStep(g)],
  ],
  set_config_option: (g) => [
    ["session_new", sessionNewStep(g)],
    ["set_config_option_approval_auto", setConfigOptionApprovalStep(g)],
    ["set_config_option_mode_plan", setConfigOptionStep(g)],
  ],
  list: (g) => [
    ["session_new", sessionNewStep(g)],
    ["list_contains_session", listStep(g)],
  ],
  close: (g) => [
    ["session_new", sessionNewStep(g)],
    ["close", closeStep(g, "first close")],
    ["close_again", closeStep(g, "second close")],
  ],
  lifecycle: (g) => [
    ["session_new", sessionNewStep(g)],
    ["prompt_hello", () => promptHello(g)],
    ["close", closeStep(g, "close")],
    ["load", loadStep(g)],
    ["close_after_load", closeStep(g, "close after load")],
    ["resume", resumeStep(g)],
    ["fork", forkStep(g)],
    ["delete", deleteStep(g)],
  ],
  delete_unknown: () => [["delete_unknown_session", deleteUnknownStep]],
  provider_failure: (g) => [
    ["session_new", sessionNewStep(g)],
    ["prompt_fail_is_error", providerFailureStep(g)],
  ],
  recover_after_failure: (g) => [
    ["session_new", sessionNewStep(g)],
    ["prompt_after_provider_failure", recoverStep(g)],
  ],
  // Need an agent that asks for permission / misbehaves (fake_agent.mjs); not run by default.
  permission: (g) => [
    ["session_new", sessionNewStep(g)],
    ["request_permission", permissionStep(g)],
  ],
  selftest: (g) => [
    ["session_new", sessionNewStep(g)],
    ["violations_prompt", selftestStep(g)],
  ],
};
const OPT_IN = new Set(["permission", "selftest"]);
const DEFAULT_GROUPS = Object.keys(GROUPS).filter((g) => !OPT_IN.has(g));

if (listOnly) {
  for (const name of Object.keys(GROUPS)) {
    const steps = GROUPS[name](name).map(([step]) => step);
    process.stdout.write(`${name}${OPT_IN.has(name) ? " (opt-in)" : ""}: ${steps.join(", ")}\n`);
  }
  process.exit(0);
}
if (!agentCmd || agentCmd.length === 0) usage("no agent command (give it after --, or in ACP_TS_AGENT_CMD)");
const selected = only ?? DEFAULT_GROUPS;
for (const name of selected) if (!GROUPS[name]) usage(`unknown group ${JSON.stringify(name)}; try --list`);

// ---------------------------------------------------------------- run

let ownCwd = null;
if (process.env.ACP_TS_CWD) {
  state.cwd = path.resolve(process.env.ACP_TS_CWD);
} else {
  ownCwd = mkdtempSync(path.join(tmpdir(), "acp-ts-"));
  state.cwd = ownCwd;
}

const child = spawn(agentCmd[0], agentCmd.slice(1), { stdio: ["pipe", "pipe", "pipe"] });
let childExit = null;
const childExited = new Promise((resolve) => {
  child.on("exit", (code, signal) => {
    childExit = { code, signal };
    resolve(childExit);
  });
  child.on("error", (error) => {
    childExit = { code: null, signal: null, spawnError: String(error) };
    resolve(childExit);
  });
});
const stderrTail = [];
child.stderr.on("data", (chunk) => {
  stderrTail.push(chunk.toString("utf8"));
  while (stderrTail.length > 200) stderrTail.shift();
});

const tapOut = lineSplitter(onOutgoingLine);
const tapIn = lineSplitter(onIncomingLine);
const childStdin = Writable.toWeb(child.stdin).getWriter();
child.stdin.on("error", () => {}); // EPIPE after the agent died is reported via its exit status
const output = new WritableStream({
  write(chunk) {
    tapOut(chunk);
    return childStdin.write(chunk);
  },
  close() {
    return childStdin.close();
  },
  abort(reason) {
    return childStdin.abort(reason);
  },
});
const input = Readable.toWeb(child.stdout).pipeThrough(
  new TransformStream({
    transform(chunk, controller) {
      tapIn(chunk);
      controller.enqueue(chunk);
    },
  }),
);

function finish(exitCode, extra = {}) {
  const failed = results.filter((r) => !r.ok).map((r) => r.step);
  const problemCount = Object.values(problems).reduce((n, list) => n + list.length, 0);
  const ok = exitCode === 0 && failed.length === 0 && problemCount === 0;
  const summary = {
    summary: true,
    ok,
    sdk: "@agentclientprotocol/sdk/unstable",
    permissionMode: PERMISSION_MODE,
    groups: selected,
    steps: results.length,
    passed: results.filter((r) => r.ok).length,
    failed,
    problems,
    info: { ...info, wireUpdates, deliveredUpdates: delivered.length, messagesIn: wire.filter((e) => e.dir === "in").length },
    agentExit: childExit,
    ...extra,
  };
  process.stdout.write(JSON.stringify(summary) + "\n");
  if (!ok) {
    process.stderr.write(`--- agent stderr (tail) ---\n${stderrTail.join("").split("\n").slice(-40).join("\n")}\n`);
  }
  if (ownCwd) rmSync(ownCwd, { recursive: true, force: true });
  process.exit(exitCode !== 0 ? exitCode : ok ? 0 : 1);
}

const watchdog = setTimeout(() => {
  emit({ step: "watchdog", ok: false, detail: { reason: `run exceeded ${RUN_TIMEOUT_MS} ms` }, group: null });
  child.kill("SIGKILL");
  finish(3, { watchdog: true });
}, RUN_TIMEOUT_MS);

async function runStep(ctx, group, name, fn) {
  const step = group === null ? name : `${group}.${name}`;
  try {
    const detail = await withTimeout(Promise.resolve().then(() => fn(ctx)), STEP_TIMEOUT_MS, step);
    emit({ step, ok: true, detail: detail ?? null, group });
    return true;
  } catch (error) {
    emit({ step, ok: false, detail: describeError(error), group });
    return false;
  }
}

let connectionError = null;
let shuttingDown = false;
try {
  const connection = app.connect(acp.ndJsonStream(output, input));
  const ctx = connection.agent;
  connection.closed.then(() => {
    if (!shuttingDown) connectionError = connection.signal.reason;
  });
  const initialized = await runStep(ctx, null, "initialize", initialize);
  for (const group of selected) {
    for (const [name, fn] of GROUPS[group](group)) {
      if (!initialized) {
        emit({ step: `${group}.${name}`, ok: false, detail: { skipped: true, reason: "initialize failed" }, group });
        continue;
      }
      await runStep(ctx, group, name, fn);
    }
    sessionsByGroup[group]?.dispose?.(); // stop routing updates to the group's ActiveSession
  }
  await sleep(100); // late notifications still get validated
  if (delivered.length < wireUpdates) {
    problems.droppedBySdk.push({ wireUpdates, delivered: delivered.length, note: "session/update notifications the SDK did not deliver to the handler" });
  }
  shuttingDown = true;
  connection.close();
} catch (error) {
  problems.harness.push({ exception: describeError(error) });
}
if (connectionError) problems.harness.push({ connectionClosed: describeError(connectionError) });

// Stdin EOF must stop the agent cleanly (exit 0).
await childStdin.close().catch(() => {});
const exited = await Promise.race([childExited, sleep(10000).then(() => null)]);
if (!exited) {
  child.kill("SIGTERM");
  await Promise.race([childExited, sleep(3000)]);
  if (!childExit) child.kill("SIGKILL");
  await childExited;
}
emit({
  step: "agent_exit",
  ok: Boolean(exited) && childExit.code === 0,
  detail: exited ? childExit : { reason: "agent did not exit within 10 s of stdin EOF", ...childExit },
  group: null,
});
clearTimeout(watchdog);
finish(0);
