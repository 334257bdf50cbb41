// Worktrees and review in the page's store (desktop/ui/store_review.js, part of store.js):
// grouping and badges, the form's `_meta.worktree`, the branch view's paging, what a
// refused merge names, and the per-hunk review's marks and keys. Run: node --test tests/ui/
"use strict";

const test = require("node:test");
const assert = require("node:assert/strict");
const path = require("node:path");

const store = require(path.join(__dirname, "..", "..", "desktop", "ui", "store.js"));

function session(id, extra = {}) {
  return { sessionId: id, title: id, cwd: `/w/${id}`, status: "idle", generation: 1, live: true, ...extra };
}

const wt = (repo, branch, extra = {}) => ({ repo, path: `${repo}.worktrees/${branch}`, branch, base: "main", ahead: null, behind: null, dirty: null, ...extra });

test("a worktree session groups under its repository, any other under its folder", () => {
  const a = session("a", { cwd: "/r/app.worktrees/1", worktree: wt("/r/app", "acp/1") });
  const b = session("b", { cwd: "/r/app" });
  const c = session("c", { cwd: "/r/app.worktrees/2", worktree: wt("/r/app", "acp/2") });
  const d = session("d", { cwd: "/elsewhere" });
  assert.equal(store.repoOf(a), "/r/app");
  assert.equal(store.repoOf(d), "/elsewhere");
  const groups = store.repoGroups([a, d, b], [a, d, b, c]);
  assert.deepEqual(groups.map((g) => [g.repo, g.members.map((s) => s.sessionId), g.count]), [
    ["/r/app", ["a", "b"], 3],
    ["/elsewhere", ["d"], 1],
  ]);
});

test("badges: the branch always, ahead/behind and dirty only when known", () => {
  assert.equal(store.worktreeBadges(session("plain")), null);
  assert.equal(store.worktreeBadges(session("gone", { worktree: null })), null);
  const closed = store.worktreeBadges(session("x", { worktree: wt("/r", "fix") }));
  assert.deepEqual([closed.branch, closed.sync, closed.dirty], ["fix", "", false]);
  const live = store.worktreeBadges(session("y", { worktree: wt("/r", "fix", { ahead: 2, behind: 0, dirty: true }) }));
  assert.deepEqual([live.sync, live.dirty], ["↑2 ↓0", true]);
  assert.match(live.label, /branch fix, from main, 2 ahead, 0 behind, uncommitted changes/);
});

test("a pushed summary keeps the badges current, and a discard takes them away", () => {
  const state = store.createState();
  store.listArrived(state, [session("a", { worktree: wt("/r", "b1") })], store.listAsked(state), 0);
  store.pushedState(state, session("a", { worktree: wt("/r", "b1", { ahead: 1, behind: 3, dirty: false }) }), 0);
  assert.equal(store.worktreeBadges(state.sessions.get("a")).sync, "↑1 ↓3");
  store.learn(state, session("a", { live: false, status: "closed", worktree: null }));
  assert.equal(store.worktreeBadges(state.sessions.get("a")), null);
});

test("the form's worktree: off, the defaults, or only the fields given", () => {
  assert.equal(store.worktreeParam(false, "x", "y"), null);
  assert.equal(store.worktreeParam(true, "", "  "), true);
  assert.deepEqual(store.worktreeParam(true, " fix-1 ", ""), { branch: "fix-1" });
  assert.deepEqual(store.worktreeParam(true, "fix", "dev"), { branch: "fix", base: "dev" });
});

test("a refusal names the worktree field it is about", () => {
  assert.equal(store.worktreeField("_meta.worktree.branch: branch fix already exists"), "branch");
  assert.equal(store.worktreeField("Invalid params: _meta.worktree.base: nope does not resolve"), "base");
  assert.equal(store.worktreeField("_meta.worktree: /tmp/x is not inside a git repository"), "worktree");
  assert.equal(store.worktreeField("cwd: no such directory"), null);
});

test("the branch view pages by nextCursor, and a late page for an old view is dropped", () => {
  const state = store.createState();
  const first = store.branchOpened(state, "a");
  assert.equal(store.branchPage(state, first, { branch: "b", base: "main", files: [{ path: "x", additions: 2, deletions: 1 }], nextCursor: 100 }), true);
  assert.deepEqual(store.branchTotals(first), { files: 1, additions: 2, deletions: 1, more: true });
  // The same page again (a double click) adds nothing; the next one appends.
  store.branchPage(state, first, { files: [{ path: "x", additions: 2, deletions: 1 }], nextCursor: 100 });
  store.branchPage(state, first, { files: [{ path: "y", additions: 5, deletions: 0 }], nextCursor: null });
  assert.deepEqual(store.branchTotals(first), { files: 2, additions: 7, deletions: 1, more: false });
  assert.equal(first.branch, "b");
  const again = store.branchOpened(state, "a");
  assert.equal(store.branchPage(state, first, { files: [{ path: "late" }] }), false);
  assert.equal(again.files.length, 0);
  store.select(state, "other");
  assert.equal(state.branch, null);
});

