// Per-turn views of the transcript: what each turn changed in the working tree (a list of
// files with +/- counts; a click shows a file's diff) and, on each of the user's messages,
// a Rewind menu (conversation / code / both) with a confirmation that says what would
// change (the sidecar's dry run) before anything does. A file's diff is reviewed hunk by
// hunk (review.js). Nothing here is kept that cannot be
// fetched again: changes come from `_session/changes` and `_session/turn_changes`. What
// it knows is in the store (store.js: the transcript's changes and diffs, `state.rewind`).
"use strict";

window.Turns = ({ call, quietCall, el, state, store, onRewound, showNotice, reviewFile, storedImages }) => {
  const SCOPES = [
    ["conversation", "Conversation", "the model forgets this turn and later ones; files stay"],
    ["code", "Code", "files go back to how they were before this turn"],
    ["both", "Both", "files and conversation"],
  ];
  const SCOPE_TEXT = { conversation: "the conversation", code: "the files", both: "the files and the conversation" };
  // Tools that change nothing: a turn with only these has no changes worth asking about.
  const READ_ONLY_TOOLS = new Set(["read_file", "list_files"]);

  function counts(files) {
    const add = files.reduce((n, f) => n + f.additions, 0);
    const del = files.reduce((n, f) => n + f.deletions, 0);
    return el("span", { class: "diff-stat" }, el("span", { class: "plus", text: `+${add}` }), " ", el("span", { class: "minus", text: `−${del}` }));
  }

  function sessionCanRewind() {
    const s = state.sessions.get(state.selected);
    return Boolean(s && s.live && s.status === "idle");
  }

  // ---- changes -----------------------------------------------------------------------

  // An empty slot at the end of a turn's entries; filled when its changes are known.
  function changesSlot(turn, changedSomething) {
    const slot = el("div", { class: "changes", "data-testid": "turn-changes", "data-turn": String(turn), hidden: true });
    slot.dataset.maybe = changedSomething ? "1" : "";
    return slot;
  }

  function fillChanges(slot, changes) {
    const t = state.transcript;
    if (!changes || !changes.files.length) {
      slot.hidden = true;
      return;
    }
    const turn = changes.turn;
    const items = changes.files.map((file) => {
      const diffBox = el("div", { class: "change-diff", "data-testid": "change-diff", hidden: true });
      const button = el(
        "button",
        {
          type: "button",
          class: "change-file",
          "data-testid": "change-file",
          "data-path": file.path,
          "aria-expanded": "false",
          title: `Show the diff of ${file.path}`,
          onclick: () => toggleFileDiff(t, turn, file, button, diffBox),
        },
        el("span", { class: `change-status ${file.status}`, text: file.status[0].toUpperCase(), title: file.status }),
        el("span", { class: "change-path", text: file.path }),
        counts([file]),
      );
      if (t.openFiles.has(`${turn}\n${file.path}`)) toggleFileDiff(t, turn, file, button, diffBox);
      return el("li", {}, button, diffBox);
    });
    const more = changes.total > changes.files.length ? el("li", { class: "hint", text: `… and ${changes.total - changes.files.length} more files` }) : null;
    const plural = changes.total === 1 ? "file" : "files";
    slot.replaceChildren(
      el("div", { class: "changes-head" }, el("span", { text: `Changes in turn ${turn} · ${changes.total} ${plural} ` }), counts(changes.files)),
      el("ul", { class: "changes-list" }, ...items, more),
    );
    slot.hidden = false;
  }

  async function toggleFileDiff(t, turn, file, button, box) {
    const opening = box.hidden;
    button.setAttribute("aria-expanded", String(opening));
    box.hidden = !opening;
    // Kept open when the transcript is drawn again (a turn ends, another client prompts).
    store.fileDiffShown(t, turn, file.path, opening);
    if (!opening || box.childElementCount) return;
    let found = t.diffs.get(turn);
    if (!found) {
      const got = await call("changes", t.sessionId, turn);
      if (!got) return;
      found = diffFound(got);
      store.diffArrived(t, turn, found);
    }
    const lines = found.byPath.get(file.path);
    const note = found.truncated ? "The diff was cut short (too long)." : "";
    const fallback = lines
      ? window.Diff.fromUnified(file.path, lines, { note })
      : el("p", { class: "hint", text: found.truncated ? "Not in the diff: it was cut short." : "No text diff (a binary file, or too large)." });
    // Reviewed hunk by hunk (review.js): Accept / Reject per hunk and per file.
    const hunks = found.hunks.get(file.path) || null;
    box.replaceChildren(reviewFile({ t, turn, file, hunks, fallback, refresh: () => refreshTurn(t, turn) }));
  }

  // A `_session/changes` answer as the file diffs draw it: each file's lines of the
  // unified diff, and its hunks (with ids) when the diff was not cut short.
  function diffFound(got) {
    const hunks = new Map((got.files || []).filter((f) => Array.isArray(f.hunks) && f.hunks.length).map((f) => [f.path, f.hunks]));
    return { byPath: window.Diff.splitUnified(got.diff), truncated: got.diffTruncated, hunks };
  }

  // A turn's card drawn again from the sidecar (after a hunk was reverted), its open
  // files kept open.
  async function refreshTurn(t, turn) {
    const got = await call("changes", t.sessionId, turn);
    if (!got || !store.changesArrived(state, t, { ...got, turn }, true)) return;
    store.diffArrived(t, turn, diffFound(got));
    const slot = document.querySelector(`.stored [data-testid=turn-changes][data-turn="${turn}"]`);
    if (slot) fillChanges(slot, t.changes.get(turn));
  }

  // Every slot of the rendered transcript: fill what is known, ask for the rest (once).
  function fillSlots(root) {
    const t = state.transcript;
    const s = state.sessions.get(t.sessionId) || {};
    for (const slot of root.querySelectorAll("[data-testid=turn-changes]")) {
      const turn = Number(slot.dataset.turn);
      if (t.changes.has(turn)) fillChanges(slot, t.changes.get(turn));
      else if (slot.dataset.maybe && !s.checkpointProblem && store.changesWanted(t, turn)) {
        t.fetches = t.fetches.then(async () => {
          const got = await quietCall("changes", t.sessionId, turn);
          if (!store.changesArrived(state, t, got && { ...got, turn }, false)) return;
          const now = root.querySelector(`[data-testid=turn-changes][data-turn="${turn}"]`);
          if (now) fillChanges(now, got);
        });
      }
    }
  }

  // `_session/turn_changes`: a turn that changed files ended (no diff; asked for on click).
  function onTurnChanges(p) {
    const t = state.transcript;
    if (!t || p.sessionId !== t.sessionId || !store.changesArrived(state, t, p, true)) return;
    const slot = document.querySelector(`.stored [data-testid=turn-changes][data-turn="${p.turn}"]`);
    if (slot) fillChanges(slot, p);
  }

  // ---- rewind ------------------------------------------------------------------------

  // A user's message, with its Rewind menu when it has a turn number.
  function userMessage(m) {
    const bubble = el("div", { class: "msg user", text: m.text });
    const images = state.transcript && storedImages(state.transcript.sessionId, m.images);
    if (images) bubble.append(images);
    if (m.turn === null || m.turn === undefined) return bubble;
    const trigger = el("button", {
      type: "button",
      class: "rewind-btn ghost small",
      "data-testid": "rewind-button",
      "aria-haspopup": "menu",
      "aria-expanded": "false",
      "aria-label": `Rewind to before turn ${m.turn}`,
      title: `Rewind to before turn ${m.turn}`,
      text: "↶",
      disabled: !sessionCanRewind(),
    });
    const box = el("div", { class: "user-turn", "data-testid": "user-turn", "data-turn": String(m.turn) }, trigger, bubble);
    trigger.addEventListener("click", (e) => {
      e.stopPropagation();
      openMenu(box, trigger, m.turn);
    });
    return box;
  }

  function closeMenus() {
    for (const menu of document.querySelectorAll("[data-testid=rewind-menu]")) menu.remove();
    for (const b of document.querySelectorAll(".rewind-btn[aria-expanded=true]")) b.setAttribute("aria-expanded", "false");
  }

  function openMenu(box, trigger, turn) {
    const wasOpen = trigger.getAttribute("aria-expanded") === "true";
    closeMenus();
    if (wasOpen) return;
    const items = SCOPES.map(([scope, label, hint]) =>
      el("button", {
        type: "button",
        role: "menuitem",
        class: "menu-item",
        "data-testid": `rewind-${scope}`,
        title: hint,
        onclick: () => {
          closeMenus();
          planRewind(turn, scope, false);
        },
      }, el("span", { text: label }), el("span", { class: "hint", text: ` ${hint}` })),
    );
    const menu = el("div", { class: "rewind-menu", role: "menu", "data-testid": "rewind-menu", "aria-label": `Rewind to before turn ${turn}` }, ...items);
    menu.addEventListener("keydown", (e) => {
      const at = items.indexOf(document.activeElement);
      if (e.key === "Escape") {
        e.preventDefault();
        closeMenus();
        trigger.focus();
      } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        const step = e.key === "ArrowDown" ? 1 : items.length - 1;
        items[(Math.max(at, 0) + step) % items.length].focus();
      }
    });
    menu.addEventListener("click", (e) => e.stopPropagation());
    box.after(menu);
    trigger.setAttribute("aria-expanded", "true");
    items[0].focus();
  }

  // Ask the sidecar what the rewind would change (changing nothing), then show it.
  async function planRewind(turn, scope, force) {
    const sessionId = state.selected;
    const plan = await call("rewind", sessionId, turn, scope, force, true);
    if (!plan || state.selected !== sessionId) return;
    store.rewindPlanned(state, { sessionId, turn, scope, force, plan });
    placeConfirm(true);
  }

  function fileList(label, testid, paths, cls) {
    if (!paths.length) return null;
    return el(
      "div",
      { class: `rewind-files ${cls}`, "data-testid": testid },
      el("span", { class: "rewind-files-head", text: label }),
      el("ul", {}, ...paths.map((p) => (typeof p === "string" ? el("li", { text: p }) : el("li", { text: `${p.path} — ${p.reason}` })))),
    );
  }

  function confirmCard(r) {
    const code = r.plan.code;
    const parts = [];
    if (r.scope !== "code") {
      parts.push(el("p", { "data-testid": "rewind-conversation", text: `Conversation: the model will no longer see turn ${r.turn} and later ones (they stay in the transcript, marked).` }));
    }
    if (code) {
      const conflicts = code.conflicts || [];
      const nothing = !code.restored.length && !code.removed.length;
      parts.push(
        fileList("Restore", "rewind-restored", code.restored, "restore"),
        fileList("Remove (created since)", "rewind-removed", code.removed, "remove"),
        fileList(r.force ? "Changed outside the session since — will be overwritten" : "Changed outside the session since — left alone", "rewind-conflicts", conflicts, "conflict"),
        nothing ? el("p", { "data-testid": "rewind-nothing", text: "Files: nothing to change on disk." }) : null,
      );
      if (conflicts.length) {
        const force = el("input", { type: "checkbox", "data-testid": "rewind-force", checked: r.force });
        force.addEventListener("change", () => planRewind(r.turn, r.scope, force.checked));
        parts.push(el("label", { class: "inline rewind-force" }, force, el("span", { text: " Overwrite them too (force)" })));
      }
    }
    const confirm = el("button", { type: "button", class: "small primary", "data-testid": "rewind-confirm-button", text: "Rewind", disabled: !sessionCanRewind(), onclick: () => performRewind(r) });
    const cancel = el("button", { type: "button", class: "small", "data-testid": "rewind-cancel", text: "Cancel", onclick: () => cancelRewind(true) });
    const title = `Rewind ${SCOPE_TEXT[r.scope]} to before turn ${r.turn}?`;
    const card = el(
      "div",
      { class: "approval rewind-confirm", role: "alertdialog", "aria-label": title, "data-testid": "rewind-confirm", "data-turn": String(r.turn), tabindex: "-1" },
      el("div", { class: "approval-head", text: title }),
      ...parts,
      el("div", { class: "approval-actions" }, confirm, cancel),
      el("div", { class: "hint", text: "Enter: rewind · Esc: cancel" }),
    );
    card.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && e.target === card && sessionCanRewind()) {
        e.preventDefault();
        performRewind(r);
      } else if (e.key === "Escape") {
        e.preventDefault();
        cancelRewind(true);
      }
    });
    return card;
  }

  // (Re)place the confirmation under its message: also after the transcript is redrawn
  // (then without taking the focus from wherever the user is).
  function placeConfirm(focus = false) {
    for (const old of document.querySelectorAll("[data-testid=rewind-confirm]")) old.remove();
    const r = state.rewind;
    if (!r || !state.transcript || r.sessionId !== state.transcript.sessionId) return;
    const box = document.querySelector(`.stored [data-testid=user-turn][data-turn="${r.turn}"]`);
    if (!box) return;
    const card = confirmCard(r);
    box.after(card);
    if (focus) card.focus();
  }

  function cancelRewind(refocus) {
    const r = store.rewindCleared(state);
    placeConfirm();
    if (refocus && r) {
      const trigger = document.querySelector(`.stored [data-testid=user-turn][data-turn="${r.turn}"] .rewind-btn`);
      if (trigger) trigger.focus();
    }
  }

  function describe(result) {
    const parts = [];
    const code = result.code;
    if (code) {
      const conflicts = code.conflicts || [];
      parts.push(`${code.restored.length} restored, ${code.removed.length} removed`);
      if (conflicts.length && !result.forced) parts.push(`${conflicts.length} changed outside the session left alone (${conflicts.map((c) => c.path).join(", ")})`);
    }
    if (result.conversation) parts.push(`the model's context now starts before turn ${result.turn}`);
    if (result.cancelled) return "The rewind was cancelled.";
    const what = result.turn === null ? "Undid the last code rewind" : `Rewound ${SCOPE_TEXT[result.scope]} to before turn ${result.turn}`;
    return `${what}: ${parts.join("; ")}.`;
  }

  async function performRewind(r) {
    store.rewindCleared(state);
    placeConfirm();
    const result = await call("rewind", r.sessionId, r.turn, r.scope, r.force, false);
    if (!result) return;
    result.forced = r.force;
    const undo = result.code && result.code.rewind !== null ? { label: "Undo code rewind", run: () => undoRewind(r.sessionId) } : null;
    showNotice(describe(result), undo);
    await onRewound(r.sessionId);
  }

  async function undoRewind(sessionId) {
    const result = await call("rewind", sessionId, null, "code", false, false);
    if (!result) return;
    showNotice(describe(result), null);
    await onRewound(sessionId);
  }

  // Only while the session is live and idle (the sidecar refuses otherwise). A pending
  // confirmation stays: its own dry run makes the session busy for a moment.
  function updateButtons() {
    const can = sessionCanRewind();
    for (const b of document.querySelectorAll(".rewind-btn, [data-testid=rewind-confirm-button]")) b.disabled = !can;
  }

  document.addEventListener("click", closeMenus);

  return {
    changesSlot,
    fillSlots,
    onTurnChanges,
    userMessage,
    placeConfirm,
    updateButtons,
    readOnlyTool: (name) => READ_ONLY_TOOLS.has(name),
    reset() {
      store.rewindCleared(state);
      closeMenus();
    },
  };
};
