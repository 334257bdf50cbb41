// The selected session's details: its facts and settings (mode, model, approval,
// sandbox), MCP servers, permission rules, last error, and the actions on it (close,
// resume, archive, export, import; a worktree session's branch is branch.js's).
"use strict";

(window.AcpUi = window.AcpUi || {}).details = (ui) => {
  const { $, byId, el, badge, tokens, state, store } = ui;

  function renderDetails() {
    const s = store.selected(state);
    $(".placeholder").hidden = Boolean(s);
    $(".session-view").hidden = !s;
    if (!s) {
      if (!byId("branch-view").hidden) ui.closeBranch(false);
      return;
    }
    if (!$(".d-title input")) $(".d-title").textContent = s.title;
    byId("archive-session").textContent = s.archived ? "Unarchive" : "Archive";
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
    renderInstructions(s);
    byId("effective-sandbox").textContent =
      s.sandboxProblem ? `⚠ unavailable: ${s.sandboxProblem}` : s.effectiveSandbox !== s.sandbox ? `(runs ${s.effectiveSandbox} in ${s.mode} mode)` : "";
    const lastError = byId("detail-error");
    lastError.hidden = !s.lastError;
    lastError.textContent = s.lastError ? `Last error: ${s.lastError}` : "";
    byId("close-session").disabled = !s.live;
    byId("resume-session").disabled = s.live && s.status !== "error";
    byId("error-actions").hidden = s.status !== "error";
    byId("detail-model").textContent = s.model || "—";
    const agent = store.agentShown(s);
    byId("detail-agent").hidden = !agent;
    byId("detail-agent").textContent = agent ? `agent: ${agent}` : "";
    renderModels(s, settable);
    const usage = s.usage || {};
    const context = state.context.get(s.sessionId);
    const parts = [];
    if (usage.inputTokens || usage.outputTokens) parts.push(`${tokens(usage.inputTokens)} in · ${tokens(usage.outputTokens)} out`);
    if (context) parts.push(`context ${tokens(context.used)}${context.size ? ` / ${tokens(context.size)}` : ""}`);
    byId("detail-usage").textContent = parts.join(" · ");
    byId("detail-usage").parentElement.hidden = parts.length === 0;
    byId("send").disabled = !s.live;
    byId("stop").disabled = s.status !== "running";
    ui.renderWorktree(s);
    ui.turns.updateButtons();
    ui.updateReviewButtons();
    ui.updateWorking();
  }

  // The model picker: the `model` config option's choices, as the sidecar offers them
  // (fetched once per session from the host, then kept by config_option_update).
  function renderModels(s, settable) {
    const select = byId("model-select");
    if (store.configWanted(state, s)) {
      ui.quietCall("config_options", s.sessionId).then((got) => {
        store.configArrived(state, s.sessionId, got, true);
        if (s.sessionId === state.selected) renderDetails();
      });
    }
    const options = state.config.get(s.sessionId);
    const model = (options || []).find((o) => o.id === "model");
    const choices = model ? model.options.map((o) => o.value) : [];
    const current = model ? model.currentValue : s.model || "";
    if (!choices.includes(current)) choices.unshift(current);
    if ([...select.options].map((o) => o.value).join("\n") !== choices.join("\n")) {
      select.replaceChildren(...choices.map((value) => el("option", { value, text: value || "—" })));
    }
    select.value = current;
    select.disabled = !settable || !model || choices.length < 2;
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
            ? el("button", { type: "button", class: "small ghost", "data-testid": "mcp-reconnect", text: "Reconnect", onclick: () => ui.call("reconnect_mcp", s.sessionId, server.name) })
            : null,
        ),
      ),
    );
  }

  // The AGENTS.md / CLAUDE.md files the builtin agent read into its prompt (the summary's
  // `instructions`): each with its size, and whether it was cut or left out and why.
  function renderInstructions(s) {
    const files = s.instructions || [];
    byId("instruction-files").hidden = files.length === 0;
    byId("instruction-list").replaceChildren(
      ...files.map((file) => {
        const note = file.skipped ? ` — left out: ${file.skipped}` : file.cut ? " — cut to fit" : "";
        return el("li", { "data-testid": "instruction-file", "data-path": file.path, text: `${file.path} · ${file.bytes.toLocaleString()} bytes${note}` });
      }),
    );
  }

  async function loadRules(sessionId) {
    const got = await ui.quietCall("permissions", sessionId);
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
              if (await ui.call("set_rules", sessionId, rules)) loadRules(sessionId);
            },
          }),
        ),
      ),
    );
    byId("rules-count").textContent = got.rules.length ? `(${got.rules.length})` : "";
    byId("rules-empty").hidden = got.rules.length > 0;
  }

  async function setSetting(configId, select) {
    ui.clearError();
    const s = store.selected(state);
    if (!s) return;
    const result = await ui.call("set_config", s.sessionId, configId, select.value);
    const fresh = await ui.quietCall("status", s.sessionId);
    if (fresh) ui.updateSession(fresh);
    else if (!result) renderDetails();
  }

  async function setMode() {
    ui.clearError();
    const s = store.selected(state);
    const mode = byId("mode-select").value;
    if (!s || mode === s.mode) return;
    const ok = await ui.call("set_mode", s.sessionId, mode);
    ui.updateSession({ ...s, mode: ok ? mode : s.mode });
  }

  async function lifecycle(action) {
    ui.clearError();
    const sessionId = state.selected;
    if (!sessionId) return;
    const s = state.sessions.get(sessionId);
    // A session in error still holds its runtime: Resume closes it first.
    if (action === "resume" && s && s.live) {
      const closed = await ui.call("close", sessionId);
      if (!closed) return;
      ui.updateSession(closed);
    }
    const result = await ui.call(action, sessionId);
    if (result && result.sessionId) ui.updateSession(result);
    byId("prompt-input").focus();
  }

  async function toggleArchive() {
    const s = store.selected(state);
    if (!s) return;
    const fresh = await ui.call("archive", s.sessionId, !s.archived);
    if (!fresh) return;
    ui.updateSession(fresh);
    ui.showNotice(fresh.archived ? `Archived “${fresh.title}”: hidden from the list (tick “archived” to see it).` : `“${fresh.title}” is back in the list.`);
    if (state.filterIds) ui.runSearch();
  }

  async function exportSession(format) {
    const s = store.selected(state);
    if (!s) return;
    const done = await ui.call("export_session", s.sessionId, format);
    if (!done || done.cancelled) return;
    ui.showNotice(`Exported ${done.entries} entries to ${done.path}`);
  }

  async function importSession() {
    const summary = await ui.call("import_session");
    if (!summary || summary.cancelled) return;
    ui.updateSession(summary);
    await ui.select(summary.sessionId);
    ui.showNotice(`Imported “${summary.title}” as a new session (closed: Resume to continue it).`);
  }

  function wire() {
    byId("close-session").addEventListener("click", () => lifecycle("close"));
    byId("resume-session").addEventListener("click", () => lifecycle("resume"));
    byId("error-resume").addEventListener("click", () => lifecycle("resume"));
    byId("import-session").addEventListener("click", importSession);
    byId("archive-session").addEventListener("click", toggleArchive);
    byId("export-session").addEventListener("click", () => exportSession("jsonl"));
    byId("export-markdown").addEventListener("click", () => exportSession("markdown"));
    byId("mode-select").addEventListener("change", setMode);
    byId("approval-select").addEventListener("change", (e) => setSetting("approval", e.target));
    byId("sandbox-select").addEventListener("change", (e) => setSetting("sandbox", e.target));
    byId("model-select").addEventListener("change", (e) => setSetting("model", e.target));
  }

  return { renderDetails, loadRules, wireDetails: wire };
};
