// Tool cards in the transcript: a call's command or title, its status, its diffs and its
// output (long output folded, a command's whole spooled output paged on demand).
"use strict";

(window.AcpUi = window.AcpUi || {}).tools = (ui) => {
  const { $, el, fragment, state, store } = ui;

  const TOOL_KINDS = { bash: "execute", read_file: "read", list_files: "search", write_file: "edit", edit_file: "edit" };
  const TOOL_ICONS = { execute: "$", edit: "✎", read: "≡", search: "⌕" };
  const COLLAPSE_LINES = 30;

  const toolKind = (tool) => TOOL_KINDS[tool] || "other";

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
      const page = await ui.call("output", sessionId, toolCallId, next);
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
    const s = store.selected(state) || {};
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

  return { toolKind, toolBlock, exitStatus, storedStatus, finishTool, offerFullOutput, shortFile, showDiffs, storedDiff };
};