test("a refused merge lists the files its message names", () => {
  assert.deepEqual(store.mergeFiles("merging acp/1 into main conflicts in a.txt, src/b.py; nothing was merged"), ["a.txt", "src/b.py"]);
  assert.deepEqual(store.mergeFiles("merge refused: the main working tree /r has uncommitted changes: notes.md, x y.txt"), ["notes.md", "x y.txt"]);
  assert.deepEqual(store.mergeFiles("merging b into main conflicts in (unknown); nothing was merged"), []);
  assert.deepEqual(store.mergeFiles("session is busy"), []);
  assert.match(store.mergeQuestion("squash", "acp/1", "main"), /^Squash-merge acp\/1 into main\?/);
});

test("the file's Accept and Reject act on the open hunks only: an accepted hunk is never reverted", () => {
  const state = store.createState();
  const hunks = [{ id: "h1" }, { id: "h2" }, { id: "h3" }];
  assert.deepEqual(store.openHunks(state, "s", 2, "f.txt", hunks), ["h1", "h2", "h3"]);
  let label = store.fileRejectLabel(store.fileReview(state, "s", 2, "f.txt", hunks), "f.txt", 2);
  assert.equal(label.text, "Reject file");
  assert.match(label.hint, /except hunks you accept first/);
  store.reviewed(state, "s", 2, "f.txt", ["h2"], "accepted");
  assert.deepEqual(store.openHunks(state, "s", 2, "f.txt", hunks), ["h1", "h3"]);
  label = store.fileRejectLabel(store.fileReview(state, "s", 2, "f.txt", hunks), "f.txt", 2);
  assert.equal(label.text, "Reject the rest");
  assert.match(label.hint, /Revert the 2 hunks of f\.txt not accepted \(the 1 kept stay\)/);
  store.reviewed(state, "s", 2, "f.txt", ["h3"], "rejected");
  assert.deepEqual(store.openHunks(state, "s", 2, "f.txt", hunks), ["h1"]);
  assert.deepEqual(store.openHunks(state, "s", 3, "f.txt", hunks), ["h1", "h2", "h3"]); // another turn
});

test("review marks: accepted and rejected per hunk, forgotten when a revert is undone", () => {
  const state = store.createState();
  const hunks = [{ id: "h1" }, { id: "h2" }, { id: "h3" }];
  store.reviewed(state, "s", 2, "f.txt", ["h1"], "accepted");
  store.reviewed(state, "s", 2, "f.txt", ["h3"], "rejected");
  assert.deepEqual(store.fileReview(state, "s", 2, "f.txt", hunks), { accepted: 1, rejected: 1, open: 1 });
  // Another turn's, or another file's, hunk with the same id is not the same review.
  assert.equal(store.verdictOf(state, "s", 3, "f.txt", "h1"), null);
  assert.equal(store.verdictOf(state, "s", 2, "g.txt", "h1"), null);
  store.reviewed(state, "s", 2, "f.txt", ["h3"], null);
  assert.equal(store.verdictOf(state, "s", 2, "f.txt", "h3"), null);
});

test("keys move between hunks within bounds; the next open hunk wraps", () => {
  assert.equal(store.hunkStep("j", 0, 3), 1);
  assert.equal(store.hunkStep("ArrowDown", 2, 3), 2);
  assert.equal(store.hunkStep("k", 0, 3), 0);
  assert.equal(store.hunkStep("ArrowUp", 2, 3), 1);
  assert.equal(store.hunkStep("End", 0, 3), 2);
  assert.equal(store.hunkStep("Home", 2, 3), 0);
  assert.equal(store.hunkStep("a", 1, 3), null);
  assert.equal(store.hunkStep("j", 0, 0), null);
  assert.equal(store.nextOpenHunk([null, "accepted", null], 0), 2);
  assert.equal(store.nextOpenHunk([null, "accepted", "accepted"], 2), 0);
  assert.equal(store.nextOpenHunk(["accepted", "rejected"], 0), -1);
});

test("only a 'changed since' refusal offers force", () => {
  assert.equal(store.changedSince({ code: -32045, message: "f.txt changed since turn 2 (force reverts anyway)" }), true);
  assert.equal(store.changedSince({ code: -32045, message: "session is running a turn" }), false);
  assert.equal(store.changedSince({ code: -32602, message: "hunks: unknown id changed since" }), false);
  assert.equal(store.changedSince(null), false);
  assert.equal(store.revertSaid({ turn: 2, hunks: ["a"], forced: false }, "f.txt"), "Reverted 1 hunk of f.txt (turn 2).");
  assert.equal(store.revertSaid({ turn: 2, hunks: [], forced: true }, "f.txt"), "Reverted f.txt (turn 2), overwriting later changes.");
});
