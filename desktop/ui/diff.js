// Line diffs for the page: computed from a file's old and new text (Myers' algorithm, for
// the diff of a write in its approval card and tool card) or read from a unified diff (a
// turn's `_session/changes`), drawn as unified hunks with line numbers, collapsible.
// All of it is the agent's text: it goes into the page as textContent, never as HTML.
// A hunk may come with syntax colours (`tokens`, from the bridge: desktop/diff_colours.py):
// per line, [class, text] pairs, drawn as spans of text whose class is a token class's
// short name (pygments.css colours them) or none; the row keeps its add/remove background.
"use strict";

window.Diff = (() => {
  const CONTEXT = 3; // unchanged lines shown around a change
  const MAX_EDIT = 2000; // past this many changed lines the middle is shown replaced whole
  const MAX_ROWS = 400; // rows drawn per diff; the rest is counted, not drawn

  function splitLines(text) {
    if (!text) return [];
    const lines = text.split("\n");
    if (lines[lines.length - 1] === "") lines.pop(); // a final newline ends a line, starts none
    return lines;
  }

  // Myers' O((N+M)D) shortest edit script: a list of ["=", i, j], ["-", i], ["+", j]
  // (i into a, j into b), or null when it needs more than `limit` edits.
  function myers(a, b, limit) {
    const n = a.length;
    const m = b.length;
    const max = Math.min(n + m, limit);
    const offset = max + 1;
    const v = new Int32Array(2 * max + 3);
    const trace = []; // trace[d]: v for k in -d-1..d+1 before step d
    for (let d = 0; d <= max; d++) {
      trace.push(v.slice(offset - d - 1, offset + d + 2));
      for (let k = -d; k <= d; k += 2) {
        let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
        let y = x - k;
        while (x < n && y < m && a[x] === b[y]) { x++; y++; }
        v[offset + k] = x;
        if (x >= n && y >= m) return backtrack(trace, n, m, d);
      }
    }
    return null;
  }

  function backtrack(trace, n, m, depth) {
    const ops = [];
    let x = n;
    let y = m;
    for (let d = depth; d > 0; d--) {
      const at = (k) => trace[d][k + d + 1];
      const k = x - y;
      const prevK = k === -d || (k !== d && at(k - 1) < at(k + 1)) ? k + 1 : k - 1;
      const prevX = at(prevK);
      const prevY = prevX - prevK;
      while (x > prevX && y > prevY) ops.push(["=", --x, --y]);
      ops.push(x === prevX ? ["+", prevY] : ["-", prevX]);
      x = prevX;
      y = prevY;
    }
    while (x > 0 && y > 0) ops.push(["=", --x, --y]);
    return ops.reverse();
  }

  // Every line of both texts as rows {kind: ctx|del|add, old, new, text}; line numbers from 1.
  function lineRows(oldText, newText) {
    const a = splitLines(oldText);
    const b = splitLines(newText);
    let head = 0;
    while (head < a.length && head < b.length && a[head] === b[head]) head++;
    let tail = 0;
    while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
    const midA = a.slice(head, a.length - tail);
    const midB = b.slice(head, b.length - tail);
    let ops = myers(midA, midB, MAX_EDIT);
    if (!ops) ops = [...midA.map((_, i) => ["-", i]), ...midB.map((_, j) => ["+", j])];
    const rows = [];
    for (let i = 0; i < head; i++) rows.push({ kind: "ctx", old: i + 1, new: i + 1, text: a[i] });
    for (const [op, at, atB] of ops) {
      if (op === "=") rows.push({ kind: "ctx", old: head + at + 1, new: head + atB + 1, text: midA[at] });
      else if (op === "-") rows.push({ kind: "del", old: head + at + 1, new: null, text: midA[at] });
      else rows.push({ kind: "add", old: null, new: head + at + 1, text: midB[at] }); // at: into b
    }
    for (let t = tail; t > 0; t--) {
      rows.push({ kind: "ctx", old: a.length - t + 1, new: b.length - t + 1, text: a[a.length - t] });
    }
    return rows;
  }

  // Only the changes and CONTEXT lines around them, each run opened by a hunk header.
  function hunks(rows) {
    const keep = new Array(rows.length).fill(false);
    rows.forEach((row, i) => {
      if (row.kind === "ctx") return;
      for (let j = Math.max(0, i - CONTEXT); j <= Math.min(rows.length - 1, i + CONTEXT); j++) keep[j] = true;
    });
    const out = [];
    for (let i = 0; i < rows.length; i++) {
      if (!keep[i]) continue;
      let end = i;
      while (end + 1 < rows.length && keep[end + 1]) end++;
      const run = rows.slice(i, end + 1);
      out.push({ kind: "hunk", text: hunkHeader(run, rows, i) }, ...run);
      i = end;
    }
    return out;
  }

  function hunkHeader(run, rows, start) {
    const olds = run.filter((r) => r.old !== null);
    const news = run.filter((r) => r.new !== null);
    // An empty side starts after the last line before the run (0 at the top of the file).
    const before = (side) => rows.slice(0, start).reduce((last, r) => (r[side] !== null ? r[side] : last), 0);
    const range = (list, side) => (list.length ? `${list[0][side]},${list.length}` : `${before(side)},0`);
    return `@@ -${range(olds, "old")} +${range(news, "new")} @@`;
  }

  // One file's section of a unified diff (its lines, headers included) as rows; `tokens`,
  // when given, holds each line's syntax colours (null: plain), aligned with `lines`.
  function unifiedRows(lines, tokens = null) {
    const rows = [];
    let oldNo = 0;
    let newNo = 0;
    let inHunk = false;
    for (const [at, line] of lines.entries()) {
      const colours = tokens && Array.isArray(tokens[at]) ? tokens[at] : null;
      const header = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/.exec(line);
      if (header) {
        oldNo = Number(header[1]);
        newNo = Number(header[2]);
        inHunk = true;
        rows.push({ kind: "hunk", text: line });
      } else if (!inHunk || line === "") {
        continue; // diff --git, index, ---, +++; the end of the text (a context line has a " ")
      } else if (line.startsWith("+")) {
        rows.push({ kind: "add", old: null, new: newNo++, text: line.slice(1), tokens: colours });
      } else if (line.startsWith("-")) {
        rows.push({ kind: "del", old: oldNo++, new: null, text: line.slice(1), tokens: colours });
      } else if (line.startsWith("\\")) {
        rows.push({ kind: "note", text: line.slice(2) });
      } else {
        rows.push({ kind: "ctx", old: oldNo++, new: newNo++, text: line.slice(1), tokens: colours });
      }
    }
    return rows;
  }

  // A multi-file unified diff (git's) as a Map of path -> that file's lines.
  function splitUnified(text) {
    const sections = [];
    for (const line of (text || "").split("\n")) {
      if (line.startsWith("diff --git ")) sections.push([line]);
      else if (sections.length) sections[sections.length - 1].push(line);
    }
    const byPath = new Map();
    for (const section of sections) {
      const named = (prefix) => section.find((l) => l.startsWith(prefix));
      const plus = named("+++ b/");
      const minus = named("--- a/");
      const path = plus ? plus.slice(6) : minus ? minus.slice(6) : section[0].slice(13).split(" b/")[0];
      byPath.set(path, section);
    }
    return byPath;
  }

  // ---- drawing -------------------------------------------------------------------------

  function node(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined && text !== null) n.textContent = String(text);
    return n;
  }

  function stat(rows) {
    const added = rows.filter((r) => r.kind === "add").length;
    const removed = rows.filter((r) => r.kind === "del").length;
    const box = node("span", "diff-stat");
    box.append(node("span", "plus", `+${added}`), " ", node("span", "minus", `−${removed}`));
    return box;
  }

  const TOKEN_CLASS = /^[A-Za-z0-9_-]{1,12}$/; // a Pygments short name, nothing else

  // A line's code: its text, or its tokens as spans when they spell exactly that text.
  function codeNode(row) {
    const code = node("span", "diff-code");
    const tokens = row.tokens;
    const whole = Array.isArray(tokens) && tokens.every((t) => Array.isArray(t) && t.length === 2)
      && tokens.map((t) => String(t[1])).join("") === row.text;
    if (!whole || !tokens.length) {
      code.textContent = row.text;
      return code;
    }
    code.classList.add("hl");
    for (const [cls, text] of tokens) {
      const span = node("span", TOKEN_CLASS.test(String(cls)) ? String(cls) : "", text);
      code.append(span);
    }
    return code;
  }

  function rowNode(row, numbers) {
    const line = node("div", `diff-row ${row.kind}`);
    line.dataset.testid = "diff-row";
    line.dataset.kind = row.kind;
    if (row.kind === "hunk" || row.kind === "note") {
      line.append(node("span", "diff-code", row.text));
      return line;
    }
    line.dataset.old = row.old === null || !numbers ? "" : String(row.old);
    line.dataset.new = row.new === null || !numbers ? "" : String(row.new);
    const mark = { add: "+", del: "-", ctx: " " }[row.kind];
    line.append(
      node("span", "ln", row.old === null || !numbers ? "" : row.old),
      node("span", "ln", row.new === null || !numbers ? "" : row.new),
      node("span", "mark", mark),
      codeNode(row),
    );
    return line;
  }

  // A collapsible view: <details> whose summary names the file and counts its lines.
  // `numbers: false` when the lines' places in the file are not known (a stored edit).
  function view(path, rows, { open = true, label = "", note = "", numbers = true } = {}) {
    const details = node("details", "diff");
    details.dataset.testid = "diff";
    details.dataset.path = path;
    details.open = open;
    const summary = node("summary");
    summary.dataset.testid = "diff-summary";
    summary.append(node("span", "diff-path", path), " ", stat(rows));
    if (label) summary.append(" ", node("span", "diff-label", label));
    if (!numbers) rows = rows.filter((r) => r.kind !== "hunk");
    const body = node("div", "diff-body");
    body.setAttribute("role", "group");
    body.setAttribute("aria-label", `Changes to ${path}`);
    for (const row of rows.slice(0, MAX_ROWS)) body.append(rowNode(row, numbers));
    if (rows.length > MAX_ROWS) body.append(node("div", "diff-more", `… ${rows.length - MAX_ROWS} more lines not shown`));
    if (!rows.length) body.append(node("div", "diff-more", note || "No line changes."));
    else if (note) body.append(node("div", "diff-more", note));
    details.append(summary, body);
    return details;
  }

  // One hunk as the sidecar gives it ({id, header, lines}) as a block of numbered rows:
  // the unit a review accepts or rejects (review.js, branch.js add their buttons to it).
  function hunkBlock(hunk) {
    const block = node("div", "diff-hunk");
    block.dataset.testid = "hunk";
    block.dataset.hunkId = String(hunk.id);
    const tokens = Array.isArray(hunk.tokens) ? [null, ...hunk.tokens] : null;
    const rows = unifiedRows([String(hunk.header), ...(hunk.lines || []).map(String)], tokens);
    for (const row of rows.slice(0, MAX_ROWS)) block.append(rowNode(row, true));
    if (rows.length > MAX_ROWS) block.append(node("div", "diff-more", `… ${rows.length - MAX_ROWS} more lines not shown`));
    return block;
  }

  // A file of hunks, collapsible like `view`: counts from the file (`additions`,
  // `deletions`), each hunk drawn by `drawHunk` (default: hunkBlock alone).
  function fileOfHunks(file, { open = true, label = "", drawHunk = hunkBlock } = {}) {
    const details = node("details", "diff");
    details.dataset.testid = "diff";
    details.dataset.path = file.path;
    details.open = open;
    const summary = node("summary");
    summary.dataset.testid = "diff-summary";
    const counts = node("span", "diff-stat");
    counts.append(node("span", "plus", `+${file.additions || 0}`), " ", node("span", "minus", `−${file.deletions || 0}`));
    summary.append(node("span", "diff-path", file.oldPath ? `${file.oldPath} → ${file.path}` : file.path), " ", counts);
    if (label) summary.append(" ", node("span", "diff-label", label));
    const body = node("div", "diff-body");
    body.setAttribute("role", "group");
    body.setAttribute("aria-label", `Changes to ${file.path}`);
    const hunks = file.hunks || [];
    for (const hunk of hunks) body.append(drawHunk(hunk));
    if (!hunks.length) body.append(node("div", "diff-more", file.binary ? "A binary file: no line changes to show." : "No line changes."));
    details.append(summary, body);
    return details;
  }

  return {
    hunkBlock,
    fileOfHunks,
    // The diff of a write: `oldText` null means the file is new.
    fromTexts(path, oldText, newText, options = {}) {
      const label = oldText === null || oldText === undefined ? "new file" : "";
      return view(path, hunks(lineRows(oldText, newText || "")), { label, ...options });
    },
    fromUnified(path, lines, options = {}) {
      return view(path, unifiedRows(lines), options);
    },
    splitUnified,
    lineRows,
    hunks,
  };
})();
