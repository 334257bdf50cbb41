// Worktrees and review, the page's state and rules for them (see store.js, which includes
// these in its exports). No DOM, so node tests them (tests/ui/review.test.js):
//   - a worktree session's place in the sidebar (its repository) and its badges;
//   - what the new-session form sends as `_meta.worktree`;
//   - the branch's Changes view (`_session/worktree/diff`, paged) and what a refused
//     merge names;
//   - per-hunk review of a turn's changes: Accept is a mark kept by this page only
//     (`state.review`), Reject is `_session/revert` (the sidecar's), and moving between
//     hunks with the keyboard.
"use strict";

((root, factory) => {
  const part = factory();
  if (typeof module === "object" && module.exports) module.exports = part;
  else (root.AcpUi = root.AcpUi || {}).storeReview = part;
})(typeof self !== "undefined" ? self : this, () => {
  const STRATEGIES = ["merge", "squash", "rebase"];
  const BRANCH_PAGE = 100; // files per `_session/worktree/diff` page

  // ---- worktree sessions in the sidebar ----------------------------------------------

  const worktreeOf = (session) => (session && session.worktree && typeof session.worktree === "object" ? session.worktree : null);

  // The repository a session belongs to: its worktree's main repository, else its folder.
  function repoOf(session) {
    const wt = worktreeOf(session);
    return (wt && typeof wt.repo === "string" && wt.repo) || session.cwd || "";
  }

  // Sessions grouped by repository, in the order their first member comes (the list is by
  // activity, so the group with the latest activity is first); `all` counts each group
  // (the page drawn may hold only some of its members).
  function repoGroups(shown, all = shown) {
    const counts = new Map();
    for (const s of all) counts.set(repoOf(s), (counts.get(repoOf(s)) || 0) + 1);
    const groups = new Map();
    for (const s of shown) {
      const key = repoOf(s);
      if (!groups.has(key)) groups.set(key, { repo: key, members: [], count: counts.get(key) || 0 });
      groups.get(key).members.push(s);
    }
    return [...groups.values()];
  }

  // A worktree session's badges: its branch, ↑ahead ↓behind its base (known only while
  // the session is live: null otherwise) and ● for uncommitted work. Null: no worktree.
  function worktreeBadges(session) {
    const wt = worktreeOf(session);
    if (!wt || !wt.branch) return null;
    const num = (n) => (typeof n === "number" && n >= 0 ? n : null);
    const ahead = num(wt.ahead);
    const behind = num(wt.behind);
    const sync = ahead === null && behind === null ? "" : `↑${ahead || 0} ↓${behind || 0}`;
    const dirty = wt.dirty === true;
    const parts = [`branch ${wt.branch}`];
    if (wt.base) parts.push(`from ${wt.base}`);
    if (sync) parts.push(`${ahead || 0} ahead, ${behind || 0} behind`);
    if (dirty) parts.push("uncommitted changes");
    return { branch: String(wt.branch), base: String(wt.base || ""), ahead, behind, sync, dirty, label: parts.join(", ") };
  }

  // ---- the new-session form --------------------------------------------------------------

  // `_meta.worktree` from the form: null (off), true (the defaults) or {branch?, base?}.
  function worktreeParam(on, branch, base) {
    if (!on) return null;
    const out = {};
    if (String(branch || "").trim()) out.branch = String(branch).trim();
    if (String(base || "").trim()) out.base = String(base).trim();
    return Object.keys(out).length ? out : true;
  }

  // Which of the form's worktree fields a refusal names ("_meta.worktree.branch: ..."):
  // "branch", "base", "worktree" (the checkbox: e.g. not a repository), or null.
  function worktreeField(message) {
    const m = /_meta\.worktree(?:\.(branch|base))?\b/.exec(String(message || ""));
    return m ? m[1] || "worktree" : null;
  }

  // ---- the branch's Changes view -------------------------------------------------------

  // A view opened (or opened again: a fresh start); its identity is the token a late page
  // is checked against.
  function branchOpened(state, sessionId) {
    const view = { sessionId, files: [], nextCursor: null, loaded: false, branch: "", base: "" };
    state.branch = view;
    return view;
  }

  function branchClosed(state) {
    state.branch = null;
  }

  // A `_session/worktree/diff` page arrived: appended, unless the view is gone or was
  // opened again meanwhile, or a file is already there (a page asked for twice).
  function branchPage(state, view, page) {
    if (!page || state.branch !== view) return false;
    const seen = new Set(view.files.map((f) => f.path));
    for (const f of page.files || []) if (!seen.has(f.path)) view.files.push(f);
    view.nextCursor = page.nextCursor === undefined || page.nextCursor === null ? null : page.nextCursor;
    view.branch = page.branch || view.branch;
    view.base = page.base || view.base;
    view.loaded = true;
    return true;
  }

  function branchTotals(view) {
    const sum = (key) => view.files.reduce((n, f) => n + (Number(f[key]) || 0), 0);
    return { files: view.files.length, additions: sum("additions"), deletions: sum("deletions"), more: view.nextCursor !== null };
  }

  // The files a refused merge names: the conflicting ones, or the main tree's changes.
  function mergeFiles(message) {
    const text = String(message || "");
    const m = /conflicts in (.+?); nothing was merged/.exec(text) || /has uncommitted changes: (.+)$/.exec(text);
    if (!m || m[1] === "(unknown)") return [];
    return m[1].split(", ").map((f) => f.trim()).filter(Boolean);
  }

  // What the confirmation asks before a merge.
  function mergeQuestion(strategy, branch, base) {
    const how = { merge: "Merge", squash: "Squash-merge", rebase: "Rebase and merge" }[strategy] || "Merge";
    return `${how} ${branch} into ${base}? Uncommitted work in the worktree is committed on ${branch} first.`;
  }

  // ---- per-hunk review of a turn's changes ------------------------------------------------

  const reviewKey = (sessionId, turn, path, id) => `${sessionId}\n${turn}\n${path}\n${id}`;

  // Hunks marked "accepted" (kept, reviewed) or "rejected" (reverted on disk); null
  // forgets the mark (a revert undone).
  function reviewed(state, sessionId, turn, path, ids, verdict) {
    for (const id of ids) {
      const key = reviewKey(sessionId, turn, path, id);
      if (verdict) state.review.set(key, verdict);
      else state.review.delete(key);
    }
  }

  function verdictOf(state, sessionId, turn, path, id) {
    return state.review.get(reviewKey(sessionId, turn, path, id)) || null;
  }

  // A file's review so far: how many of its hunks are accepted, rejected, still open.
  function fileReview(state, sessionId, turn, path, hunks) {
    const out = { accepted: 0, rejected: 0, open: 0 };
    for (const h of hunks) {
      const v = verdictOf(state, sessionId, turn, path, h.id);
      out[v === "accepted" ? "accepted" : v === "rejected" ? "rejected" : "open"] += 1;
    }
    return out;
  }

  // The hunks of a file still to review (neither accepted nor rejected), in order: what
  // Accept file keeps and Reject file takes back, so a hunk the user already accepted is
  // never reverted by the file's Reject (nor a reverted one marked kept by its Accept).
  function openHunks(state, sessionId, turn, path, hunks) {
    return hunks.filter((h) => !verdictOf(state, sessionId, turn, path, h.id)).map((h) => h.id);
  }

  // The file's Reject button: its label and what it says it does, from the counts so far.
  function fileRejectLabel(counts, path, turn) {
    const some = counts.accepted > 0 || counts.rejected > 0;
    return {
      text: some ? "Reject the rest" : "Reject file",
      hint: counts.accepted
        ? `Revert the ${counts.open} hunk${counts.open === 1 ? "" : "s"} of ${path} not accepted (the ${counts.accepted} kept stay) (Shift+R)`
        : `Revert what turn ${turn} did to ${path}, except hunks you accept first (Shift+R)`,
    };
  }

  // The hunk a key moves to from `at` among `count` (j/↓ next, k/↑ previous, Home/End),
  // or null when the key is not a move.
  function hunkStep(key, at, count) {
    if (!count) return null;
    const i = Math.max(0, Math.min(count - 1, at));
    if (key === "j" || key === "ArrowDown") return Math.min(count - 1, at < 0 ? 0 : i + 1);
    if (key === "k" || key === "ArrowUp") return Math.max(0, i - 1);
    if (key === "Home") return 0;
    if (key === "End") return count - 1;
    return null;
  }

  // The next hunk still to review after `at` (wrapping), or -1 when all are reviewed.
  function nextOpenHunk(verdicts, at) {
    for (let step = 1; step <= verdicts.length; step++) {
      const i = (at + step) % verdicts.length;
      if (!verdicts[i]) return i;
    }
    return -1;
  }

  // A revert refused because the lines changed since the turn (`force` overrides).
  function changedSince(error) {
    return Boolean(error) && Number(error.code) === -32045 && /changed since/i.test(String(error.message || ""));
  }

  // What a done revert says.
  function revertSaid(result, path) {
    const n = (result.hunks || []).length;
    const what = n ? `${n} hunk${n === 1 ? "" : "s"} of ${path}` : path;
    return `Reverted ${what} (turn ${result.turn})${result.forced ? ", overwriting later changes" : ""}.`;
  }

  return {
    STRATEGIES, BRANCH_PAGE, repoOf, repoGroups, worktreeBadges, worktreeParam, worktreeField,
    branchOpened, branchClosed, branchPage, branchTotals, mergeFiles, mergeQuestion, reviewKey,
    reviewed, verdictOf, fileReview, openHunks, fileRejectLabel, hunkStep, nextOpenHunk, changedSince, revertSaid,
  };
});
