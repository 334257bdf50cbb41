// The page: a disposable view over the sidecar. It keeps nothing that it cannot fetch
// again: on load it asks (through the js_api bridge) for the session list, statuses and
// transcripts; afterwards the host pushes notifications into `window.app.onPush`.
//
// This file puts the page together and owns what spans views: the boot, selection, whole
// reloads, and the pushed session and host events. The parts (all classic scripts that
// register a factory on `window.AcpUi`, loaded before this one by index.html):
//   store.js      the state and its reducers (no DOM: unit-tested with node, tests/ui/);
//                 store_transcript.js its transcript part
//   bridge.js     the only caller of `window.pywebview.api` and receiver of pushes
//   dom.js        element helpers and formatters
//   topbar.js     banners, the sidecar pill, the theme, the narrow window's toggle
//   sidebar.js    the session list, search, keyboard moves
//   dialogs.js    quick switch, new-session form, rename, delete confirmation
//   details.js    the selected session's facts, settings, rules and actions
//   transcript.js stored page + live part; tools.js its tool cards; consent.js approvals
//   mentions.js   the composer's `@` popup and the `resource_link`s it sends
//   images.js     pasted or dropped images (chips, `image` blocks), stored ones shown
//   composer.js   sending, drafts, progress, what a rebuilt page comes back to
//   queue.js      the queue above the composer, Send now, Stop and clear queue
//   plan.js       the agent's plan, pinned above the composer
//   attention.js  sessions waiting for you (count, title), focus, the notifications toggle
//   turns.js, diff.js  per-turn changes and Rewind; line diffs
//   review.js     a turn's file diffs reviewed hunk by hunk (Accept / Reject)
//   branch.js     a worktree session's branch: its Changes view, Merge and Discard
// Each factory gets the shared `ui` object and returns its functions, which are merged
// into `ui`; a view calls another view's function through `ui` at call time.
"use strict";

