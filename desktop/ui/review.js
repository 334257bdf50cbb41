// Hunk-by-hunk review of what a turn changed (a file's diff in the turn's Changes list):
// Accept / Reject per hunk and per file. Accept marks a hunk reviewed and keeps it (this
// page's mark only, in the store); Reject reverts it on disk (`_session/revert`, a
// checkpointed step the notice's Undo takes back), after which the turn's card is drawn
// again from the sidecar. The file's buttons act on the hunks still open: Reject file
// ("Reject the rest" once some are reviewed) never reverts a hunk the user accepted.
// A refusal because the lines changed since the turn offers "Revert anyway" (force).
//
// Keys, with a hunk focused: j / ↓ next hunk, k / ↑ previous, Home / End, a accept,
// r reject; Shift+A / Shift+R the whole file. Buttons take Enter and Space as usual.
// Everything shown is the agent's text: drawn as textContent only.
"use strict";

(window.AcpUi = window.AcpUi || {}).review = (ui) => {
  const { el, state, store } = ui;

  const canRevert = (sessionId) => {
    const s = state.sessions.get(sessionId);
    return Boolean(s && s.live && s.status === "idle");
  };
  const NOT_NOW = "Only while the session is live and idle";

  // A file's review: `hunks` from `_session/changes` (null or empty when the diff was cut
  // short: then `fallback` shows the diff and only the whole file can be rejected).
  // `refresh()` draws the turn's card again from the sidecar (after a reject).
  function reviewFile({ t, turn, file, hunks, fallback, refresh }) {
    const ctx = { sessionId: t.sessionId, turn, path: file.path, hunks: hunks || [], refresh };
    const box = el("div", { class: "review", "data-testid": "file-review", "data-path": file.path, "data-turn": String(turn) });
    ctx.box = box;
    const problem = el("div", { class: "review-problem", "data-testid": "revert-problem", role: "alert", hidden: true });
    ctx.problem = problem;
    const stateLine = el("span", { class: "review-state", "data-testid": "file-review-state" });
    const accept = button("file-accept", "Accept file", `Keep every hunk of ${file.path} not reverted (Shift+A)`, () => acceptHunks(ctx, open(ctx)));
    accept.disabled = !ctx.hunks.length;
    const reject = button("file-reject", "Reject file", `Revert what turn ${turn} did to ${file.path} (Shift+R)`, () => rejectFile(ctx));
    reject.classList.add("review-reject");
    box.append(el("div", { class: "review-bar" }, stateLine, accept, reject), problem);
    if (ctx.hunks.length) {
      const file2 = { ...file, hunks: ctx.hunks };
      box.append(window.Diff.fileOfHunks(file2, { drawHunk: (h) => hunkNode(ctx, h) }));
      box.append(el("div", { class: "hint", text: "j/k or ↑/↓: next/previous hunk · a: accept · r: reject · Shift+A / Shift+R: the whole file" }));
    } else if (fallback) box.append(fallback);
    box.addEventListener("keydown", (e) => onKey(ctx, e));
    paint(ctx);
    return box;
  }

  function button(testid, text, title, onclick) {
    const b = el("button", { type: "button", class: "small", "data-testid": testid, text, title, onclick });
    b.dataset.hint = title;
    return b;
  }

  function hunkNode(ctx, hunk) {
    const block = window.Diff.hunkBlock(hunk);
    block.tabIndex = -1;
    block.setAttribute("role", "group");
    block.setAttribute("aria-label", `Hunk ${hunk.header}`);
    const accept = button("hunk-accept", "Accept", "Keep this hunk (a)", () => acceptHunks(ctx, [hunk.id]));
    const reject = button("hunk-reject", "Reject", "Revert this hunk on disk (r)", () => rejectHunks(ctx, [hunk.id], false));
    reject.classList.add("review-reject");
    const verdict = el("span", { class: "hunk-verdict", "data-testid": "hunk-verdict" });
    block.prepend(el("div", { class: "hunk-bar" }, verdict, accept, reject));
    block.addEventListener("focus", () => rove(ctx, block));
    return block;
  }

  const open = (ctx) => store.openHunks(state, ctx.sessionId, ctx.turn, ctx.path, ctx.hunks);

  // The file's Reject: its open hunks (those not accepted nor already reverted); the
  // whole file only when there are no hunks to name (a diff cut short).
  function rejectFile(ctx) {
    if (!ctx.hunks.length) return rejectHunks(ctx, [], false);
    const ids = open(ctx);
    if (ids.length) return rejectHunks(ctx, ids, false);
  }

  const blocks = (ctx) => [...ctx.box.querySelectorAll("[data-testid=hunk]")];
  const verdicts = (ctx) => ctx.hunks.map((h) => store.verdictOf(state, ctx.sessionId, ctx.turn, ctx.path, h.id));

  // One tab stop among the hunks: the focused one (else the first still open).
  function rove(ctx, focused) {
    for (const b of blocks(ctx)) b.tabIndex = b === focused ? 0 : -1;
  }

  // Draw the marks: each hunk's verdict and buttons, the file's count.
  function paint(ctx) {
    const can = canRevert(ctx.sessionId);
    const all = blocks(ctx);
    all.forEach((block) => {
      const v = store.verdictOf(state, ctx.sessionId, ctx.turn, ctx.path, block.dataset.hunkId);
      block.dataset.verdict = v || "";
      block.classList.toggle("accepted", v === "accepted");
      block.classList.toggle("rejected", v === "rejected");
      block.querySelector("[data-testid=hunk-verdict]").textContent = v === "accepted" ? "✓ kept" : v === "rejected" ? "↶ reverted" : "";
      block.querySelector("[data-testid=hunk-accept]").disabled = v !== null;
      const reject = block.querySelector("[data-testid=hunk-reject]");
      reject.dataset.done = v === "rejected" ? "1" : "";
      reject.disabled = v === "rejected" || !can;
      reject.title = can ? reject.dataset.hint : NOT_NOW;
    });
    if (all.length && !all.some((b) => b.tabIndex === 0)) rove(ctx, all.find((b) => !b.dataset.verdict) || all[0]);
    const fileReject = ctx.box.querySelector("[data-testid=file-reject]");
    const counts = store.fileReview(state, ctx.sessionId, ctx.turn, ctx.path, ctx.hunks);
    if (ctx.hunks.length) {
      const label = store.fileRejectLabel(counts, ctx.path, ctx.turn);
      fileReject.textContent = label.text;
      fileReject.dataset.hint = label.hint;
    }
    fileReject.dataset.done = ctx.hunks.length > 0 && counts.open === 0 ? "1" : "";
    fileReject.disabled = !can || fileReject.dataset.done === "1";
    fileReject.title = can ? fileReject.dataset.hint : NOT_NOW;
    ctx.box.querySelector("[data-testid=file-accept]").disabled = !ctx.hunks.length || counts.open === 0;
    const line = ctx.box.querySelector("[data-testid=file-review-state]");
    const n = ctx.hunks.length;
    line.textContent = n
      ? `${n} hunk${n === 1 ? "" : "s"} · ${counts.accepted} kept · ${counts.rejected} reverted · ${counts.open} to review`
      : "Review the whole file (the diff was cut short or has no hunks).";
  }

  function acceptHunks(ctx, ids) {
    if (!ids.length) return;
    store.reviewed(state, ctx.sessionId, ctx.turn, ctx.path, ids, "accepted");
    paint(ctx);
    // On to the next hunk still to review, for a keyboard reviewer.
    const at = blocks(ctx).findIndex((b) => b.dataset.hunkId === ids[ids.length - 1]);
    const next = store.nextOpenHunk(verdicts(ctx), at);
    const target = blocks(ctx)[next >= 0 ? next : at];
    if (target && ctx.box.contains(document.activeElement)) target.focus();
    ui.announce(`${ids.length === 1 ? "Hunk" : `${ids.length} hunks`} kept`);
  }

  // Reject: revert on disk; a "changed since" refusal offers the same with force.
  async function rejectHunks(ctx, ids, force) {
    ctx.problem.hidden = true;
    const at = ids.length ? blocks(ctx).findIndex((b) => b.dataset.hunkId === ids[0]) : 0;
    const got = await ui.ask("revert", ctx.sessionId, ctx.turn, ctx.path, ids, force);
    if (!got || got.error) return refused(ctx, ids, (got && got.error) || { message: "No answer" });
    const done = got.hunks && got.hunks.length ? got.hunks : ids.length ? ids : ctx.hunks.map((h) => h.id);
    store.reviewed(state, ctx.sessionId, ctx.turn, ctx.path, done, "rejected");
    paint(ctx);
    ui.showNotice(store.revertSaid(got, ctx.path), { label: "Undo revert", run: () => undo(ctx, done) });
    await redraw(ctx, at);
  }

  function refused(ctx, ids, error) {
    const text = el("span", { "data-testid": "revert-problem-text", text: `${error.title ? `${error.title}: ` : ""}${error.message || error.code}` });
    const parts = [text];
    if (store.changedSince(error)) {
      const force = button("revert-force", "Revert anyway", "Overwrite the lines changed since the turn", () => rejectHunks(ctx, ids, true));
      force.classList.add("danger");
      const keep = button("revert-keep", "Keep them", "Leave the file as it is", () => {
        ctx.problem.hidden = true;
        const first = blocks(ctx)[0];
        if (first) first.focus();
      });
      parts.push(" ", force, " ", keep);
      ctx.problem.replaceChildren(...parts);
      ctx.problem.hidden = false;
      force.focus();
      return;
    }
    ctx.problem.replaceChildren(...parts);
    ctx.problem.hidden = false;
  }

  async function undo(ctx, ids) {
    const result = await ui.call("rewind", ctx.sessionId, null, "code", false, false);
    if (!result) return;
    store.reviewed(state, ctx.sessionId, ctx.turn, ctx.path, ids, null);
    ui.showNotice("Undid the revert: the file is as the turn left it.", null);
    await redraw(ctx, 0);
  }

  // The turn's card again from the sidecar, the focus back on the hunk it was on.
  async function redraw(ctx, at) {
    const focused = ctx.box.contains(document.activeElement);
    await ctx.refresh();
    const again = document.querySelector(`.stored [data-testid=file-review][data-turn="${ctx.turn}"][data-path="${CSS.escape(ctx.path)}"]`);
    if (!again || !focused) return;
    const list = [...again.querySelectorAll("[data-testid=hunk]")];
    const target = list[Math.min(Math.max(at, 0), list.length - 1)];
    if (target) target.focus();
  }

  function onKey(ctx, e) {
    if (e.ctrlKey || e.altKey || e.metaKey || e.defaultPrevented) return;
    const block = e.target.closest && e.target.closest("[data-testid=hunk]");
    if (!block || !ctx.box.contains(block)) return;
    const list = blocks(ctx);
    const at = list.indexOf(block);
    const to = store.hunkStep(e.key, at, list.length);
    if (to !== null && (e.target === block || !["ArrowDown", "ArrowUp", "Home", "End"].includes(e.key))) {
      e.preventDefault();
      list[to].focus();
      return;
    }
    const id = block.dataset.hunkId;
    if (e.key === "a") acceptHunks(ctx, [id]);
    else if (e.key === "r" && canRevert(ctx.sessionId) && block.dataset.verdict !== "rejected") rejectHunks(ctx, [id], false);
    else if (e.key === "A") acceptHunks(ctx, open(ctx));
    else if (e.key === "R" && canRevert(ctx.sessionId)) rejectFile(ctx);
    else return;
    e.preventDefault();
  }

  // The session's state changed (a turn runs, it closed): Reject only while idle.
  function updateReviewButtons() {
    const can = canRevert(state.selected);
    for (const b of document.querySelectorAll(".stored .review-reject")) {
      b.disabled = !can || b.dataset.done === "1";
      b.title = can ? b.dataset.hint : NOT_NOW;
    }
  }

  return { reviewFile, updateReviewButtons };
};
