// The page: a disposable view over the sidecar. It keeps nothing that it cannot fetch
// again: on load it asks (through the js_api bridge) for the session list, statuses and
// transcripts; afterwards the host pushes notifications into `window.app.onPush`.
// Streamed text and tool calls are drawn in a "live" area; when a turn ends the stored
// transcript tail is fetched and replaces it, so the page always converges on the store.
// Diffs are drawn by diff.js; per-turn changes and the Rewind menu by turns.js.
"use strict";

(() => {
  const PAGE = 50;
  const SIDEBAR_PAGE = 100; // sidebar items drawn per page
  const TAIL = 200;
  const $ = (sel, root = document) => root.querySelector(sel);
  const byId = (testid, root = document) => $(`[data-testid="${testid}"]`, root);

  const state = {
    info: null,
    sessions: new Map(), // sessionId -> summary, in list order (newest first)
    learnt: 0, // counts the session summaries the page has learnt
    learntAt: new Map(), // sessionId -> `learnt` when its latest summary came
    deleted: new Set(), // sessions deleted from this page (for good: ids are never reused)
    selected: null,
    transcript: null, // {sessionId, messages, offset, end, loaded, tail: Promise}
    started: false,
    booting: true, // pushes are queued until the first full load is done
    queued: [],
    drafts: {}, // sessionId -> text not sent yet (kept on the Python side too)
    scroll: {}, // sessionId -> scrollTop, or -1 for "at the end"
    turnStarted: new Map(), // sessionId -> when its running turn started (ms)
    lastPrompt: new Map(), // sessionId -> the last prompt sent from this page (Retry)
    orphans: [],
    lastFocus: null, // data-testid of the last focused control
    filterIds: null, // a search's (or the archived view's) sessions, else null: all
    sidebarLimit: SIDEBAR_PAGE, // how many sidebar items are drawn (grows a page at a time)
    groupByProject: false,
    recent: [], // recently used working directories (newest first)
    theme: "system",
    config: new Map(), // sessionId -> its ACP config options (null while being fetched)
    context: new Map(), // sessionId -> {used, size}: the last usage_update // tool_call_updates for cards not drawn yet (see restoreLive)
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

  // ---- rendered HTML -----------------------------------------------------------------

  // Agent text and command output arrive as HTML made and sanitised on the Python side
  // (desktop/render.py: Markdown through nh3, output as SGR spans of escaped text). The
  // page only inserts it and adds what needs the DOM: truecolour values (CSP forbids
  // inline styles in markup) and the code blocks' Copy buttons.
  function fragment(html) {
    const t = document.createElement("template");
    t.innerHTML = html;
    for (const span of t.content.querySelectorAll("[data-fg], [data-bg]")) {
      if (span.dataset.fg) span.style.color = span.dataset.fg;
      if (span.dataset.bg) span.style.backgroundColor = span.dataset.bg;
    }
    return t.content;
  }

  function markdownNode(html, props = {}) {
    const node = el("div", props);
    node.append(fragment(html));
    for (const pre of node.querySelectorAll("pre")) {
      const wrap = el("div", { class: "code-block" });
      pre.replaceWith(wrap);
      const copy = el("button", { type: "button", class: "copy-btn small ghost", "data-testid": "copy-code", "aria-label": "Copy code", text: "Copy" });
      copy.addEventListener("click", async () => {
        const text = pre.innerText;
        let ok = false;
        try {
          await navigator.clipboard.writeText(text);
          ok = true;
        } catch (err) {
          ok = Boolean(await quietCall("copy_text", text));
        }
        copy.textContent = ok ? "Copied" : "Not copied";
        setTimeout(() => (copy.textContent = "Copy"), 1500);
      });
      wrap.append(copy, pre);
    }
    return node;
  }

  // Links in agent text open in the system browser (the bridge checks the scheme); the
  // app itself never navigates.
  function onLinkClick(e) {
    const a = e.target && e.target.closest ? e.target.closest("a[href]") : null;
    if (!a) return;
    e.preventDefault();
    e.stopPropagation();
    if (e.type === "click") call("open_link", a.getAttribute("href"));
  }

  function tokens(n) {
    n = Number(n) || 0;
    return n >= 10000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
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

  // `cause` ("session:ID", "sidecar") lets the banner clear itself once that is over.
  function showError(error, cause = "") {
    const provider = byId("provider-banner");
    const known = !provider.hidden && $(".banner-text", provider).textContent;
    if (known && String(error.message || "").includes(known)) return; // said once, at the top
    const banner = byId("error-banner");
    $(".banner-title", banner).textContent = `${error.title || "Error"}:`;
    $(".banner-text", banner).textContent = error.message || String(error.code);
    banner.dataset.code = String(error.code);
    banner.dataset.cause = cause;
    banner.hidden = false;
  }

  function clearError(cause) {
    const banner = byId("error-banner");
    if (cause === undefined || banner.dataset.cause === cause) banner.hidden = true;
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
    banner.dataset.pid = String((state.info && state.info.sidecar && state.info.sidecar.pid) || "");
    $(".banner-text", banner).textContent = text;
    banner.hidden = false;
  }

  // A problem the sidecar found with its model provider at start (no API key, ...): said
  // once, at the top, until it is gone (a restarted sidecar that no longer reports it).
  function showProvider(problem) {
    const banner = byId("provider-banner");
    $(".banner-text", banner).textContent = problem || "";
    banner.hidden = !problem;
  }

  function renderSidecar(info) {
    const pill = byId("sidecar-state");
    pill.dataset.state = info.state;
    pill.dataset.pid = String(info.pid || "");
    pill.textContent = `sidecar: ${info.state}${info.pid ? ` · pid ${info.pid}` : ""}`;
  }

  // ---- sidebar -----------------------------------------------------------------------

  // The sidebar draws a page of items (SIDEBAR_PAGE more each time its end scrolls into
  // view), so thousands of sessions cost what one page costs; a change to one session
  // moves or redraws its item alone (patchItem).
  function renderSidebar() {
    const list = byId("session-list");
    const focusedId = document.activeElement && document.activeElement.closest && document.activeElement.closest("[data-testid=session-item]");
    const keep = focusedId ? focusedId.dataset.sessionId : null;
    const all = visibleSessions();
    const shown = all.slice(0, state.sidebarLimit);
    const nodes = state.groupByProject ? groupedItems(shown, all) : shown.map(sessionItem);
    if (all.length > shown.length) nodes.push(moreItem(all.length - shown.length));
    list.replaceChildren(...nodes);
    list.dataset.total = String(all.length);
    if (!list.querySelector("[tabindex='0']") && list.querySelector("[data-testid=session-item]")) list.querySelector("[data-testid=session-item]").tabIndex = 0;
    if (keep) {
      // Focus stays in the list, on the selected item (arrow keys move the selection).
      const again = list.querySelector(`[data-session-id="${CSS.escape(state.selected || keep)}"]`) || list.querySelector(`[data-session-id="${CSS.escape(keep)}"]`);
      if (again) again.focus();
    }
    $(".sidebar-empty").hidden = state.sessions.size > 0;
  }

  // Grouped by working directory: the group with the latest activity first; the page
  // limit counts sessions, and each group's header counts all of its sessions.
  function groupedItems(shown, all) {
    const counts = new Map();
    for (const s of all) counts.set(s.cwd, (counts.get(s.cwd) || 0) + 1);
    const groups = new Map();
    for (const s of shown) {
      if (!groups.has(s.cwd)) groups.set(s.cwd, []);
      groups.get(s.cwd).push(s);
    }
    const nodes = [];
    for (const [cwd, members] of groups) {
      nodes.push(
        el(
          "li",
          { class: "group-header", "data-testid": "session-group", "data-cwd": cwd, role: "presentation", title: cwd },
          el("span", { class: "group-name", text: shortPath(cwd, 30) }),
          el("span", { class: "group-count", text: String(counts.get(cwd)) }),
        ),
      );
      nodes.push(...members.map(sessionItem));
    }
    return nodes;
  }

  function moreItem(left) {
    const more = el("li", { class: "sidebar-more", "data-testid": "sidebar-more", role: "presentation" });
    more.append(el("button", { type: "button", class: "ghost small", text: `${left} more…`, "aria-label": `Show ${Math.min(left, SIDEBAR_PAGE)} more sessions` }));
    more.firstChild.addEventListener("click", showMore);
    observeEnd(more);
    return more;
  }

  function showMore() {
    const list = byId("session-list");
    const top = list.scrollTop;
    state.sidebarLimit += SIDEBAR_PAGE;
    renderSidebar();
    list.scrollTop = top;
  }

  // The next page comes as the end of the list scrolls into view.
  let sidebarObserver = null;
  function observeEnd(node) {
    if (!sidebarObserver && "IntersectionObserver" in window) {
      const grow = (seen) => seen.some((e) => e.isIntersecting) && showMore();
      sidebarObserver = new IntersectionObserver(grow, { root: byId("session-list"), rootMargin: "200px" });
    }
    if (sidebarObserver) sidebarObserver.observe(node);
  }

  // One session changed: redraw its item where it is, or move it to its new place in
  // the activity order; false when only a whole redraw is right (grouped, a filtered
  // view, archived or not, or never drawn and now among the drawn).
  function patchItem(s, before) {
    if (!before || state.groupByProject || state.filterIds || Boolean(s.archived) !== Boolean(before.archived)) return false;
    const list = byId("session-list");
    const old = list.querySelector(`[data-testid=session-item][data-session-id="${CSS.escape(s.sessionId)}"]`);
    const items = [...list.querySelectorAll("[data-testid=session-item]")];
    const last = items.length ? state.sessions.get(items[items.length - 1].dataset.sessionId) : null;
    const activity = String(s.updatedAt || "");
    const drawnMore = list.querySelector("[data-testid=sidebar-more]");
    if (!old && drawnMore && last && activity < String(last.updatedAt || "")) return true; // below the page: drawn when reached
    if (!old && !drawnMore) return false;
    const focused = old && document.activeElement === old;
    const node = sessionItem(s);
    const next = items.find((i) => i !== old && String((state.sessions.get(i.dataset.sessionId) || {}).updatedAt || "") <= activity);
    if (old) old.remove();
    list.insertBefore(node, next || drawnMore || null);
    if (focused) node.focus();
    return true;
  }

  // The sidebar: by last activity; a search or the archived view shows the sidecar's answer.
  function visibleSessions() {
    const byActivity = (a, b) => String(b.updatedAt || "").localeCompare(String(a.updatedAt || ""));
    if (state.filterIds) return [...state.filterIds].map((id) => state.sessions.get(id)).filter(Boolean).sort(byActivity);
    return [...state.sessions.values()].filter((s) => !s.archived).sort(byActivity);
  }

  function toggleGrouping() {
    state.groupByProject = byId("group-by-project").checked;
    renderSidebar();
  }

  let searchTimer = null;
  function onSearchInput() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 250);
  }

  async function runSearch() {
    const query = byId("session-search").value.trim();
    const archived = byId("show-archived").checked;
    if (!query && !archived) {
      state.filterIds = null;
      state.sidebarLimit = SIDEBAR_PAGE;
      renderSidebar();
      return;
    }
    const found = await call("list_sessions", query, archived);
    if (!found || byId("session-search").value.trim() !== query || byId("show-archived").checked !== archived) return;
    for (const s of found) state.sessions.set(s.sessionId, { ...(state.sessions.get(s.sessionId) || {}), ...s });
    state.filterIds = new Set(found.map((s) => s.sessionId));
    state.sidebarLimit = SIDEBAR_PAGE;
    renderSidebar();
    byId("session-list").dataset.query = query;
  }

  function relTime(iso) {
    const t = Date.parse(iso);
    if (!t) return "";
    const s = Math.max(0, (Date.now() - t) / 1000);
    if (s < 60) return "just now";
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ago`;
    if (s < 86400 * 7) return `${Math.floor(s / 86400)} d ago`;
    return new Date(t).toLocaleDateString();
  }

  async function toggleArchive() {
    const s = state.sessions.get(state.selected);
    if (!s) return;
    const fresh = await call("archive", s.sessionId, !s.archived);
    if (!fresh) return;
    updateSession(fresh);
    showNotice(fresh.archived ? `Archived “${fresh.title}”: hidden from the list (tick “archived” to see it).` : `“${fresh.title}” is back in the list.`);
    if (state.filterIds) runSearch();
  }

  async function exportSession(format) {
    const s = state.sessions.get(state.selected);
    if (!s) return;
    const done = await call("export_session", s.sessionId, format);
    if (!done || done.cancelled) return;
    showNotice(`Exported ${done.entries} entries to ${done.path}`);
  }

  async function importSession() {
    const summary = await call("import_session");
    if (!summary || summary.cancelled) return;
    updateSession(summary);
    await select(summary.sessionId);
    showNotice(`Imported “${summary.title}” as a new session (closed: Resume to continue it).`);
  }

  function startRename() {
    const s = state.sessions.get(state.selected);
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
        const fresh = await call("rename", s.sessionId, text);
        if (fresh) updateSession(fresh);
      }
      renderDetails();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); finish(true); }
      else if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); finish(false); }
    });
    input.addEventListener("blur", () => finish(true));
  }

  // Arrows move through the sidebar (and select); Home/End jump; Enter selects.
  function onItemKey(e, sessionId) {
    let items = [...document.querySelectorAll("[data-testid=session-item]")];
    const at = items.findIndex((i) => i.dataset.sessionId === sessionId);
    if ((e.key === "End" || (e.key === "ArrowDown" && at === items.length - 1)) && byId("sidebar-more")) {
      // The next page (End: all of them), then move into it.
      state.sidebarLimit = e.key === "End" ? state.sessions.size : state.sidebarLimit + SIDEBAR_PAGE;
      renderSidebar();
      items = [...document.querySelectorAll("[data-testid=session-item]")];
    }
    let to = null;
    if (e.key === "ArrowDown") to = Math.min(items.length - 1, at + 1);
    else if (e.key === "ArrowUp") to = Math.max(0, at - 1);
    else if (e.key === "Home") to = 0;
    else if (e.key === "End") to = items.length - 1;
    else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      select(sessionId).then(() => byId("prompt-input").focus());
      return;
    } else return;
    e.preventDefault();
    const target = items[to];
    if (!target) return;
    select(target.dataset.sessionId, false).then(() => {
      const again = document.querySelector(`[data-testid=session-item][data-session-id="${CSS.escape(target.dataset.sessionId)}"]`);
      if (again) again.focus();
    });
  }

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

  function quickMatches() {
    const words = byId("quick-input").value.toLowerCase().split(/\s+/).filter(Boolean);
    return [...state.sessions.values()].filter((s) => {
      const hay = `${s.title} ${s.cwd} ${s.sessionId}`.toLowerCase();
      return words.every((w) => hay.includes(w));
    }).slice(0, 20);
  }

  function renderQuick() {
    const list = byId("quick-list");
    const matches = quickMatches();
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
    if (sessionId) await select(sessionId);
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

  // ---- theme and narrow windows ------------------------------------------------------------

  const THEMES = ["system", "light", "dark"];
  const THEME_LABELS = { system: "◐ System", light: "☀ Light", dark: "☾ Dark" };

  function applyTheme(theme) {
    state.theme = THEMES.includes(theme) ? theme : "system";
    if (state.theme === "system") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = state.theme;
    const button = byId("theme-toggle");
    button.textContent = THEME_LABELS[state.theme];
    button.setAttribute("aria-label", `Colour theme: ${state.theme}`);
  }

  async function cycleTheme() {
    const next = THEMES[(THEMES.indexOf(state.theme) + 1) % THEMES.length];
    applyTheme(next);
    await quietCall("set_theme", next);
  }

  function toggleSidebar(open) {
    const show = open === undefined ? !document.body.classList.contains("sidebar-open") : open;
    document.body.classList.toggle("sidebar-open", show);
    byId("sidebar-toggle").setAttribute("aria-expanded", String(show));
  }

  function announce(text) {
    const node = byId("announcer");
    node.textContent = "";
    setTimeout(() => (node.textContent = text), 50);
  }

  // ---- the new-session form ---------------------------------------------------------------

  function openNewForm() {
    const form = byId("new-session-form");
    toggleSidebar(true);
    form.hidden = false;
    loadSavedServers();
    if (!form.elements.cwd.value) form.elements.cwd.value = (state.recent[0] || state.info.defaultCwd);
    byId("new-session-error").hidden = true;
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
    const got = await call("pick_folder", form.elements.cwd.value);
    if (got && got.folder) form.elements.cwd.value = got.folder;
    form.elements.cwd.focus();
  }

  function sessionItem(s) {
    const status = el("span", { "data-testid": "session-status" });
    badge(status, s.awaitingPermission ? "waiting" : s.status);
    if (s.awaitingPermission) status.textContent = "waiting for approval";
    const selected = s.sessionId === state.selected;
    const item = el(
      "li",
      {
        class: "session-item", "data-testid": "session-item", "data-session-id": s.sessionId,
        role: "option", "aria-selected": String(selected), tabindex: selected || (!state.selected && !state.sessions.size) ? "0" : "-1",
        title: `${s.title}\n${s.cwd}`, "aria-label": `${s.title}, ${s.awaitingPermission ? "waiting for approval" : s.status}`,
      },
      el("div", { class: "item-row" }, el("span", { class: "item-title", text: s.title, title: s.title }), status),
      el(
        "div",
        { class: "item-row" },
        el("span", { class: "item-cwd", text: shortPath(s.cwd), title: s.cwd }),
        s.interrupted
          ? el("span", { class: "interrupted", "data-testid": "session-interrupted", text: "⚠ interrupted" })
          : null,
        s.archived ? el("span", { class: "item-gen", "data-testid": "session-archived", text: "archived" }) : null,
        el("span", { class: "item-time", "data-testid": "session-time", text: relTime(s.updatedAt), title: s.updatedAt }),
        el("span", { class: "item-gen", "data-testid": "session-generation", text: `gen ${s.generation}` }),
      ),
    );
    item.classList.toggle("selected", selected);
    item.addEventListener("click", () => select(s.sessionId));
    item.addEventListener("keydown", (e) => onItemKey(e, s.sessionId));
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
    const fresh = { ...(known || {}), ...summary };
    state.sessions.set(summary.sessionId, fresh);
    state.learntAt.set(summary.sessionId, ++state.learnt);
    if (!patchItem(fresh, known)) renderSidebar();
    if (summary.sessionId === state.selected) renderDetails();
  }

  // ---- details -----------------------------------------------------------------------

  function renderDetails() {
    const s = state.sessions.get(state.selected);
    $(".placeholder").hidden = Boolean(s);
    $(".session-view").hidden = !s;
    if (!s) return;
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
    byId("effective-sandbox").textContent =
      s.sandboxProblem ? `⚠ unavailable: ${s.sandboxProblem}` : s.effectiveSandbox !== s.sandbox ? `(runs ${s.effectiveSandbox} in ${s.mode} mode)` : "";
    const lastError = byId("detail-error");
    lastError.hidden = !s.lastError;
    lastError.textContent = s.lastError ? `Last error: ${s.lastError}` : "";
    byId("close-session").disabled = !s.live;
    byId("resume-session").disabled = s.live && s.status !== "error";
    byId("error-actions").hidden = s.status !== "error";
    byId("detail-model").textContent = s.model || "—";
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
    turns.updateButtons();
    updateWorking();
  }

  // The model picker: the `model` config option's choices, as the sidecar offers them
  // (fetched once per session from the host, then kept by config_option_update).
  function renderModels(s, settable) {
    const select = byId("model-select");
    const options = state.config.get(s.sessionId);
    if (options === undefined && s.live) {
      state.config.set(s.sessionId, null); // asked for; null until the host answers
      quietCall("config_options", s.sessionId).then((got) => {
        if (state.config.get(s.sessionId) === null) state.config.set(s.sessionId, got || []);
        if (s.sessionId === state.selected) renderDetails();
      });
    }
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
        nodes.push(withMessageActions(turns.userMessage(m), m));
      } else if (m.type === "assistant") {
        if (m.text && m.html) nodes.push(markdownNode(m.html, { class: "msg agent md", "data-testid": "agent-message" }));
        else if (m.text) nodes.push(el("div", { class: "msg agent", "data-testid": "agent-message", text: m.text }));
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
        if (block.dataset.kind === "execute") finishTool(block, m.text, ...exitStatus(m.exitCode, m.exitCode === null || m.exitCode === undefined), m.html);
        else finishTool(block, m.text, ...storedStatus(m), m.html);
        if (m.outputTotal && !m.outputShown) offerFullOutput(block, state.transcript && state.transcript.sessionId, m.toolCallId);
      } else if (m.type === "marker" && m.text) {
        const text = m.kind === "interrupted" ? `⚠ ${m.text}` : m.text;
        nodes.push(el("div", { class: "note", "data-testid": `note-${m.kind}`, text }));
      }
    }
    endTurn();
    return nodes;
  }

  // Retry, edit-and-resend and fork on each of the user's messages.
  function withMessageActions(node, m) {
    if (!m.turn || !node.classList.contains("user-turn")) return node;
    const act = (testid, label, title, run) =>
      el("button", { type: "button", class: "ghost small msg-action", "data-testid": testid, text: label, title, "aria-label": title, onclick: run });
    node.append(
      el(
        "div",
        { class: "msg-actions", role: "group", "aria-label": `Actions for turn ${m.turn}` },
        act("msg-retry", "Retry", "Send this message again", () => resendText(m.text)),
        act("msg-edit", "Edit", "Edit and resend: the conversation goes back to before this message", () => editAndResend(m)),
        act("msg-fork", "Fork", "Fork: a new session with the conversation before this message", () => forkAt(m)),
      ),
    );
    return node;
  }

  async function resendText(text) {
    const input = byId("prompt-input");
    input.value = text;
    await send();
  }

  async function editAndResend(m) {
    const sessionId = state.selected;
    if (!sessionId) return;
    const done = await call("rewind", sessionId, m.turn, "conversation", false, false);
    if (!done) return;
    await afterRewind(sessionId);
    const input = byId("prompt-input");
    input.value = m.text;
    setDraft(sessionId, m.text);
    input.focus();
    showNotice(`The conversation is back to before turn ${m.turn}: edit the message and send it.`);
  }

  async function forkAt(m) {
    const from = state.selected;
    if (!from) return;
    const summary = await call("fork", from, m.turn);
    if (!summary) return;
    updateSession(summary);
    state.drafts[summary.sessionId] = m.text;
    quietCall("save_draft", summary.sessionId, m.text);
    await select(summary.sessionId);
    showNotice(`Forked before turn ${m.turn} into “${summary.title}”: edit the message and send it there.`);
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

  // `html` (rendered output) replaces the text when given; `keep` leaves the streamed
  // output in place (it has the colours the stored plain text lost).
  function finishTool(block, output, label, ok, html, keep) {
    const out = $(".tool-out", block);
    if (!keep) {
      if (html) out.replaceChildren(fragment(html));
      else out.textContent = output || "";
    }
    const status = $(".tool-status", block);
    status.className = `tool-status ${ok ? "ok" : "fail"}`;
    status.textContent = label;
    collapseLong(block, keep ? out.textContent : html || output || "");
  }

  const COLLAPSE_LINES = 30;

  // A long card shows its start; "Show all" unfolds it (and folds it back).
  function collapseLong(block, text) {
    const old = $(".show-all", block);
    if (old) old.remove();
    const lines = (text.match(/\n/g) || []).length + (text && !text.endsWith("\n") ? 1 : 0);
    const out = $(".tool-out", block);
    out.classList.remove("expanded");
    if (lines <= COLLAPSE_LINES) {
      out.classList.remove("collapsed");
      return;
    }
    out.classList.add("collapsed");
    const button = el("button", { type: "button", class: "show-all small ghost", "data-testid": "show-all", "aria-expanded": "false", text: `Show all (${lines} lines)` });
    button.addEventListener("click", () => {
      const collapsed = out.classList.toggle("collapsed");
      out.classList.toggle("expanded", !collapsed);
      button.setAttribute("aria-expanded", String(!collapsed));
      button.textContent = collapsed ? `Show all (${lines} lines)` : "Show less";
    });
    out.after(button);
  }

  // The transcript keeps a command's output up to the model's cap; the sidecar spools all
  // of it: "Full output" pages through that, in colour.
  function offerFullOutput(block, sessionId, toolCallId) {
    if (!sessionId || !toolCallId || $(".full-output", block)) return;
    const button = el("button", { type: "button", class: "full-output small ghost", "data-testid": "full-output", text: "Full output" });
    let next = 0;
    button.addEventListener("click", async () => {
      const page = await call("output", sessionId, toolCallId, next);
      if (!page) return;
      const out = $(".tool-out", block);
      if (next === 0) out.replaceChildren();
      out.append(fragment(page.html));
      out.classList.remove("collapsed");
      const all = $(".show-all", block);
      if (all) all.remove();
      next = page.next;
      if (next >= page.total) button.remove();
      else button.textContent = `More output (${Math.round((page.total - next) / 1024)} KiB left)`;
    });
    $(".tool-head", block).append(button);
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
    dropStoredTwins();
    turns.fillSlots($(".stored", box));
    turns.placeConfirm(confirming); // a rewind's confirmation, drawn again, keeps its focus
    byId("load-older").hidden = t.offset === 0;
    $(".transcript-empty", box).hidden = t.messages.length > 0 || $(".live", box).childElementCount > 0;
    box.scrollTop = keepScroll ? box.scrollHeight - fromBottom : box.scrollHeight;
  }

  // The transcript shown is one page of the store plus, below it, what arrived live since
  // the page was asked for. The live part is cleared before asking (not after), and a turn
  // that ends while the page loads queues its tail fetch behind the load (`t.tail`), so a
  // message stored meanwhile is never dropped and an approval card drawn meanwhile stays.
  async function loadTranscript(sessionId) {
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
    };
    state.transcript = t;
    state.orphans = [];
    $(".live").replaceChildren();
    renderPermissions();
    t.tail = call("messages", sessionId, null, PAGE).then((page) => {
      if (state.transcript !== t) return;
      if (!page) {
        state.transcript = null; // nothing to append to; the error is shown
        return;
      }
      Object.assign(t, { messages: page.messages, offset: page.offset, end: page.offset + page.messages.length, loaded: true });
    });
    await t.tail;
    if (!t.loaded || state.transcript !== t) return;
    renderTranscript(false);
    const want = state.scroll[sessionId];
    if (typeof want === "number" && want >= 0) byId("transcript").scrollTop = want;
    await restoreLive(sessionId);
  }

  // A call drawn live (its diff numbered, its output streaming) may be in the stored page
  // too while its turn runs: the live card stays, the stored copy goes.
  function dropStoredTwins() {
    for (const card of document.querySelectorAll(".live .tool[data-tool-call-id]")) {
      const twin = $(`.stored .tool[data-tool-call-id="${CSS.escape(card.dataset.toolCallId)}"]`);
      if (twin) twin.remove();
    }
  }

  // Streamed agent text is drawn as Markdown too, a few times a second (rendered by the
  // host like the stored copy); the stored copy replaces it when the turn ends.
  function renderStreaming(node) {
    if (node._timer) return;
    node._timer = setTimeout(async () => {
      node._timer = null;
      const raw = node._raw || node.textContent;
      const got = await quietCall("markdown", raw);
      if (!got || !node.isConnected || !node.classList.contains("streaming")) return;
      follow(() => {
        node.replaceChildren(markdownNode(got.html));
        node.classList.add("md");
        node._rendered = true;
      });
      if ((node._raw || "") !== raw) renderStreaming(node);
    }, 300);
  }

  // A page that loads while a command runs (Rebuild UI, a switch back) asks the host for
  // the running calls' output so far; chunks pushed meanwhile carry a sequence number, so
  // nothing is drawn twice or missed.
  async function restoreLive(sessionId) {
    const s = state.sessions.get(sessionId);
    if (!s || s.status !== "running") return;
    const calls = (await quietCall("live_calls", sessionId)) || [];
    if (state.selected !== sessionId) return;
    for (const c of calls) {
      let block = toolCard(c.toolCallId);
      if (!block) {
        block = toolBlock(c.toolCallId, c.command || c.title, c.kind || "execute");
        liveAppend(block);
      }
      follow(() => $(".tool-out", block).replaceChildren(fragment(c.html)));
      block.dataset.seq = String(c.seq);
      block.dataset.streamed = "1";
    }
    const early = state.orphans.splice(0);
    for (const params of early) onUpdate(params);
  }

  function toolCard(toolCallId) {
    const sel = `.tool[data-tool-call-id="${CSS.escape(toolCallId)}"]`;
    return $(`.live ${sel}`) || $(`.stored ${sel}`);
  }

  // Keep the newest output in view, unless the user scrolled up to read.
  function follow(change) {
    const box = byId("transcript");
    const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
    change();
    if (atBottom) box.scrollTop = box.scrollHeight;
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
  // Nothing new and nothing live: nothing to redraw. A reader scrolled up stays put.
  function refetchTail() {
    const t = state.transcript;
    if (!t) return;
    t.tail = t.tail.then(async () => {
      let added = 0;
      for (;;) {
        const page = await quietCall("messages", t.sessionId, t.end, TAIL);
        if (!page || state.transcript !== t) return;
        t.messages = t.messages.concat(page.messages);
        t.end += page.messages.length;
        added += page.messages.length;
        if (page.messages.length < TAIL) break;
      }
      const live = $(".live");
      if (!added && !live.childElementCount) return;
      const box = byId("transcript");
      const top = box.scrollTop;
      const atBottom = box.scrollHeight - top - box.clientHeight < 80;
      live.replaceChildren();
      renderTranscript(false);
      if (!atBottom) box.scrollTop = top;
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
    if (params.update && params.update.sessionUpdate === "usage_update") {
      state.context.set(params.sessionId, { used: params.update.used, size: params.update.size });
      if (params.sessionId === state.selected) renderDetails();
      return;
    }
    if (!state.transcript || params.sessionId !== state.transcript.sessionId) return;
    const u = params.update;
    const live = $(".live");
    const text = u.content && u.content.text;
    if (u.sessionUpdate === "user_message_chunk") {
      liveAppend(el("div", { class: "msg user", text }));
    } else if (u.sessionUpdate === "agent_message_chunk") {
      const last = live.lastElementChild;
      if (last && last.classList.contains("streaming")) {
        last._raw = (last._raw || last.textContent) + text;
        if (!last._rendered) follow(() => (last.textContent += text));
        renderStreaming(last);
      } else liveAppend(el("div", { class: "msg agent streaming", "data-testid": "streaming", text }));
    } else if (u.sessionUpdate === "tool_call") {
      const last = live.lastElementChild;
      if (last) last.classList.remove("streaming");
      const block = toolBlock(u.toolCallId, (u.rawInput && u.rawInput.command) || u.title, u.kind || "execute");
      showDiffs(block, u.content, false); // open in the approval card; here once written
      liveAppend(block);
    } else if (u.sessionUpdate === "tool_call_update") {
      const block = toolCard(u.toolCallId);
      if (!block) {
        // Its card is not drawn yet (a page loading mid-command): replayed once it is.
        if (state.orphans.length < 5000) state.orphans.push(params);
        return;
      }
      const meta = u._meta || {};
      const out = $(".tool-out", block);
      if (typeof meta.outputHtml === "string") {
        if ((meta.outputSeq || 0) > Number(block.dataset.seq || 0)) {
          follow(() => out.append(fragment(meta.outputHtml)));
          block.dataset.seq = String(meta.outputSeq || 0);
          block.dataset.streamed = "1";
        }
      } else if (typeof meta.output === "string") {
        follow(() => (out.textContent += meta.output));
        block.dataset.streamed = "1";
      }
      const finished = u.status === "completed" || u.status === "failed";
      if (u.content && u.content.length) {
        const output = u.content.map((c) => (c.content && c.content.text) || "").join("");
        const streamed = block.dataset.streamed === "1";
        if (finished) {
          const raw = u.rawOutput || {};
          // A command's streamed output (in colour) stays; the stored copy is plain text.
          const keep = streamed && block.dataset.kind === "execute" && out.textContent.length > 0;
          if (block.dataset.kind === "execute") finishTool(block, output, ...exitStatus(raw.exitCode, Boolean(raw.cancelled)), null, keep);
          else finishTool(block, output, u.status === "completed" ? "done" : "failed", u.status === "completed");
          showDiffs(block, u.content, true);
        } else if (!streamed) {
          follow(() => (out.textContent = output)); // the live output so far, whole
        }
      }
    } else if (u.sessionUpdate === "usage_update") {
      state.context.set(params.sessionId, { used: u.used, size: u.size });
      if (params.sessionId === state.selected) renderDetails();
    } else if (u.sessionUpdate === "config_option_update") {
      state.config.set(params.sessionId, u.configOptions || []);
      if (params.sessionId === state.selected) renderDetails();
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
    updateWorking();
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
    if (!s) {
      // Created elsewhere (another page, another client): the notification is its summary.
      if (!p.archived && !state.deleted.has(p.sessionId)) updateSession(p);
      return;
    }
    const wasRunning = s.status === "running";
    // A settled approval may have added a rule ("always"): the details show the rules.
    if (s.awaitingPermission && !p.awaitingPermission && p.sessionId === state.selected) loadRules(p.sessionId);
    if (p.status === "running") {
      if (!state.turnStarted.has(p.sessionId)) state.turnStarted.set(p.sessionId, Date.now());
    } else state.turnStarted.delete(p.sessionId);
    if (s.generation !== p.generation) state.config.delete(p.sessionId); // a new runtime: ask again
    updateSession(p); // _session/state carries the whole summary
    // A turn ended (or streamed text arrived while this page was loading): converge on the store.
    const streamed = $(".live").childElementCount > 0;
    if (state.selected === p.sessionId && p.status !== "running" && (wasRunning || streamed)) refetchTail();
    if (wasRunning && p.status !== "running") announce(p.status === "error" ? `${p.title}: the turn failed` : `${p.title}: new reply`);
    if (p.status === "error" && p.lastError) {
      const text = `${s.title}: ${p.lastError}`;
      const banner = byId("error-banner");
      // Shown once: the failed prompt's own answer may have said it already.
      if (banner.hidden || !$(".banner-text", banner).textContent.includes(p.lastError)) showError({ title: "Session error", message: text }, `session:${p.sessionId}`);
      else banner.dataset.cause = `session:${p.sessionId}`;
    } else if (p.status !== "error") clearError(`session:${p.sessionId}`);
  }

  function onHost(event, data) {
    const info = state.info.sidecar;
    if (event === "sidecar_exited") {
      info.state = "restarting";
      showSidecarBanner("warn", `The sidecar exited (code ${data.code}); restarting it…`);
    } else if (event === "sidecar_restarted") {
      Object.assign(info, { state: "running", pid: data.pid, restarts: data.restarts });
      showSidecarBanner("warn", state.info.autoResume
        ? "The sidecar restarted; sessions were closed and can be resumed. Resuming the ones that were live…"
        : "The sidecar restarted; sessions were closed and can be resumed.");
      clearError("sidecar");
      quietCall("provider_problem").then(showProvider); // the new sidecar's own say
      setTimeout(() => {
        const banner = byId("sidecar-banner");
        if (banner.dataset.pid === String(data.pid)) banner.hidden = true; // over: it runs again
      }, 10000);
      refreshAll();
    } else if (event === "sidecar_failed") {
      info.state = "failed";
      showSidecarBanner("error", `The sidecar could not be restarted: ${data.reason}`);
    } else if (event === "sidecar_started") {
      Object.assign(info, { state: "running", pid: data.pid });
      quietCall("provider_problem").then(showProvider); // the page may have loaded first
    } else if (event === "permission_requested") {
      return showPermission(data);
    } else if (event === "permission_settled") {
      state.permissions.delete(`${data.sessionId} ${data.toolCallId}`);
      updateWorking();
      return renderPermissions();
    }
    renderSidecar(info);
  }

  function handle(event) {
    if (event.type === "notification" && event.method === "_session/state") onState(event.params);
    else if (event.type === "notification" && event.method === "session/update") onUpdate(event.params);
    else if (event.type === "notification" && event.method === "_session/turn_changes") turns.onTurnChanges(event.params);
    else if (event.type === "host") onHost(event.event, event.data);
    else if (event.type === "bridge" && event.event === "auto_resumed") onAutoResumed(event.data);
    else if (event.type === "bridge" && event.event === "prompt_failed") {
      showError(event.data.error, `session:${event.data.sessionId}`);
      state.turnStarted.delete(event.data.sessionId);
      updateWorking();
    }
  }

  // Sessions that were live before (the app quit, the sidecar died) came back by themselves.
  async function onAutoResumed(data) {
    await refreshList();
    const n = data.resumed.length;
    if (!n && !data.failed.length) return;
    const title = (id) => (state.sessions.get(id) || {}).title || id;
    let text = `Resumed ${n} session${n === 1 ? "" : "s"} that ${n === 1 ? "was" : "were"} live ${data.why === "start" ? "when the app quit" : "before the sidecar restarted"}.`;
    if (data.interrupted.length) text += ` Interrupted mid-turn (the last turn did not finish): ${data.interrupted.map(title).join(", ")}.`;
    if (data.failed.length) text += ` Could not resume: ${data.failed.map((f) => `${title(f.sessionId)} (${f.error})`).join(", ")}.`;
    showNotice(text);
    const banner = byId("sidecar-banner");
    if (data.why === "sidecar") banner.hidden = true; // its cause is over
    if (state.selected && data.resumed.includes(state.selected)) loadTranscript(state.selected);
  }

  // ---- loading and actions -----------------------------------------------------------

  // The list answers as of when it was asked: a summary the page learnt while it was on
  // its way is newer, and stays; a session deleted meanwhile stays gone.
  async function refreshList() {
    const asked = state.learnt;
    const list = await call("list_sessions");
    if (!list) return;
    const newer = (id) => (state.learntAt.get(id) || 0) > asked;
    const kept = [...state.sessions.values()].filter((s) => newer(s.sessionId));
    const listed = list.filter((s) => !newer(s.sessionId) && !state.deleted.has(s.sessionId));
    state.sessions = new Map(listed.map((s) => [s.sessionId, s]));
    for (const s of kept) state.sessions.set(s.sessionId, s);
    for (const s of state.sessions.values()) {
      if (s.status === "running" && !state.turnStarted.has(s.sessionId)) state.turnStarted.set(s.sessionId, Date.parse(s.updatedAt) || Date.now());
      else if (s.status !== "running") state.turnStarted.delete(s.sessionId);
    }
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

  async function select(sessionId, focus = true) {
    if (state.selected === sessionId && state.transcript) return;
    if (state.selected && state.transcript) viewMemory(); // the scroll we leave, for coming back
    state.selected = sessionId;
    state.transcript = null;
    state.orphans = [];
    showDraft();
    if (focus) {
      byId("prompt-input").focus();
      toggleSidebar(false);
    }
    remember();
    turns.reset();
    byId("confirm-delete-box").hidden = true;
    $(".stored").replaceChildren();
    renderSidebar();
    renderDetails();
    await loadTranscript(sessionId);
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
    const formError = byId("new-session-error");
    formError.hidden = true;
    let summary = null;
    try {
      summary = await window.pywebview.api.new_session(f.cwd.value.trim(), f.mode.value, f.backend.value, f.title.value, servers);
    } catch (err) {
      summary = { error: { title: "Bridge error", message: String((err && err.message) || err) } };
    }
    if (!summary || summary.error) {
      const e = (summary && summary.error) || { title: "Error", message: "No answer" };
      formError.textContent = `${e.title}: ${e.message}`;
      formError.hidden = false;
      f.cwd.focus();
      return;
    }
    if (!state.recent.includes(summary.cwd)) state.recent.unshift(summary.cwd);
    renderRecent();
    form.hidden = true;
    f.title.value = "";
    f.mcpName.value = f.mcpTarget.value = "";
    f.mcpSave.checked = false;
    updateSession(summary);
    await select(summary.sessionId);
    // To the text box, unless an approval that came while the transcript loaded has it.
    if (!document.activeElement.closest("[data-testid=approval-card]")) byId("prompt-input").focus();
  }

  async function send(event) {
    if (event) event.preventDefault();
    clearError();
    const input = byId("prompt-input");
    const text = input.value.trim();
    const sessionId = state.selected;
    if (!text || !sessionId) return;
    input.value = ""; // at once, so typing the next message is never wiped by this answer
    setDraft(sessionId, "");
    input.focus();
    state.lastPrompt.set(sessionId, text);
    // The message shows at once; the stored copy replaces it when the turn ends.
    const pending = el("div", { class: "msg user pending", "data-testid": "pending-user", text });
    liveAppend(pending);
    byId("transcript").scrollTop = byId("transcript").scrollHeight;
    markRunning(sessionId);
    const result = await call("prompt", sessionId, text);
    if (!result) {
      pending.remove(); // refused: give the text back, to the session it was for
      const now = state.sessions.get(sessionId);
      if (!now || now.status !== "running") state.turnStarted.delete(sessionId); // not "busy"
      if (state.selected === sessionId && !input.value) {
        input.value = text;
        setDraft(sessionId, text);
      } else if (!state.drafts[sessionId]) setDraft(sessionId, text);
      updateWorking();
    }
  }

  // ---- drafts, and what a rebuilt page comes back to ------------------------------------

  // Drafts are kept per session on the Python side (a rebuilt page starts empty).
  let draftTimer = null;
  function setDraft(sessionId, text) {
    if (!sessionId) return;
    if (text) state.drafts[sessionId] = text;
    else delete state.drafts[sessionId];
    clearTimeout(draftTimer);
    draftTimer = null;
    quietCall("save_draft", sessionId, text);
  }

  function onDraftInput() {
    const sessionId = state.selected;
    if (!sessionId) return;
    const text = byId("prompt-input").value;
    if (text) state.drafts[sessionId] = text;
    else delete state.drafts[sessionId];
    clearTimeout(draftTimer);
    draftTimer = setTimeout(() => quietCall("save_draft", sessionId, text), 250);
  }

  function showDraft() {
    byId("prompt-input").value = (state.selected && state.drafts[state.selected]) || "";
  }

  // The view a rebuilt page restores: selection, each transcript's scroll, the focus.
  function viewMemory() {
    const box = byId("transcript");
    if (state.selected && state.transcript && state.transcript.loaded) {
      // (a transcript still loading has no scroll position of its own to remember)
      const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 80;
      state.scroll[state.selected] = atBottom ? -1 : box.scrollTop;
    }
    return [state.selected, state.scroll, state.lastFocus];
  }

  let rememberTimer = null;
  function remember(now) {
    clearTimeout(rememberTimer);
    if (now) return quietCall("remember", ...viewMemory());
    rememberTimer = setTimeout(() => quietCall("remember", ...viewMemory()), 300);
    return null;
  }

  async function rebuild() {
    const input = byId("prompt-input");
    if (state.selected) {
      clearTimeout(draftTimer);
      await quietCall("save_draft", state.selected, input.value);
    }
    await remember(true);
    call("rebuild_ui");
  }

  // ---- progress ------------------------------------------------------------------------

  function markRunning(sessionId) {
    if (!state.turnStarted.has(sessionId)) state.turnStarted.set(sessionId, Date.now());
    updateWorking();
  }

  // "Working… 12 s" while the selected session's turn runs; "Waiting for approval" while
  // a permission request waits for the user.
  function updateWorking() {
    const node = byId("working");
    const s = state.sessions.get(state.selected);
    const started = s && state.turnStarted.get(s.sessionId);
    if (!started) {
      node.hidden = true;
      return;
    }
    const seconds = Math.max(0, Math.floor((Date.now() - started) / 1000));
    const waiting = Boolean(s.awaitingPermission) || [...state.permissions.values()].some((p) => p.sessionId === s.sessionId);
    node.dataset.state = waiting ? "waiting" : "working";
    $(".working-text", node).textContent = waiting ? `Waiting for your approval · ${seconds} s` : `Working… ${seconds} s`;
    node.hidden = false;
  }



  async function lifecycle(action) {
    clearError();
    const sessionId = state.selected;
    if (!sessionId) return;
    const s = state.sessions.get(sessionId);
    // A session in error still holds its runtime: Resume closes it first.
    if (action === "resume" && s && s.live) {
      const closed = await call("close", sessionId);
      if (!closed) return;
      updateSession(closed);
    }
    const result = await call(action, sessionId);
    if (result && result.sessionId) updateSession(result);
    byId("prompt-input").focus();
  }

  // Retry a failed turn: the last prompt again (this page's, else the transcript's last).
  async function retry() {
    const sessionId = state.selected;
    if (!sessionId) return;
    let text = state.lastPrompt.get(sessionId);
    if (!text && state.transcript && state.transcript.loaded) {
      const users = state.transcript.messages.filter((m) => m.type === "user");
      text = users.length ? users[users.length - 1].text : "";
    }
    if (!text) return;
    const input = byId("prompt-input");
    const draft = input.value;
    input.value = text;
    await send();
    if (draft && !input.value) {
      input.value = draft; // the draft typed meanwhile stays
      setDraft(sessionId, draft);
    }
  }

  function askDelete() {
    const s = state.sessions.get(state.selected);
    const live = Boolean(s && s.live);
    byId("confirm-delete-text").textContent = live
      ? "This session is live. Close it and delete it with its whole transcript? This cannot be undone."
      : "Delete this session and its whole transcript? This cannot be undone.";
    byId("confirm-delete").textContent = live ? "Close and delete" : "Delete";
    byId("confirm-delete-box").hidden = false;
    byId("cancel-delete").focus();
  }

  async function confirmDelete() {
    clearError();
    const sessionId = state.selected;
    byId("confirm-delete-box").hidden = true;
    if (!sessionId) return;
    const s = state.sessions.get(sessionId);
    if (s && s.live) {
      const closed = await call("close", sessionId);
      if (!closed) return;
      updateSession(closed);
    }
    if (!(await call("delete", sessionId))) return;
    state.sessions.delete(sessionId);
    state.deleted.add(sessionId);
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
    byId("new-session").addEventListener("click", () => (form.hidden ? openNewForm() : closeNewForm()));
    byId("cancel-new").addEventListener("click", closeNewForm);
    byId("browse-folder").addEventListener("click", browseFolder);
    byId("theme-toggle").addEventListener("click", cycleTheme);
    byId("sidebar-toggle").addEventListener("click", () => toggleSidebar());
    byId("quick-input").addEventListener("input", renderQuick);
    byId("quick-input").addEventListener("keydown", onQuickKey);
    byId("quick-input").addEventListener("blur", () => setTimeout(() => {
      if (!byId("quick-switch").contains(document.activeElement)) byId("quick-switch").hidden = true;
    }, 0));
    form.addEventListener("submit", createSession);
    $(".composer").addEventListener("submit", send);
    byId("prompt-input").addEventListener("input", onDraftInput);
    byId("transcript").addEventListener("scroll", () => remember(), { passive: true });
    document.addEventListener("focusin", (e) => {
      // The control to give the focus back to after a rebuild (not the Rebuild button).
      const testid = e.target && e.target.dataset ? e.target.dataset.testid : null;
      if (testid && testid !== "rebuild-ui") state.lastFocus = testid;
      remember();
    });
    byId("prompt-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey && !e.isComposing) send(e);
    });
    byId("stop").addEventListener("click", () => {
      if (!state.selected) return;
      call("cancel", state.selected);
      byId("prompt-input").focus();
    });
    byId("close-session").addEventListener("click", () => lifecycle("close"));
    byId("resume-session").addEventListener("click", () => lifecycle("resume"));
    byId("delete-session").addEventListener("click", askDelete);
    byId("retry-turn").addEventListener("click", retry);
    byId("session-search").addEventListener("input", onSearchInput);
    byId("show-archived").addEventListener("change", runSearch);
    byId("group-by-project").addEventListener("change", toggleGrouping);
    byId("import-session").addEventListener("click", importSession);
    byId("archive-session").addEventListener("click", toggleArchive);
    byId("export-session").addEventListener("click", () => exportSession("jsonl"));
    byId("export-markdown").addEventListener("click", () => exportSession("markdown"));
    $(".d-title").addEventListener("dblclick", startRename);
    $(".d-title").addEventListener("keydown", (e) => { if (e.key === "F2" || e.key === "Enter") { e.preventDefault(); startRename(); } });
    byId("error-resume").addEventListener("click", () => lifecycle("resume"));
    byId("cancel-delete").addEventListener("click", () => (byId("confirm-delete-box").hidden = true));
    byId("confirm-delete").addEventListener("click", confirmDelete);
    byId("mode-select").addEventListener("change", setMode);
    byId("approval-select").addEventListener("change", (e) => setSetting("approval", e.target));
    byId("sandbox-select").addEventListener("change", (e) => setSetting("sandbox", e.target));
    byId("model-select").addEventListener("change", (e) => setSetting("model", e.target));
    byId("load-older").addEventListener("click", loadOlder);
    byId("rebuild-ui").addEventListener("click", rebuild);
    document.addEventListener("keydown", (e) => {
      if (e.ctrlKey && e.shiftKey && (e.code === "KeyR" || e.key === "R" || e.key === "r")) {
        e.preventDefault();
        rebuild();
      } else if (e.ctrlKey && !e.shiftKey && !e.altKey && (e.code === "KeyN" || e.key === "n")) {
        e.preventDefault();
        openNewForm();
      } else if (e.ctrlKey && !e.shiftKey && !e.altKey && (e.code === "KeyK" || e.key === "k")) {
        e.preventDefault();
        openQuickSwitch();
      } else if (e.key === "Escape" && !e.defaultPrevented) {
        // Esc closes the innermost open thing: the quick switch, the form, a confirmation.
        if (!byId("quick-switch").hidden) closeQuickSwitch();
        else if (!byId("new-session-form").hidden) closeNewForm();
        else if (!byId("confirm-delete-box").hidden) {
          byId("confirm-delete-box").hidden = true;
          byId("delete-session").focus();
        } else if (document.body.classList.contains("sidebar-open")) toggleSidebar(false);
        else return;
        e.preventDefault();
      }
    });
    document.addEventListener("click", onLinkClick, true);
    document.addEventListener("auxclick", onLinkClick, true);
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
    showProvider(state.info.providerProblem);
    const modes = state.info.modes;
    fillOptions(byId("new-mode"), modes);
    fillOptions(byId("mode-select"), modes);
    fillOptions(byId("new-backend"), state.info.backends.map((b) => ({ id: b, name: b })));
    const memory = state.info.memory || {};
    state.drafts = { ...(memory.drafts || {}) };
    state.scroll = { ...(memory.scroll || {}) };
    state.selected = memory.selected || null; // dropped by refreshList if it is gone
    const settings = state.info.settings || {};
    applyTheme(settings.theme);
    state.recent = settings.recentFolders || [];
    renderRecent();
    await refreshAll();
    showDraft();
    for (const p of (await quietCall("pending_permissions")) || []) state.permissions.set(permissionKey(p), p);
    renderPermissions();
    setInterval(updateWorking, 1000);
    const back = memory.focus && byId(memory.focus);
    if (back && !document.querySelector("[data-testid=approval-card]")) back.focus();
    else if (!document.activeElement || document.activeElement === document.body) byId("prompt-input").focus();
    if (state.selected) loadRules(state.selected);
    state.booting = false;
    if (state.info.autoResumed) await onAutoResumed(state.info.autoResumed);
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