(() => {
  const AcpUi = window.AcpUi;
  const store = AcpUi.store;
  const state = store.createState();
  const ui = { state, store };
  const parts = ["dom", "bridge", "topbar", "sidebar", "dialogs", "details", "tools", "transcript", "consent", "mentions", "images", "composer", "queue", "plan", "attention", "review", "branch"];
  for (const part of parts) {
    for (const [name, value] of Object.entries(AcpUi[part](ui))) {
      if (name in ui) throw new Error(`${part}.js: "${name}" is defined twice`);
      ui[name] = value;
    }
  }
  const { $, byId } = ui;

  // ---- pushed events -----------------------------------------------------------------

  ui.onState = (p) => {
    const got = store.pushedState(state, p, Date.now());
    if (!got) return;
    ui.drawLearnt(got);
    if (got.created) return ui.renderAttention();
    if (got.wasRunning && p.status !== "running") ui.turnEnded(p.sessionId);
    else ui.renderAttention(); // an approval asked or settled
    if (p.sessionId === state.selected) ui.renderStopClear();
    // A settled approval may have added a rule ("always"): the details show the rules.
    if (got.settled && p.sessionId === state.selected) ui.loadRules(p.sessionId);
    // A turn ended (or streamed text arrived while this page was loading): converge on the store.
    if (state.selected === p.sessionId && p.status !== "running" && (got.wasRunning || ui.hasLive())) ui.refetchTail();
    if (got.wasRunning && p.status !== "running") ui.announce(p.status === "error" ? `${p.title}: the turn failed` : `${p.title}: new reply`);
    if (p.status === "error" && p.lastError) ui.showSessionError(p.sessionId, `${got.before.title}: ${p.lastError}`, p.lastError);
    else if (p.status !== "error") ui.clearError(`session:${p.sessionId}`);
  };

  ui.onHost = (event, data) => {
    const info = state.info.sidecar;
    if (event === "sidecar_exited") {
      info.state = "restarting";
      ui.showSidecarBanner("warn", `The sidecar exited (code ${data.code}); restarting it…`);
    } else if (event === "sidecar_restarted") {
      Object.assign(info, { state: "running", pid: data.pid, restarts: data.restarts });
      ui.showSidecarBanner("warn", state.info.autoResume
        ? "The sidecar restarted; sessions were closed and can be resumed. Resuming the ones that were live…"
        : "The sidecar restarted; sessions were closed and can be resumed.");
      ui.clearError("sidecar");
      ui.quietCall("provider_problem").then(ui.showProvider); // the new sidecar's own say
      setTimeout(() => ui.hideSidecarBanner(data.pid), 10000); // over: it runs again
      refreshAll();
    } else if (event === "sidecar_failed") {
      info.state = "failed";
      ui.showSidecarBanner("error", `The sidecar could not be restarted: ${data.reason}`);
    } else if (event === "sidecar_started") {
      Object.assign(info, { state: "running", pid: data.pid });
      ui.quietCall("provider_problem").then(ui.showProvider); // the page may have loaded first
    } else if (event === "permission_requested") {
      return ui.showPermission(data);
    } else if (event === "permission_settled") {
      return ui.settlePermission(data.sessionId, data.toolCallId);
    }
    ui.renderSidecar(info);
  };

  ui.onPromptFailed = (data) => {
    ui.showError(data.error, `session:${data.sessionId}`);
    store.turnOver(state, data.sessionId);
    ui.updateWorking();
  };

  // Sessions that were live before (the app quit, the sidecar died) came back by themselves.
  ui.onAutoResumed = async (data) => {
    await refreshList();
    const n = data.resumed.length;
    if (!n && !data.failed.length) return;
    const title = (id) => (state.sessions.get(id) || {}).title || id;
    let text = `Resumed ${n} session${n === 1 ? "" : "s"} that ${n === 1 ? "was" : "were"} live ${data.why === "start" ? "when the app quit" : "before the sidecar restarted"}.`;
    if (data.interrupted.length) text += ` Interrupted mid-turn (the last turn did not finish): ${data.interrupted.map(title).join(", ")}.`;
    if (data.failed.length) text += ` Could not resume: ${data.failed.map((f) => `${title(f.sessionId)} (${f.error})`).join(", ")}.`;
    ui.showNotice(text);
    if (data.why === "sidecar") ui.hideSidecarBanner(); // its cause is over
    if (state.selected && data.resumed.includes(state.selected)) ui.loadTranscript(state.selected);
  };

  // ---- loading and selection ---------------------------------------------------------

  // The list answers as of when it was asked (the store keeps what is newer). Its first
  // page is drawn as soon as it comes (this returns then); the rest is asked for page by
  // page behind it and replaces the map once whole. A newer refresh supersedes an older.
  async function refreshList() {
    const run = ++state.listRun;
    const asked = store.listAsked(state);
    const first = await ui.call("list_page", null);
    if (!first || state.listRun !== run) return;
    if (!first.nextCursor) return listed(first.sessions, asked);
    store.pageArrived(state, first.sessions, Date.now());
    state.listPending = true;
    ui.renderSidebar();
    ui.renderDetails();
    restOfList(run, asked, first);
  }

  async function restOfList(run, asked, first) {
    const all = [...first.sessions];
    for (let cursor = first.nextCursor; cursor; ) {
      const page = await ui.call("list_page", cursor);
      if (state.listRun !== run) return; // a newer list is on its way
      if (!page) {
        state.listPending = false; // the error is shown; the pages in hand stay
        return ui.renderSidebar();
      }
      all.push(...page.sessions);
      cursor = page.nextCursor;
    }
    listed(all, asked);
  }

  function listed(all, asked) {
    state.listPending = false;
    store.listArrived(state, all, asked, Date.now());
    ui.renderSidebar();
    ui.renderDetails();
  }

  async function refreshAll() {
    await refreshList();
    store.selectFirst(state);
    ui.renderSidebar();
    ui.renderDetails();
    if (state.selected) {
      await ui.loadTranscript(state.selected);
      await steering(state.selected);
    }
    ui.renderAttention();
  }

  ui.select = async (sessionId, focus = true) => {
    if (state.selected === sessionId && state.transcript) return;
    if (state.selected && state.transcript) ui.viewMemory(); // the scroll we leave, for coming back
    store.select(state, sessionId);
    ui.showDraft();
    if (focus) {
      byId("prompt-input").focus();
      ui.toggleSidebar(false);
    }
    ui.remember();
    ui.turns.reset();
    byId("confirm-delete-box").hidden = true;
    if (!byId("branch-view").hidden) ui.closeBranch(false); // it was the other session's
    $(".stored").replaceChildren();
    ui.renderSidebar();
    ui.renderDetails();
    ui.renderQueue();
    ui.renderPlan();
    ui.renderAttention();
    await ui.loadTranscript(sessionId);
    ui.loadRules(sessionId);
    await steering(sessionId);
  };

  // The selected session's queue and plan, asked for (after a switch, a load, a rebuild).
  async function steering(sessionId) {
    await Promise.all([ui.loadQueue(sessionId), ui.loadPlan(sessionId)]);
    if (state.selected === sessionId) ui.renderQueue();
  }

  // After a rewind: the summary and the whole transcript again (a marker was appended).
  ui.afterRewind = async (sessionId) => {
    const fresh = await ui.quietCall("status", sessionId);
    if (fresh) ui.updateSession(fresh);
    if (state.selected === sessionId) await ui.loadTranscript(sessionId);
  };

  ui.turns = window.Turns({
    call: ui.call, quietCall: ui.quietCall, el: ui.el, state, store, onRewound: ui.afterRewind,
    showNotice: ui.showNotice, reviewFile: ui.reviewFile, storedImages: ui.storedImages,
  });

  // ---- the page's own keys and events --------------------------------------------------

  // Links in agent text open in the system browser (the bridge checks the scheme); the
  // app itself never navigates.
  function onLinkClick(e) {
    const a = e.target && e.target.closest ? e.target.closest("a[href]") : null;
    if (!a) return;
    e.preventDefault();
    e.stopPropagation();
    if (e.type === "click") ui.call("open_link", a.getAttribute("href"));
  }

  function onKey(e) {
    if (e.ctrlKey && e.shiftKey && (e.code === "KeyR" || e.key === "R" || e.key === "r")) {
      e.preventDefault();
      ui.rebuild();
    } else if (e.ctrlKey && !e.shiftKey && !e.altKey && (e.code === "KeyN" || e.key === "n")) {
      e.preventDefault();
      ui.openNewForm();
    } else if (e.ctrlKey && !e.shiftKey && !e.altKey && (e.code === "KeyK" || e.key === "k")) {
      e.preventDefault();
      ui.openQuickSwitch();
    } else if (e.key === "Escape" && !e.defaultPrevented) {
      // Esc closes the innermost open thing: the quick switch, the form, a confirmation.
      if (ui.closeInnermost()) e.preventDefault();
      else if (document.body.classList.contains("sidebar-open")) {
        ui.toggleSidebar(false);
        e.preventDefault();
      }
    }
  }

  function wire() {
    ui.wireDialogs();
    ui.wireTopbar();
    ui.wireComposer();
    ui.wireMentions();
    ui.wireImages();
    ui.wireDetails();
    ui.wireSidebar();
    ui.wireTranscript();
    ui.wireBranch();
    ui.wireQueue();
    ui.wirePlan();
    ui.wireAttention();
    document.addEventListener("focusin", (e) => {
      // The control to give the focus back to after a rebuild (not the Rebuild button).
      const testid = e.target && e.target.dataset ? e.target.dataset.testid : null;
      if (testid && testid !== "rebuild-ui") state.lastFocus = testid;
      ui.remember();
    });
    byId("rebuild-ui").addEventListener("click", ui.rebuild);
    document.addEventListener("keydown", onKey);
    document.addEventListener("click", onLinkClick, true);
    document.addEventListener("auxclick", onLinkClick, true);
  }

  async function boot() {
    if (state.started) return;
    state.started = true;
    wire();
    state.info = await ui.call("page_ready"); // from here on, pushes arrive (queued until booted)
    if (!state.info) return;
    ui.renderSidecar(state.info.sidecar);
    ui.showProvider(state.info.providerProblem);
    const modes = state.info.modes;
    ui.fillOptions(byId("new-mode"), modes);
    ui.fillOptions(byId("mode-select"), modes);
    ui.fillOptions(byId("new-backend"), state.info.backends.map((b) => ({ id: b, name: b })));
    const memory = state.info.memory || {};
    const settings = state.info.settings || {};
    store.restore(state, memory, settings);
    ui.applyTheme(settings.theme);
    ui.renderNotifications(settings.notifications);
    store.focusChanged(state, document.hasFocus());
    ui.quietCall("set_focus", state.focused);
    ui.renderRecent();
    await refreshAll();
    ui.showDraft();
    await ui.loadPermissions();
    setInterval(ui.updateWorking, 1000);
    const back = memory.focus && byId(memory.focus);
    if (back && !document.querySelector("[data-testid=approval-card]")) back.focus();
    else if (!document.activeElement || document.activeElement === document.body) byId("prompt-input").focus();
    if (state.selected) ui.loadRules(state.selected);
    if (state.info.autoResumed) await ui.onAutoResumed(state.info.autoResumed);
    ui.booted(); // what was pushed meanwhile, in order, after the first load
    document.body.dataset.ready = "true";
  }

  ui.start(boot);
})();
