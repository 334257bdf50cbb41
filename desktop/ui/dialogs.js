// The page's small dialogs: the quick switch (Ctrl+K), the new-session form (Ctrl+N) with
// its saved MCP servers, its agent picker and "In a new worktree", renaming a session in
// place, and the delete confirmation.
"use strict";

(window.AcpUi = window.AcpUi || {}).dialogs = (ui) => {
  const { $, byId, el, shortPath, state, store } = ui;

  // ---- quick switch (Ctrl+K) -------------------------------------------------------------

  function openQuickSwitch() {
    const box = byId("quick-switch");
    box.hidden = false;
    const input = byId("quick-input");
    input.value = "";
    renderQuick();
    input.focus();
  }

  function closeQuickSwitch(refocus = true) {
    byId("quick-switch").hidden = true;
    if (refocus) byId("prompt-input").focus();
  }

  function renderQuick() {
    const list = byId("quick-list");
    const matches = store.quickMatches(state, byId("quick-input").value);
    list.replaceChildren(...matches.map((s, i) => el(
      "li",
      { role: "option", "data-testid": "quick-item", "data-session-id": s.sessionId, "aria-selected": String(i === 0), class: i === 0 ? "active" : "" },
      el("span", { class: "item-title", text: s.title }),
      el("span", { class: "item-cwd", text: ` ${shortPath(s.cwd)}` }),
    )));
    for (const li of list.children) li.addEventListener("mousedown", (e) => { e.preventDefault(); quickPick(li.dataset.sessionId); });
  }

  function quickMove(delta) {
    const items = [...byId("quick-list").children];
    if (!items.length) return;
    let at = items.findIndex((li) => li.classList.contains("active"));
    at = (at + delta + items.length) % items.length;
    items.forEach((li, i) => { li.classList.toggle("active", i === at); li.setAttribute("aria-selected", String(i === at)); });
  }

  async function quickPick(sessionId) {
    closeQuickSwitch(false);
    if (sessionId) await ui.select(sessionId);
    byId("prompt-input").focus();
  }

  function onQuickKey(e) {
    if (e.key === "ArrowDown") { e.preventDefault(); quickMove(1); }
    else if (e.key === "ArrowUp") { e.preventDefault(); quickMove(-1); }
    else if (e.key === "Enter") {
      e.preventDefault();
      const active = byId("quick-list").querySelector(".active");
      quickPick(active ? active.dataset.sessionId : null);
    } else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); closeQuickSwitch(); }
  }

  // ---- the new-session form ---------------------------------------------------------------

  function openNewForm() {
    const form = byId("new-session-form");
    ui.toggleSidebar(true);
    form.hidden = false;
    loadSavedServers();
    loadAgents();
    if (!form.elements.cwd.value) form.elements.cwd.value = (state.recent[0] || state.info.defaultCwd);
    byId("new-session-error").hidden = true;
    byId("new-worktree-error").hidden = true;
    form.elements.cwd.focus();
  }

  function closeNewForm() {
    byId("new-session-form").hidden = true;
    byId("new-session").focus();
  }

  function renderRecent() {
    byId("recent-folders").replaceChildren(...state.recent.map((f) => el("option", { value: f })));
  }

  async function browseFolder() {
    const form = byId("new-session-form");
    const got = await ui.call("pick_folder", form.elements.cwd.value);
    if (got && got.folder) form.elements.cwd.value = got.folder;
    form.elements.cwd.focus();
  }

  async function loadSavedServers() {
    const saved = (await ui.quietCall("saved_mcp_servers")) || [];
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

  // The agent picker, asked for each time the form opens (an agent installed meanwhile
  // becomes available): builtin first and the default; one not installed stays listed,
  // greyed, with its install command. Names and commands are drawn as text only.
  async function loadAgents() {
    const asked = store.agentsWanted(state);
    const got = await ui.quietCall("agents");
    if (store.agentsArrived(state, got, asked)) renderAgents();
  }

  function renderAgents() {
    const select = byId("new-agent");
    const keep = select.value;
    select.replaceChildren(...state.agents.map((a) => el("option", {
      value: a.name, text: store.agentLabel(a), title: a.command || "the builtin loop",
      class: a.available ? "" : "unavailable", "data-available": String(a.available),
    })));
    select.value = state.agents.some((a) => a.name === keep) ? keep : "builtin";
    showAgentNote();
  }

  // A pick that cannot run says so (and how to install it) before anything is created.
  function showAgentNote() {
    const note = byId("new-agent-note");
    const problem = store.agentProblem(state, byId("new-agent").value);
    note.textContent = problem || "";
    note.hidden = !problem;
    return problem;
  }

  async function createSession(event) {
    event.preventDefault();
    ui.clearError();
    const form = byId("new-session-form");
    const f = form.elements;
    const formError = byId("new-session-error");
    formError.hidden = true;
    byId("new-worktree-error").hidden = true;
    if (showAgentNote()) {
      f.agent.focus(); // not created: it would fail at once
      return;
    }
    const servers = [...document.querySelectorAll("[data-testid=saved-mcp] input:checked")].map((box) => ({ name: box.dataset.name, target: box.dataset.target }));
    const typed = { name: f.mcpName.value.trim(), target: f.mcpTarget.value.trim() };
    if (typed.name || typed.target) {
      servers.push(typed);
      if (f.mcpSave.checked && !(await ui.call("save_mcp_server", typed.name, typed.target))) return;
    }
    const worktree = store.worktreeParam(f.worktree.checked, f.branch.value, f.base.value);
    const summary = await ui.ask("new_session", f.cwd.value.trim(), f.mode.value, f.backend.value, f.title.value, servers, f.agent.value || "builtin", worktree);
    if (!summary || summary.error) {
      const e = (summary && summary.error) || { title: "Error", message: "No answer" };
      // A refusal about the worktree (a taken branch, a missing base, not a repository)
      // is said next to its fields, the form kept as it is.
      const field = worktree ? store.worktreeField(e.message) : null;
      const where = field ? byId("new-worktree-error") : formError;
      where.textContent = `${e.title}: ${e.message}`;
      where.hidden = false;
      ({ branch: f.branch, base: f.base, worktree: f.worktree }[field] || f.cwd).focus();
      return;
    }
    store.addRecent(state, summary.cwd);
    renderRecent();
    form.hidden = true;
    f.title.value = "";
    f.mcpName.value = f.mcpTarget.value = "";
    f.mcpSave.checked = false;
    f.agent.value = "builtin"; // an external agent is picked each time, not carried over
    f.worktree.checked = false; // so is a worktree, and its branch (a branch is made once)
    f.branch.value = f.base.value = "";
    showWorktreeOptions();
    showAgentNote();
    ui.updateSession(summary);
    await ui.select(summary.sessionId);
    // To the text box, unless an approval that came while the transcript loaded has it.
    if (!document.activeElement.closest("[data-testid=approval-card]")) byId("prompt-input").focus();
  }

  function showWorktreeOptions() {
    const on = byId("new-worktree").checked;
    byId("new-worktree-options").hidden = !on;
    byId("new-worktree").setAttribute("aria-expanded", String(on));
    if (!on) byId("new-worktree-error").hidden = true;
  }

  // ---- rename, delete ----------------------------------------------------------------------

  function startRename() {
    const s = store.selected(state);
    const title = $(".d-title");
    if (!s || title.querySelector("input")) return;
    const input = el("input", { type: "text", value: s.title, "data-testid": "rename-input", "aria-label": "Session title" });
    title.replaceChildren(input);
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const text = input.value.trim();
      if (save && text && text !== s.title) {
        const fresh = await ui.call("rename", s.sessionId, text);
        if (fresh) ui.updateSession(fresh);
      }
      ui.renderDetails();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); finish(true); }
      else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
  }

  function askDelete() {
    const s = store.selected(state);
    const live = Boolean(s && s.live);
    byId("confirm-delete-text").textContent = live
      ? "This session is live. Close it and delete it with its whole transcript? This cannot be undone."
      : "Delete this session and its whole transcript? This cannot be undone.";
    byId("confirm-delete").textContent = live ? "Close and delete" : "Delete";
    byId("confirm-delete-box").hidden = false;
    byId("cancel-delete").focus();
  }

  async function confirmDelete() {
    ui.clearError();
    const sessionId = state.selected;
    byId("confirm-delete-box").hidden = true;
    if (!sessionId) return;
    const s = state.sessions.get(sessionId);
    if (s && s.live) {
      const closed = await ui.call("close", sessionId);
      if (!closed) return;
      ui.updateSession(closed);
    }
    if (!(await ui.call("delete", sessionId))) return;
    store.removed(state, sessionId);
    ui.renderSidebar();
    ui.renderDetails();
  }

  // Esc closes the innermost open thing: the quick switch, the form, a confirmation.
  // False when none of them is open.
  function closeInnermost() {
    if (!byId("quick-switch").hidden) closeQuickSwitch();
    else if (!byId("new-session-form").hidden) closeNewForm();
    else if (!byId("branch-view").hidden) ui.closeBranch();
    else if (!byId("confirm-delete-box").hidden) {
      byId("confirm-delete-box").hidden = true;
      byId("delete-session").focus();
    } else return false;
    return true;
  }

  function wire() {
    const form = byId("new-session-form");
    byId("new-session").addEventListener("click", () => (form.hidden ? openNewForm() : closeNewForm()));
    byId("cancel-new").addEventListener("click", closeNewForm);
    byId("browse-folder").addEventListener("click", browseFolder);
    byId("new-agent").addEventListener("change", showAgentNote);
    byId("new-worktree").addEventListener("change", showWorktreeOptions);
    byId("quick-input").addEventListener("input", renderQuick);
    byId("quick-input").addEventListener("keydown", onQuickKey);
    byId("quick-input").addEventListener("blur", () => setTimeout(() => {
      if (!byId("quick-switch").contains(document.activeElement)) byId("quick-switch").hidden = true;
    }, 0));
    form.addEventListener("submit", createSession);
    $(".d-title").addEventListener("dblclick", startRename);
    $(".d-title").addEventListener("keydown", (e) => { if (e.key === "F2" || e.key === "Enter") { e.preventDefault(); startRename(); } });
    byId("delete-session").addEventListener("click", askDelete);
    byId("cancel-delete").addEventListener("click", () => (byId("confirm-delete-box").hidden = true));
    byId("confirm-delete").addEventListener("click", confirmDelete);
  }

  return { openQuickSwitch, openNewForm, renderRecent, closeInnermost, wireDialogs: wire };
};
