// DOM helpers every view uses: building elements, inserting the HTML the Python side
// rendered and sanitised, and small formatters. No state, no bridge (a copy falls back
// to the host's clipboard through `ui.quietCall`, looked up when it is needed).
"use strict";

(window.AcpUi = window.AcpUi || {}).dom = (ui) => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const byId = (testid, root = document) => $(`[data-testid="${testid}"]`, root);

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
          ok = Boolean(await ui.quietCall("copy_text", text));
        }
        copy.textContent = ok ? "Copied" : "Not copied";
        setTimeout(() => (copy.textContent = "Copy"), 1500);
      });
      wrap.append(copy, pre);
    }
    return node;
  }

  function tokens(n) {
    n = Number(n) || 0;
    return n >= 10000 ? `${Math.round(n / 1000)}k` : n >= 1000 ? `${(n / 1000).toFixed(1)}k` : String(n);
  }

  function badge(node, status) {
    node.className = `badge status-${status}`;
    node.textContent = status;
  }

  // The end of a path says most about it; keep that when the sidebar is too narrow.
  function shortPath(path, max = 34) {
    if (path.length <= max) return path;
    const tail = path.slice(-max);
    const cut = tail.indexOf("/");
    return `…${cut > 0 ? tail.slice(cut) : tail}`;
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

  function announce(text) {
    const node = byId("announcer");
    node.textContent = "";
    setTimeout(() => (node.textContent = text), 50);
  }

  function fillOptions(select, options) {
    select.replaceChildren(...options.map((o) => el("option", { value: o.id, text: o.name, title: o.description || "" })));
  }

  return { $, byId, el, fragment, markdownNode, tokens, badge, shortPath, relTime, announce, fillOptions };
};
