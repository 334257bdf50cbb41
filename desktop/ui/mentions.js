// `@` mentions in the composer: typing `@` and a few characters opens a popup of the
// session's paths matching them (`_session/files`, asked ~50 ms after the last key, the
// latest answer winning); Up/Down choose, Enter or Tab pick, Esc closes. A picked path is
// inserted as `@path` and remembered; on send, each remembered path still mentioned in the
// text goes beside it as a `resource_link` (name: the path, uri: its file:// URI under the
// session's cwd), as the terminal client sends it (desktop/tui_mentions.py).
"use strict";

(window.AcpUi = window.AcpUi || {}).mentions = (ui) => {
  const { byId, el, state, store } = ui;
  const TYPING = /(?:^|\s)@("[^"\n]*|[^\s"]*)$/; // the mention being typed at the cursor
  const MENTION = /(?:^|\s)@(?:"([^"\n]+)"|([^\s"]+))/g;
  const LIMIT = 30;
  const picked = new Map(); // sessionId -> Set of paths picked from the popup
  let timer = null;
  let asked = 0; // the number of the latest question; older answers are dropped
  let shown = { items: [], index: 0, start: 0, end: 0 };

  const quoted = (path) => (/\s/.test(path) ? `"${path}"` : path);

  // The partial path before the cursor and where it starts (after the `@`), or null.
  function typing(input) {
    const before = input.value.slice(0, input.selectionStart);
    const found = TYPING.exec(before);
    if (!found) return null;
    return { query: found[1].replace(/^"/, ""), start: before.length - found[1].length, end: input.selectionStart };
  }

  function onInput() {
    const input = byId("prompt-input");
    const now = typing(input);
    clearTimeout(timer);
    if (!now || !now.query || !state.selected) return close();
    const sessionId = state.selected;
    timer = setTimeout(() => ask(sessionId, now), 50);
  }

  async function ask(sessionId, now) {
    const mine = ++asked;
    const answer = await ui.quietCall("files", sessionId, now.query, LIMIT);
    if (mine !== asked || sessionId !== state.selected) return; // a later question wins
    if (!answer || !answer.files || !answer.files.length) return close();
    shown = { items: answer.files, index: 0, start: now.start, end: now.end };
    draw();
  }

  function draw() {
    const box = byId("mention-popup");
    box.replaceChildren(
      ...shown.items.map((f, i) => {
        const row = el("li", {
          class: `mention-item${i === shown.index ? " active" : ""}`,
          "data-testid": "mention-item",
          role: "option",
          "aria-selected": String(i === shown.index),
          text: f.kind === "dir" ? `${f.path}/` : f.path, // the agent's text, as text
        });
        row.addEventListener("mousedown", (e) => {
          e.preventDefault(); // the composer keeps the focus
          shown.index = i;
          pick();
        });
        return row;
      }),
    );
    box.hidden = false;
    byId("prompt-input").setAttribute("aria-expanded", "true");
  }

  function close() {
    asked++; // an answer still on its way is not drawn
    clearTimeout(timer);
    shown = { items: [], index: 0, start: 0, end: 0 };
    const box = byId("mention-popup");
    box.hidden = true;
    box.replaceChildren();
    byId("prompt-input").setAttribute("aria-expanded", "false");
  }

  const isOpen = () => !byId("mention-popup").hidden && shown.items.length > 0;

  function pick() {
    const f = shown.items[shown.index];
    if (!f) return close();
    const input = byId("prompt-input");
    const path = f.kind === "dir" ? `${f.path}/` : f.path;
    const text = `${quoted(path)} `; // in place of what was typed after the `@`
    input.value = input.value.slice(0, shown.start) + text + input.value.slice(shown.end);
    const cursor = shown.start + text.length;
    input.setSelectionRange(cursor, cursor);
    if (state.selected) {
      if (!picked.has(state.selected)) picked.set(state.selected, new Set());
      picked.get(state.selected).add(path);
    }
    close();
    input.dispatchEvent(new Event("input")); // the draft is kept
  }

  // Up/Down/Enter/Tab/Esc while the popup is open; true when the key was the popup's
  // (the composer asks first, so Enter picks rather than sends).
  function mentionKey(e) {
    if (!isOpen()) return false;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      const n = shown.items.length;
      shown.index = (shown.index + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
      draw();
    } else if ((e.key === "Enter" && !e.shiftKey) || e.key === "Tab") pick();
    else if (e.key === "Escape") close();
    else return false;
    e.preventDefault();
    e.stopPropagation();
    return true;
  }

  function fileUri(cwd, path) {
    const absolute = `${cwd.replace(/\/+$/, "")}/${path.replace(/\/+$/, "")}`;
    return "file://" + encodeURI(absolute).replace(/[?#]/g, encodeURIComponent);
  }

  // The `resource_link` blocks for the remembered paths still mentioned in `text`.
  function mentionBlocks(sessionId, text) {
    const known = picked.get(sessionId);
    const s = store.selected(state);
    if (!known || !known.size || !s || s.sessionId !== sessionId || !s.cwd) return [];
    const blocks = [];
    const seen = new Set();
    for (const found of text.matchAll(MENTION)) {
      const path = (found[1] || found[2]).replace(/[.,;:!?)]+$/, "");
      if (!known.has(path) || seen.has(path)) continue;
      seen.add(path);
      blocks.push({ type: "resource_link", name: path, uri: fileUri(s.cwd, path) });
    }
    return blocks;
  }

  function forgetMentions(sessionId) {
    picked.delete(sessionId);
  }

  function wire() {
    const input = byId("prompt-input");
    input.addEventListener("input", onInput);
    input.addEventListener("blur", () => setTimeout(close, 100));
  }

  return { mentionBlocks, mentionKey, forgetMentions, closeMentions: close, wireMentions: wire };
};
