// A worktree session's branch: its badge in the details, and the Changes view of the
// whole branch against its base (`_session/worktree/diff`, paged by `nextCursor`) with
// Merge (a strategy to choose) and Discard, each confirmed first. A refused merge lists
// the files it names (the conflicts, or the main tree's changes); after a merge or a
// discard the view and the session's badges are drawn again from the sidecar.
// The branch's text is the agent's: drawn as textContent only.
"use strict";

(window.AcpUi = window.AcpUi || {}).branch = (ui) => {
  const { byId, el, state, store } = ui;

  const view = () => byId("branch-view");
  const isOpen = () => !view().hidden;

  // The details' worktree pill and the Changes button (for a worktree session only); an
  // open view follows its session's state (Merge while not running, Discard once closed).
  function renderWorktree(s) {
    const badges = store.worktreeBadges(s);
    const pill = byId("detail-worktree");
    pill.hidden = !badges;
    pill.textContent = badges ? `⎇ ${badges.branch}${badges.sync ? ` ${badges.sync}` : ""}${badges.dirty ? " ●" : ""}` : "";
    pill.title = badges ? badges.label : "";
    byId("branch-changes").hidden = !badges;
    const v = state.branch;
    if (v && isOpen() && v.sessionId === s.sessionId) {
      if (!badges) closeBranch(false);
      else renderActions(s);
    }
  }

  async function openBranch() {
    const s = store.selected(state);
    if (!s || !store.worktreeBadges(s)) return;
    const v = store.branchOpened(state, s.sessionId);
    hideConfirm();
    showError(null);
    view().hidden = false;
    render(v);
    byId("branch-close").focus();
    await loadPage(v);
  }

  function closeBranch(refocus = true) {
    store.branchClosed(state);
    view().hidden = true;
    hideConfirm();
    if (refocus && !byId("branch-changes").hidden) byId("branch-changes").focus();
  }

  async function loadPage(v) {
    byId("branch-more").disabled = true;
    const got = await ui.call("worktree_diff", v.sessionId, v.nextCursor, store.BRANCH_PAGE);
    if (store.branchPage(state, v, got)) render(v);
    byId("branch-more").disabled = false;
  }

  function render(v) {
    const s = state.sessions.get(v.sessionId);
    const { branch, base } = names(v);
    byId("branch-title").textContent = `${branch} → ${base}`;
    byId("branch-title").title = (store.worktreeBadges(s) || { label: "" }).label;
    const totals = store.branchTotals(v);
    const counts = byId("branch-totals");
    counts.replaceChildren(
      el("span", { text: `${totals.files}${totals.more ? "+" : ""} file${totals.files === 1 ? "" : "s"} ` }),
      el("span", { class: "plus", text: `+${totals.additions}` }),
      " ",
      el("span", { class: "minus", text: `−${totals.deletions}` }),
    );
    const list = byId("branch-files");
    const drawn = new Set([...list.children].map((c) => c.dataset.path));
    if (!v.files.length || [...drawn].some((p) => !v.files.some((f) => f.path === p))) list.replaceChildren();
    for (const file of v.files) {
      if (drawn.has(file.path)) continue;
      const details = window.Diff.fileOfHunks(file, { open: v.files.length <= 20, label: file.status });
      details.dataset.testid = "branch-file";
      list.append(details);
    }
    byId("branch-loading").hidden = v.loaded;
    byId("branch-empty").hidden = !v.loaded || v.files.length > 0;
    byId("branch-more").hidden = v.nextCursor === null;
    if (s) renderActions(s);
  }

  // Merge while the session is not running a turn; Discard for a closed session only.
  function renderActions(s) {
    const running = s.status === "running";
    const merge = byId("merge-branch");
    merge.disabled = running;
    merge.title = running ? "Wait for the turn to end" : "Merge the branch into its base (asks first)";
    const discard = byId("discard-worktree");
    discard.disabled = Boolean(s.live);
    discard.title = s.live ? "Close the session first: only a closed session's worktree can be discarded" : "Remove the worktree and its branch (asks first)";
  }

  // ---- the confirmation ----------------------------------------------------------------

  function confirm(text, okLabel, run) {
    showError(null);
    byId("branch-confirm-text").textContent = text;
    const ok = byId("branch-confirm-ok");
    ok.textContent = okLabel;
    ok.onclick = () => {
      hideConfirm();
      run();
    };
    byId("branch-confirm").hidden = false;
    byId("branch-confirm-cancel").focus();
  }

  function hideConfirm() {
    byId("branch-confirm").hidden = true;
    byId("branch-confirm-ok").onclick = null;
  }

  function showError(error, files = []) {
    const box = byId("branch-error");
    box.hidden = !error;
    byId("branch-error-text").textContent = error ? `${error.title || "Error"}: ${error.message || error.code}` : "";
    byId("branch-conflicts").replaceChildren(...files.map((f) => el("li", { "data-testid": "branch-conflict", text: f })));
    byId("branch-conflicts").hidden = !files.length;
  }

  // The branch and base of a view: as its diff said, else as the summary says (the
  // first page may not be there yet).
  function names(v) {
    const badges = store.worktreeBadges(state.sessions.get(v.sessionId)) || { branch: "", base: "" };
    return { branch: v.branch || badges.branch, base: v.base || badges.base };
  }

  function askMerge() {
    const v = state.branch;
    if (!v) return;
    const strategy = byId("merge-strategy").value;
    const { branch, base } = names(v);
    confirm(store.mergeQuestion(strategy, branch, base), "Merge", () => merge(v, strategy));
  }

  async function merge(v, strategy) {
    const got = await ui.ask("worktree_merge", v.sessionId, strategy, null);
    if (state.branch !== v) return;
    if (!got || got.error) {
      const error = (got && got.error) || { message: "No answer" };
      showError(error, store.mergeFiles(error.message));
      byId("merge-branch").focus();
      return;
    }
    const moved = got.before === got.after ? "nothing to merge" : `${got.before.slice(0, 8)} → ${got.after.slice(0, 8)}`;
    ui.showNotice(`Merged (${got.strategy}) ${names(v).branch} into ${got.base}: ${moved}.`, null);
    await refresh(v.sessionId);
    if (state.branch === v || !state.branch) await reopen(v.sessionId);
  }

  function askDiscard() {
    const v = state.branch;
    if (!v) return;
    const branch = names(v).branch;
    const what = branch ? `the branch ${branch}` : "its branch";
    confirm(`Discard this session's worktree and ${what}? Work not merged is lost; the session and its transcript stay.`, "Discard", () => discard(v));
  }

  async function discard(v) {
    const { branch } = names(v);
    const got = await ui.ask("worktree_discard", v.sessionId);
    if (state.branch !== v) return;
    if (!got || got.error) {
      showError((got && got.error) || { message: "No answer" });
      return;
    }
    ui.showNotice(`Discarded the worktree and ${branch || "its branch"}.`, null);
    ui.updateSession(got); // worktree: null, so the badges and the Changes button go
    closeBranch(false);
    await refresh(v.sessionId);
  }

  // The session's summary again (its badges: ahead, behind, dirty).
  async function refresh(sessionId) {
    const fresh = await ui.quietCall("status", sessionId);
    if (fresh) ui.updateSession(fresh);
  }

  async function reopen(sessionId) {
    if (state.selected !== sessionId) return;
    const v = store.branchOpened(state, sessionId);
    render(v);
    await loadPage(v);
  }

  function wire() {
    byId("branch-changes").addEventListener("click", openBranch);
    byId("branch-close").addEventListener("click", () => closeBranch());
    byId("branch-more").addEventListener("click", () => state.branch && loadPage(state.branch));
    byId("merge-branch").addEventListener("click", askMerge);
    byId("discard-worktree").addEventListener("click", askDiscard);
    byId("branch-confirm-cancel").addEventListener("click", () => {
      hideConfirm();
      byId("merge-branch").focus();
    });
    view().addEventListener("keydown", (e) => {
      if (e.key !== "Escape") return;
      e.preventDefault();
      e.stopPropagation();
      if (!byId("branch-confirm").hidden) {
        hideConfirm();
        byId("merge-branch").focus();
      } else closeBranch();
    });
  }

  return { renderWorktree, openBranch, closeBranch, wireBranch: wire };
};
