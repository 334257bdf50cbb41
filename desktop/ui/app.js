// The page: a disposable view over the sidecar. It keeps nothing that it cannot fetch
// again: on load it asks (through the js_api bridge) for the session list, statuses and
// transcripts; afterwards the host pushes notifications into `window.app.onPush`.
// Streamed text and tool calls are drawn in a "live" area; when a turn ends the stored
// transcript tail is fetched and replaces it, so the page always converges on the store.
// Diffs are drawn by diff.js; per-turn changes and the Rewind menu by turns.js.
"use strict";

(() => {
  const PAGE = 50;
  const TAIL = 200;
  const $ = (sel, root = document) => root.querySelector(sel);
  const byId = (testid, root = document) => $(`[data-testid="${testid}"]`, root);

  const state = {
    info: null,
    sessions: new Map(), // sessionId -> summary, in list order (newest first)
    selected: null,
    transcript: null, // {sessionId, messages, offset, end, tail: Promise}
    started: false,
    booting: true, // pushes are queued until the first full load is done
    queued: [],
  };

  // ---- DOM helpers -------------------------------------------------------------------

  function el(tag, props = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.includes("-") || key === "title" || key === "role" || key === "tabindex") node.setAttribute(key, value);
      else node[key] = value;
    }
    for (const child of children) if (child) node.append(child);
    return node;
  }

  function badge(node, status) {
    node.className = `badge status-${status}`;
    node.textContent = status;
  }

  // ---- bridge ------------------------------------------------------------------------

  async function call(name, ...args) {
    let result;
    try {
      result = await window.pywebview.api[name](...args);
    } catch (err) {
      showError({ title: "Bridge error", message: String((err && err.message) || err) });
      return null;
    }
    if (result && result.error) {
      showError(result.error);
      return null;
    }
    return result;
  }

  async function quietCall(name, ...args) {
    try {
      const result = await window.pywebview.api[name](...args);
      return result && result.error ? null : result;
    } catch (err) {
      return null;
    }
  }

  // ---- banners -----------------------------------------------------------------------

  function showError(error) {
    const banner = byId("error-banner");
    $(".banner-title", banner).textContent = `${error.title || "Error"}:`;
    $(".banner-text", banner).textContent = error.message || String(error.code);
    banner.dataset.code = String(error.code);
    banner.hidden = false;
  }

  function clearError() {
    byId("error-banner").hidden = true;
  }

  // What an action did, with at most one follow-up (e.g. undo).
  function showNotice(text, action) {
    const banner = byId("notice-banner");
    $(".banner-text", banner).textContent = text;
    const button = byId("notice-action");
    button.hidden = !action;
    button.textContent = action ? action.label : "";
    button.onclick = action
      ? () => {
          banner.hidden = true;
          action.run();
        }
      : null;
    banner.hidden = false;
  }

  function showSidecarBanner(kind, text) {
    const banner = byId("sidecar-banner");
    banner.className = `banner ${kind}`;
    $(".banner-text", banner).textContent = text;
    banner.hidden = false;
  }

  function renderSidecar(info) {
    const pill = byId("sidecar-state");
    pill.dataset.state = info.state;
    pill.dataset.pid = String(info.pid || "");
    pill.textContent = `sidecar: ${info.state}${info.pid ? ` · pid ${info.pid}` : ""}`;
  }

  // ---- sidebar -----------------------------------------------------------------------

  function renderSidebar() {
    const list = byId("session-list");
    list.replaceChildren(...[...state.sessions.values()].map(sessionItem));
    $(".sidebar-empty").hidden = state.sessions.size > 0;
  }

  function sessionItem(s) {
    const status = el("span", { "data-testid": "session-status" });
    badge(status, s.awaitingPermission ? "waiting" : s.status);
    if (s.awaitingPermission) status.textContent = "waiting for approval";
    const item = el(
      "li",
      { class: "session-item", "data-testid": "session-item", "data-session-id": s.sessionId },
      el("div", { class: "item-row" }, el("span", { class: "item-title", text: s.title }), status),
      el(
        "div",
        { class: "item-row" },
        el("span", { class: "item-cwd", text: shortPath(s.cwd), title: s.cwd }),
        s.interrupted
          ? el("span", { class: "interrupted", "data-testid": "session-interrupted", text: "⚠ interrupted" })
          : null,
        el("span", { class: "item-gen", "data-testid": "session-generation", text: `gen ${s.generation}` }),
      ),
    );
    item.classList.toggle("selected", s.sessionId === state.selected);
    item.addEventListener("click", () => select(s.sessionId));
    return item;
  }

  // The end of a path says most about it; keep that when the sidebar is too narrow.
  function shortPath(path, max = 34) {
    if (path.length <= max) return path;
    const tail = path.slice(-max);
    const cut = tail.indexOf("/");
    return `…${cut > 0 ? tail.slice(cut) : tail}`;
  }

  function updateSession(summary) {
    const known = state.sessions.get(summary.sessionId);
    state.sessions.set(summary.sessionId, { ...(known || {}), ...summary });
    renderSidebar();
    if (summary.sessionId === state.selected) renderDetails();
  }

  // ---- details -----------------------------------------------------------------------

  function renderDetails() {
    const s = state.sessions.get(state.selected);
    $(".placeholder").hidden = Boolean(s);
    $(".session-view").hidden = !s;
    if (!s) return;
    $(".d-title").textContent = s.title;
    badge(byId("detail-status"), s.status);
    byId("detail-interrupted").hidden = !s.interrupted;
    byId("detail-generation").textContent = String(s.generation);
    byId("session-endpoint").textContent = s.http ? s.http.url : "— (not live)";
    byId("detail-backend").textContent = s.backend;
    byId("detail-cwd").textContent = s.cwd;
    byId("detail-id").textContent = s.sessionId;
    byId("mode-select").value = s.mode;
    byId("mode-select").disabled = !s.live || s.status !== "idle";
    const settable = s.live && s.status === "idle";
    byId("approval-select").value = s.approval || "ask";
    byId("approval-select").disabled = !settable;
    byId("sandbox-select").value = s.sandbox || "workspace";
    byId("sandbox-select").disabled = !settable;
    renderMcp(s);
    byId("effective-sandbox").textContent =
      s.sandboxProblem ? `⚠ unavailable: ${s.sandboxProblem}` : s.effectiveSandbox !== s.sandbox ? `(runs ${s.effectiveSandbox} in ${s.mode} mode)` : "";
    const lastError = byId("detail-error");
    lastError.hidden = !s.lastError;
    lastError.textContent = s.lastError ? `Last error: ${s.lastError}` : "";
    byId("close-session").disabled = !s.live;
    byId("resume-session").disabled = s.live;
    byId("send").disabled = !s.live;
    byId("stop").disabled = s.status !== "running";
    turns.updateButtons();
  }

  // ---- transcript --------------------------------------------------------------------

  // Entries are `TranscriptEntry` values (protocol/models.py): {index, type, ...}. Each
  // turn's entries end with a slot for what it changed (filled by turns.js).
  function messageNodes(entries) {
    const nodes = [];
    const tools = new Map();
    const firstUser = entries.find((m) => m.type === "user" && m.turn);
    let turn = firstUser && entries[0] !== firstUser ? firstUser.turn - 1 : null; // opened mid-turn
    let changed = false;
    const endTurn = () => turn && nodes.push(turns.changesSlot(turn, changed));
    for (const m of entries) {
      if (m.type === "user") {
        endTurn();
        turn = m.turn || null;
        changed = false;
        nodes.push(turns.userMessage(m));
      } else if (m.type === "assistant") {
        if (m.text) nodes.push(el("div", { class: "msg agent", text: m.text }));
        for (const call of m.toolCalls || []) {
          changed = changed || !turns.readOnlyTool(call.tool);
          const block = toolBlock(call.toolCallId, call.title, TOOL_KINDS[call.tool] || "other");
          storedDiff(block, call);
          tools.set(call.toolCallId, block);
          nodes.push(block);
        }
      } else if (m.type === "tool_result") {
        let block = tools.get(m.toolCallId);
        if (!block) nodes.push((block = toolBlock(m.toolCallId, m.tool || "tool", TOOL_KINDS[m.tool] || "other")));
        if (block.dataset.kind === "execute") finishTool(block, m.text, ...exitStatus(m.exitCode, m.exitCode === null || m.exitCode === undefined));
        else finishTool(block, m.text, ...storedStatus(m));
      } else if (m.type === "marker" && m.text) {
        const text = m.kind === "interrupted" ? `⚠ ${m.text}` : m.text;
        nodes.push(el("div", { class: "note", "data-testid": `note-${m.kind}`, text }));
      }
    }
    endTurn();
    return nodes;
  }

  const TOOL_KINDS = { bash: "execute", read_file: "read", list_files: "search", write_file: "edit", edit_file: "edit" };
  const TOOL_ICONS = { execute: "$", edit: "✎", read: "≡", search: "⌕" };

  function toolBlock(id, command, kind = "execute") {
    return el(
      "div",
      { class: `tool kind-${kind}`, "data-testid": "tool-call", "data-tool-call-id": id || "", "data-kind": kind },
      el(
        "div",
        { class: "tool-head" },
        el("span", { class: "tool-icon", text: TOOL_ICONS[kind] || "•", "aria-hidden": "true" }),
        el("code", { class: "tool-cmd", "data-testid": "tool-command", text: command || "" }),
        el("span", { class: "tool-status running", "data-testid": "tool-status", text: "running" }),
      ),
      el("div", { class: "tool-diffs", "data-testid": "tool-diffs" }),
      el("pre", { class: "tool-out", "data-testid": "tool-output" }),
    );
  }

  function exitStatus(exitCode, cancelled) {
    return cancelled ? ["stopped", false] : [`exit ${exitCode}`, exitCode === 0];
  }

  // How a stored call of a tool that is not a command went (`ok`; "Not run: ..." when the
  // user refused it).
  function storedStatus(m) {
    if (/^Not run\b/.test(m.text || "")) return ["not run", false];
    return m.ok === false ? ["failed", false] : ["done", true];
  }

  function finishTool(block, output, label, ok) {
    $(".tool-out", block).textContent = output || "";
    const status = $(".tool-status", block);
    status.className = `tool-status ${ok ? "ok" : "fail"}`;
    status.textContent = label;
  }

  // A path under the session's directory is shown relative to it (the sidecar sends
  // absolute paths, as ACP asks).
  function shortFile(path) {
    const s = state.sessions.get(state.selected) || {};
    const cwd = (s.cwd || "").replace(/\/+$/, "");
    return cwd && path.startsWith(`${cwd}/`) ? path.slice(cwd.length + 1) : path;
  }

  // The diff items of a tool call's content (a write's), drawn into its card.
  function showDiffs(block, content, open) {
    const diffs = (content || []).filter((c) => c.type === "diff");
    if (!diffs.length) return;
    $(".tool-diffs", block).replaceChildren(...diffs.map((d) => window.Diff.fromTexts(shortFile(d.path), d.oldText, d.newText, { open })));
  }

  // A stored call keeps its arguments, not the file as it was: an edit shows the text it
  // replaced (line numbers unknown), a write the content it wrote; the turn's changes list
  // has the exact diff.
  function storedDiff(block, call) {
    const input = call.input || {};
    const path = typeof input.path === "string" ? input.path : "";
    let diff = null;
    if (call.tool === "edit_file" && typeof input.old_text === "string" && typeof input.new_text === "string") {
      diff = window.Diff.fromTexts(path, input.old_text, input.new_text, { open: false, numbers: false, label: input.replace_all ? "replaced everywhere" : "replaced text" });
    } else if (call.tool === "write_file" && typeof input.content === "string") {
      diff = window.Diff.fromTexts(path, null, input.content, { open: false, label: "content written" });
    }
    if (diff) $(".tool-diffs", block).append(diff);
  }

  function renderTranscript(keepScroll) {
    const t = state.transcript;
    const box = byId("transcript");
    const fromBottom = box.scrollHeight - box.scrollTop;
    const confirming = Boolean(document.activeElement.closest("[data-testid=rewind-confirm]"));
    $(".stored", box).replaceChildren(...messageNodes(t.messages));
    turns.fillSlots($(".stored", box));
    turns.placeConfirm(confirming); // a rewind's confirmation, drawn again, keeps its focus
    byId("load-older").hidden = t.offset === 0;
    $(".transcript-empty", box).hidden = t.messages.length > 0 || $(".live", box).childElementCount > 0;
    box.scrollTop = keepScroll ? box.scrollHeight - fromBottom : box.scrollHeight;
  }

  async function loadTranscript(sessionId) {
    const page = await call("messages", sessionId, null, PAGE);
    if (!page || state.selected !== sessionId) return;
    state.transcript = {
      sessionId,
      messages: page.messages,
      offset: page.offset,
      end: page.offset + page.messages.length,
      tail: Promise.resolve(),
      changes: new Map(), // turn -> {turn, files, total}: what it changed
      diffs: new Map(), // turn -> {byPath, truncated}: its diff, once asked for
      asked: new Set(), // turns whose changes were asked for
      openFiles: new Set(), // "turn\npath" of the file diffs shown
      fetches: Promise.resolve(),
    };
    $(".live").replaceChildren();
    renderTranscript(false);
  }

  async function loadOlder() {
    const t = state.transcript;
    if (!t || t.offset === 0) return;
    const offset = Math.max(0, t.offset - PAGE);
    const page = await call("messages", t.sessionId, offset, t.offset - offset);
    if (!page || state.transcript !== t) return;
    t.messages = page.messages.concat(t.messages);
    t.offset = offset;
    renderTranscript(true);
  }

  // After a turn: fetch what the store now holds past what we show; drop the live copy.
  function refetchTail() {
    const t = state.transcript;
    if (!t) return;
    t.tail = t.tail.then(async () => {
      for (;;) {
        const page = await quietCall("messages", t.sessionId, t.end, TAIL);
        if (!page || state.transcript !== t) return;
        t.messages = t.messages.concat(page.messages);
        t.end += page.messages.length;
        if (page.messages.length < TAIL) break;
      }
      $(".live").replaceChildren();
      renderTranscript(false);
    });
  }

  function liveAppend(node) {
    const box = byId("transcript");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    $(".live", box).append(node);
    $(".transcript-empty", box).hidden = true;
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  function onUpdate(params) {
    if (!state.transcript || params.sessionId !== state.transcript.sessionId) return;
    const u = params.update;
    const live = $(".live");
    const text = u.content && u.content.text;
    if (u.sessionUpdate === "user_message_chunk") {
      liveAppend(el("div", { class: "msg user", text }));
    } else if (u.sessionUpdate === "agent_message_chunk") {
      const last = live.lastElementChild;
      if (last && last.classList.contains("streaming")) last.textContent += text;
      else liveAppend(el("div", { class: "msg agent streaming", "data-testid": "streaming", text }));
    } else if (u.sessionUpdate === "tool_call") {
      const last = live.lastElementChild;
      if (last) last.classList.remove("streaming");
      const block = toolBlock(u.toolCallId, (u.rawInput && u.rawInput.command) || u.title, u.kind || "execute");
      showDiffs(block, u.content, false); // open in the approval card; here once written
      liveAppend(block);
    } else if (u.sessionUpdate === "tool_call_update") {
      const block = live.querySelector(`.tool[data-tool-call-id="${CSS.escape(u.toolCallId)}"]`);
      if (!block) return;
      if (u._meta && typeof u._meta.output === "string") $(".tool-out", block).textContent += u._meta.output;
      const finished = u.status === "completed" || u.status === "failed";
      if (u.content && u.content.length) {
        const output = u.content.map((c) => (c.content && c.content.text) || "").join("");
        if (finished) {
          const raw = u.rawOutput || {};
          if (block.dataset.kind === "execute") finishTool(block, output, ...exitStatus(raw.exitCode, Boolean(raw.cancelled)));
          else finishTool(block, output, u.status === "completed" ? "done" : "failed", u.status === "completed");
          showDiffs(block, u.content, true);
        } else {
          $(".tool-out", block).textContent = output; // the live output so far, whole
        }
      }
    } else if (u.sessionUpdate === "current_mode_update") {
      const s = state.sessions.get(params.sessionId);
      if (s) updateSession({ ...s, mode: u.currentModeId });
    }
  }

  // ---- consent -----------------------------------------------------------------------

  // Cards for permission requests, by "sessionId toolCallId". The host keeps the requests,
  // so a rebuilt page fetches them and an answer from it still counts.
  state.permissions = new Map();

  function permissionKey(p) {
    return `${p.sessionId} ${p.toolCall.toolCallId}`;
  }

  function approvalCard(p) {
    const call = p.toolCall;
    const session = state.sessions.get(p.sessionId) || {};
    const diffs = (call.content || []).filter((c) => c.type === "diff");
    const diff = diffs.length
      ? el("div", { class: "approval-diffs", "data-testid": "approval-diffs" }, ...diffs.map((d) => window.Diff.fromTexts(shortFile(d.path), d.oldText, d.newText)))
      : null;
    const buttons = [
      ["allow_once", "Allow once", "primary"],
      ["allow_always", "Always allow", ""],
      ["reject_once", "Reject", "danger"],
      ["reject_always", "Always reject", "danger"],
    ].map(([id, label, cls]) =>
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
    state.permissions.set(permissionKey(p), p);
    renderPermissions();
  }

  function renderPermissions() {
    for (const card of document.querySelectorAll("[data-testid=approval-card]")) card.remove();
    if (!state.selected) return;
    let first = null;
    for (const p of state.permissions.values()) {
      if (p.sessionId !== state.selected) continue;
      const card = approvalCard(p);
      liveAppend(card);
      first = first || card;
    }
    if (first) first.focus();
  }

  async function answerPermission(p, optionId) {
    await call("answer_permission", p.sessionId, p.toolCall.toolCallId, optionId);
    state.permissions.delete(permissionKey(p));
    renderPermissions();
  }

  async function loadSavedServers() {
    const saved = (await quietCall("saved_mcp_servers")) || [];
    byId("saved-mcp-list").replaceChildren(
      ...saved.map((server) =>
        el(
          "label",
          { class: "inline", "data-testid": "saved-mcp" },
          el("input", { type: "checkbox", "data-name": server.name, "data-target": server.target, "aria-label": `Use ${server.name}` }),
          el("span", { text: ` ${server.name}`, title: server.target }),
        ),
      ),
    );
  }

  function renderMcp(s) {
    const servers = s.mcpServers || [];
    byId("mcp-servers").hidden = servers.length === 0;
    byId("mcp-list").replaceChildren(
      ...servers.map((server) =>
        el(
          "li",
          { "data-testid": "mcp-server", "data-name": server.name },
          el("span", { class: `mcp-status mcp-${server.status}`, "data-testid": "mcp-status", text: server.status }),
          el("span", { text: ` ${server.name} (${server.transport}) · ${server.tools} tool${server.tools === 1 ? "" : "s"}` }),
          server.error ? el("span", { class: "mcp-error", "data-testid": "mcp-error", text: ` — ${server.error}`, title: server.error }) : null,
          server.status === "failed" && s.live
            ? el("button", { type: "button", class: "small ghost", "data-testid": "mcp-reconnect", text: "Reconnect", onclick: () => reconnectServer(s.sessionId, server.name) })
            : null,
        ),
      ),
    );
  }

  async function reconnectServer(sessionId, name) {
    await call("reconnect_mcp", sessionId, name);
  }

  async function loadRules(sessionId) {
    const got = await quietCall("permissions", sessionId);
    if (!got || state.selected !== sessionId) return;
    const list = byId("rules-list");
    list.replaceChildren(
      ...got.rules.map((rule, index) =>
        el(
          "li",
          { "data-testid": "rule" },
          el("span", { text: `${rule.decision} ${rule.tool} ${rule.match === "prefix" ? "starting with" : "exactly"} “${rule.value}”` }),
          el("button", {
            type: "button", class: "small ghost", "data-testid": "remove-rule", text: "Remove", "aria-label": `Remove rule ${index + 1}`,
            onclick: async () => {
              const rules = got.rules.filter((_, i) => i !== index);
              if (await call("set_rules", sessionId, rules)) loadRules(sessionId);
            },
          }),
        ),
      ),
    );
    byId("rules-count").textContent = got.rules.length ? `(${got.rules.length})` : "";
    byId("rules-empty").hidden = got.rules.length > 0;
  }

  async function setSetting(configId, select) {
    clearError();
    const s = state.sessions.get(state.selected);
    if (!s) return;
    const result = await call("set_config", s.sessionId, configId, select.value);
    const fresh = await quietCall("status", s.sessionId);
    if (fresh) updateSession(fresh);
    else if (!result) renderDetails();
  }

  // ---- pushed events -----------------------------------------------------------------

  async function onState(p) {
    const s = state.sessions.get(p.sessionId);
    if (!s) return refreshList(); // created elsewhere (another page, another client)
    const wasRunning = s.status === "running";
    // A settled approval may have added a rule ("always"): the details show the rules.
    if (s.awaitingPermission && !p.awaitingPermission && p.sessionId === state.selected) loadRules(p.sessionId);
    updateSession(p); // _session/state carries the whole summary
    // A turn ended (or streamed text arrived while this page was loading): converge on the store.
    const streamed = $(".live").childElementCount > 0;
    if (state.selected === p.sessionId && p.status !== "running" && (wasRunning || streamed)) refetchTail();
    if (p.status === "error" && p.lastError) showError({ title: "Session error", message: `${s.title}: ${p.lastError}` });
  }

  function onHost(event, data) {
    const info = state.info.sidecar;
    if (event === "sidecar_exited") {
      info.state = "restarting";
      showSidecarBanner("warn", `The sidecar exited (code ${data.code}); restarting it…`);
    } else if (event === "sidecar_restarted") {
      Object.assign(info, { state: "running", pid: data.pid, restarts: data.restarts });
      showSidecarBanner("warn", "The sidecar restarted; sessions were closed and can be resumed.");
      refreshAll();
    } else if (event === "sidecar_failed") {
      info.state = "failed";
      showSidecarBanner("error", `The sidecar could not be restarted: ${data.reason}`);
    } else if (event === "sidecar_started") {
      Object.assign(info, { state: "running", pid: data.pid });
    } else if (event === "permission_requested") {
      return showPermission(data);
    } else if (event === "permission_settled") {
      state.permissions.delete(`${data.sessionId} ${data.toolCallId}`);
      return renderPermissions();
    }
    renderSidecar(info);
  }

  function handle(event) {
    if (event.type === "notification" && event.method === "_session/state") onState(event.params);
    else if (event.type === "notification" && event.method === "session/update") onUpdate(event.params);
    else if (event.type === "notification" && event.method === "_session/turn_changes") turns.onTurnChanges(event.params);
    else if (event.type === "host") onHost(event.event, event.data);
    else if (event.type === "bridge" && event.event === "prompt_failed") showError(event.data.error);
  }

  // ---- loading and actions -----------------------------------------------------------

  async function refreshList() {
    const list = await call("list_sessions");
    if (!list) return;
    state.sessions = new Map(list.map((s) => [s.sessionId, s]));
    if (state.selected && !state.sessions.has(state.selected)) {
      state.selected = null;
      state.transcript = null;
    }
    renderSidebar();
    renderDetails();
  }

  async function refreshAll() {
    await refreshList();
    if (!state.selected && state.sessions.size) state.selected = state.sessions.keys().next().value;
    renderSidebar();
    renderDetails();
    if (state.selected) await loadTranscript(state.selected);
  }

  async function select(sessionId) {
    if (state.selected === sessionId && state.transcript) return;
    state.selected = sessionId;
    state.transcript = null;
    turns.reset();
    byId("confirm-delete-box").hidden = true;
    $(".stored").replaceChildren();
    $(".live").replaceChildren();
    renderSidebar();
    renderDetails();
    await loadTranscript(sessionId);
    renderPermissions();
    loadRules(sessionId);
  }

  async function createSession(event) {
    event.preventDefault();
    clearError();
    const form = byId("new-session-form");
    const f = form.elements;
    const servers = [...document.querySelectorAll("[data-testid=saved-mcp] input:checked")].map((box) => ({ name: box.dataset.name, target: box.dataset.target }));
    const typed = { name: f.mcpName.value.trim(), target: f.mcpTarget.value.trim() };
    if (typed.name || typed.target) {
      servers.push(typed);
      if (f.mcpSave.checked && !(await call("save_mcp_server", typed.name, typed.target))) return;
    }
    const summary = await call("new_session", f.cwd.value.trim(), f.mode.value, f.backend.value, f.title.value, servers);
    if (!summary) return;
    form.hidden = true;
    f.title.value = "";
    f.mcpName.value = f.mcpTarget.value = "";
    f.mcpSave.checked = false;
    updateSession(summary);
    await select(summary.sessionId);
    byId("prompt-input").focus();
  }

  async function send(event) {
    if (event) event.preventDefault();
    clearError();
    const input = byId("prompt-input");
    const text = input.value.trim();
    if (!text || !state.selected) return;
    input.value = ""; // at once, so typing the next message is never wiped by this answer
    const result = await call("prompt", state.selected, text);
    if (!result && !input.value) input.value = text; // refused: give the text back
  }

  async function lifecycle(action) {
    clearError();
    const sessionId = state.selected;
    if (!sessionId) return;
    const result = await call(action, sessionId);
    if (result && result.sessionId) updateSession(result);
  }

  async function confirmDelete() {
    clearError();
    const sessionId = state.selected;
    byId("confirm-delete-box").hidden = true;
    if (!sessionId || !(await call("delete", sessionId))) return;
    state.sessions.delete(sessionId);
    state.selected = null;
    state.transcript = null;
    renderSidebar();
    renderDetails();
  }

  async function setMode() {
    clearError();
    const s = state.sessions.get(state.selected);
    const mode = byId("mode-select").value;
    if (!s || mode === s.mode) return;
    const ok = await call("set_mode", s.sessionId, mode);
    updateSession({ ...s, mode: ok ? mode : s.mode });
  }

  function fillOptions(select, options) {
    select.replaceChildren(...options.map((o) => el("option", { value: o.id, text: o.name, title: o.description || "" })));
  }

  function wire() {
    const form = byId("new-session-form");
    byId("new-session").addEventListener("click", () => {
      form.hidden = !form.hidden;
      if (!form.hidden) loadSavedServers();
      if (!form.elements.cwd.value) form.elements.cwd.value = state.info.defaultCwd;
      if (!form.hidden) form.elements.cwd.focus();
    });
    byId("cancel-new").addEventListener("click", () => (form.hidden = true));
    form.addEventListener("submit", createSession);
    $(".composer").addEventListener("submit", send);
    byId("prompt-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
    });
    byId("stop").addEventListener("click", () => state.selected && call("cancel", state.selected));
    byId("close-session").addEventListener("click", () => lifecycle("close"));
    byId("resume-session").addEventListener("click", () => lifecycle("resume"));
    byId("delete-session").addEventListener("click", () => (byId("confirm-delete-box").hidden = false));
    byId("cancel-delete").addEventListener("click", () => (byId("confirm-delete-box").hidden = true));
    byId("confirm-delete").addEventListener("click", confirmDelete);
    byId("mode-select").addEventListener("change", setMode);
    byId("approval-select").addEventListener("change", (e) => setSetting("approval", e.target));
    byId("sandbox-select").addEventListener("change", (e) => setSetting("sandbox", e.target));
    byId("load-older").addEventListener("click", loadOlder);
    byId("rebuild-ui").addEventListener("click", () => call("rebuild_ui"));
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey && e.shiftKey && (e.code === "KeyR" || e.key === "R" || e.key === "r")) {
        e.preventDefault();
        call("rebuild_ui");
      }
    });
    for (const banner of document.querySelectorAll(".banner")) {
      $(".banner-close", banner).addEventListener("click", () => (banner.hidden = true));
    }
  }

  async function boot() {
    if (state.started) return;
    state.started = true;
    wire();
    state.info = await call("page_ready"); // from here on, pushes arrive (queued until booted)
    if (!state.info) return;
    renderSidecar(state.info.sidecar);
    const modes = state.info.modes;
    fillOptions(byId("new-mode"), modes);
    fillOptions(byId("mode-select"), modes);
    fillOptions(byId("new-backend"), state.info.backends.map((b) => ({ id: b, name: b })));
    await refreshAll();
    for (const p of (await quietCall("pending_permissions")) || []) state.permissions.set(permissionKey(p), p);
    renderPermissions();
    if (state.selected) loadRules(state.selected);
    state.booting = false;
    for (const event of state.queued.splice(0)) handle(event);
    document.body.dataset.ready = "true";
  }

  // After a rewind: the summary and the whole transcript again (a marker was appended).
  async function afterRewind(sessionId) {
    const fresh = await quietCall("status", sessionId);
    if (fresh) updateSession(fresh);
    if (state.selected === sessionId) await loadTranscript(sessionId);
  }

  const turns = window.Turns({ call, quietCall, el, state, onRewound: afterRewind, showNotice });

  window.app = {
    onPush(batch) {
      for (const event of batch) {
        if (state.booting) state.queued.push(event);
        else handle(event);
      }
    },
  };

  if (window.pywebview && window.pywebview.api && window.pywebview.api.page_ready) boot();
  else window.addEventListener("pywebviewready", boot);
})();
