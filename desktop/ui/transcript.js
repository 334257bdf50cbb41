// The transcript: one page of the store (drawn from `state.transcript.messages`) plus,
// below it, what arrived live since the page was asked for (streamed text, tool cards,
// approval cards). When a turn ends the stored tail is fetched and replaces the live
// part, so the page always converges on the store. Tool cards are drawn by tools.js,
// per-turn changes and the Rewind menu by turns.js.
"use strict";

(window.AcpUi = window.AcpUi || {}).transcript = (ui) => {
  const { $, byId, el, fragment, markdownNode, state, store } = ui;

  // Entries are `TranscriptEntry` values (protocol/models.py): {index, type, ...}. Each
  // turn's entries end with a slot for what it changed (filled by turns.js).
  function messageNodes(entries) {
    const nodes = [];
    const tools = new Map();
    const firstUser = entries.find((m) => m.type === "user" && m.turn);
    let turn = firstUser && entries[0] !== firstUser ? firstUser.turn - 1 : null; // opened mid-turn
    let changed = false;
    const endTurn = () => turn && nodes.push(ui.turns.changesSlot(turn, changed));
    for (const m of entries) {
      if (m.type === "user") {
        endTurn();
        turn = m.turn || null;
        changed = false;
        nodes.push(withMessageActions(ui.turns.userMessage(m), m));
      } else if (m.type === "assistant") {
        if (m.text && m.html) nodes.push(markdownNode(m.html, { class: "msg agent md", "data-testid": "agent-message" }));
        else if (m.text) nodes.push(el("div", { class: "msg agent", "data-testid": "agent-message", text: m.text }));
        for (const call of m.toolCalls || []) {
          changed = changed || !ui.turns.readOnlyTool(call.tool);
          const block = ui.toolBlock(call.toolCallId, call.title, ui.toolKind(call.tool));
          ui.storedDiff(block, call);
          tools.set(call.toolCallId, block);
          nodes.push(block);
        }
      } else if (m.type === "tool_result") {
        let block = tools.get(m.toolCallId);
        if (!block) nodes.push((block = ui.toolBlock(m.toolCallId, m.tool || "tool", ui.toolKind(m.tool))));
        if (block.dataset.kind === "execute") ui.finishTool(block, m.text, ...ui.exitStatus(m.exitCode, m.exitCode === null || m.exitCode === undefined), m.html);
        else ui.finishTool(block, m.text, ...ui.storedStatus(m), m.html);
        if (m.outputTotal && !m.outputShown) ui.offerFullOutput(block, state.transcript && state.transcript.sessionId, m.toolCallId);
      } else if (m.type === "marker" && m.text) {
        const text = m.kind === "interrupted" ? `⚠ ${m.text}` : m.text;
        nodes.push(el("div", { class: "note", "data-testid": `note-${m.kind}`, text }));
      }
    }
    endTurn();
    return nodes;
  }

  // Retry, edit-and-resend and fork on each of the user's messages.
  function withMessageActions(node, m) {
    if (!m.turn || !node.classList.contains("user-turn")) return node;
    const act = (testid, label, title, run) =>
      el("button", { type: "button", class: "ghost small msg-action", "data-testid": testid, text: label, title, "aria-label": title, onclick: run });
    node.append(
      el(
        "div",
        { class: "msg-actions", role: "group", "aria-label": `Actions for turn ${m.turn}` },
        act("msg-retry", "Retry", "Send this message again", () => ui.resendText(m.text)),
        act("msg-edit", "Edit", "Edit and resend: the conversation (or the code too) goes back to before this message", () => ui.editAndResend(m, node)),
        act("msg-fork", "Fork", "Fork: a new session with the conversation before this message", () => ui.forkAt(m)),
      ),
    );
    return node;
  }

  function renderTranscript(keepScroll) {
    const t = state.transcript;
    const box = byId("transcript");
    const fromBottom = box.scrollHeight - box.scrollTop;
    const confirming = Boolean(document.activeElement.closest("[data-testid=rewind-confirm]"));
    $(".stored", box).replaceChildren(...messageNodes(t.messages));
    dropStoredTwins();
    ui.turns.fillSlots($(".stored", box));
    ui.turns.placeConfirm(confirming); // a rewind's confirmation, drawn again, keeps its focus
    byId("load-older").hidden = t.offset === 0;
    $(".transcript-empty", box).hidden = t.messages.length > 0 || $(".live", box).childElementCount > 0;
    box.scrollTop = keepScroll ? box.scrollHeight - fromBottom : box.scrollHeight;
  }

  // The live part is cleared before asking (not after), and a turn that ends while the
  // page loads queues its tail fetch behind the load (`t.tail`), so a message stored
  // meanwhile is never dropped and an approval card drawn meanwhile stays.
  async function loadTranscript(sessionId) {
    const t = store.openTranscript(state, sessionId);
    $(".live").replaceChildren();
    ui.renderPermissions();
    t.tail = ui.call("messages", sessionId, null, store.PAGE).then((page) => {
      store.firstPage(state, t, page);
    });
    await t.tail;
    if (!t.loaded || state.transcript !== t) return;
    renderTranscript(false);
    const want = store.scrollFor(state, sessionId);
    if (want !== null) byId("transcript").scrollTop = want;
    await restoreLive(sessionId);
  }

  // A call drawn live (its diff numbered, its output streaming) may be in the stored page
  // too while its turn runs: the live card stays, the stored copy goes.
  function dropStoredTwins() {
    for (const card of document.querySelectorAll(".live .tool[data-tool-call-id]")) {
      const twin = $(`.stored .tool[data-tool-call-id="${CSS.escape(card.dataset.toolCallId)}"]`);
      if (twin) twin.remove();
    }
  }

  // Streamed agent text is drawn as Markdown too, a few times a second (rendered by the
  // host like the stored copy); the stored copy replaces it when the turn ends.
  function renderStreaming(node) {
    if (node._timer) return;
    node._timer = setTimeout(async () => {
      node._timer = null;
      const raw = node._raw || node.textContent;
      const got = await ui.quietCall("markdown", raw);
      if (!got || !node.isConnected || !node.classList.contains("streaming")) return;
      follow(() => {
        node.replaceChildren(markdownNode(got.html));
        node.classList.add("md");
        node._rendered = true;
      });
      if ((node._raw || "") !== raw) renderStreaming(node);
    }, 300);
  }

  // A page that loads while a command runs (Rebuild UI, a switch back) asks the host for
  // the running calls' output so far; chunks pushed meanwhile carry a sequence number, so
  // nothing is drawn twice or missed.
  async function restoreLive(sessionId) {
    const s = state.sessions.get(sessionId);
    if (!s || s.status !== "running") return;
    const calls = (await ui.quietCall("live_calls", sessionId)) || [];
    if (state.selected !== sessionId) return;
    for (const c of calls) {
      let block = toolCard(c.toolCallId);
      if (!block) {
        block = ui.toolBlock(c.toolCallId, c.command || c.title, c.kind || "execute");
        liveAppend(block);
      }
      follow(() => $(".tool-out", block).replaceChildren(fragment(c.html)));
      block.dataset.seq = String(c.seq);
      block.dataset.streamed = "1";
    }
    for (const params of store.takeOrphans(state)) onUpdate(params);
  }

  function toolCard(toolCallId) {
    const sel = `.tool[data-tool-call-id="${CSS.escape(toolCallId)}"]`;
    return $(`.live ${sel}`) || $(`.stored ${sel}`);
  }

  const nearBottom = (box) => box.scrollHeight - box.scrollTop - box.clientHeight < 80;

  // Keep the newest output in view, unless the user scrolled up to read.
  function follow(change) {
    const box = byId("transcript");
    const atBottom = nearBottom(box);
    change();
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  async function loadOlder() {
    const t = state.transcript;
    const range = store.olderRange(t);
    if (!range) return;
    const page = await ui.call("messages", t.sessionId, range.offset, range.limit);
    if (store.olderPage(state, t, range.offset, page)) renderTranscript(true);
  }

  // After a turn: fetch what the store now holds past what we show; drop the live copy.
  // Nothing new and nothing live: nothing to redraw. A reader scrolled up stays put.
  function refetchTail() {
    const t = state.transcript;
    if (!t) return;
    t.tail = t.tail.then(async () => {
      let added = 0;
      for (;;) {
        const page = await ui.quietCall("messages", t.sessionId, t.end, store.TAIL);
        const got = store.tailPage(state, t, page);
        if (got === null) return;
        added += got;
        if (page.messages.length < store.TAIL) break;
      }
      const live = $(".live");
      if (!added && !live.childElementCount) return;
      const box = byId("transcript");
      const top = box.scrollTop;
      const atBottom = nearBottom(box);
      live.replaceChildren();
      renderTranscript(false);
      if (!atBottom) box.scrollTop = top;
    });
  }

  function liveAppend(node) {
    const box = byId("transcript");
    const atBottom = nearBottom(box);
    $(".live", box).append(node);
    $(".transcript-empty", box).hidden = true;
    if (atBottom) box.scrollTop = box.scrollHeight;
  }

  // Whether live content is drawn (streamed text that arrived while this page loaded).
  const hasLive = () => $(".live").childElementCount > 0;

  function onUsage(params, u) {
    store.usage(state, params.sessionId, u.used, u.size);
    if (params.sessionId === state.selected) ui.renderDetails();
  }

  function onUpdate(params) {
    if (params.update && params.update.sessionUpdate === "usage_update") return onUsage(params, params.update);
    if (!state.transcript || params.sessionId !== state.transcript.sessionId) return;
    const u = params.update;
    const live = $(".live");
    const text = u.content && u.content.text;
    if (u.sessionUpdate === "user_message_chunk") {
      liveAppend(el("div", { class: "msg user", text }));
    } else if (u.sessionUpdate === "agent_message_chunk") {
      const last = live.lastElementChild;
      if (last && last.classList.contains("streaming")) {
        last._raw = (last._raw || last.textContent) + text;
        if (!last._rendered) follow(() => (last.textContent += text));
        renderStreaming(last);
      } else liveAppend(el("div", { class: "msg agent streaming", "data-testid": "streaming", text }));
    } else if (u.sessionUpdate === "tool_call") {
      const last = live.lastElementChild;
      if (last) last.classList.remove("streaming");
      const block = ui.toolBlock(u.toolCallId, (u.rawInput && u.rawInput.command) || u.title, u.kind || "execute");
      ui.showDiffs(block, u.content, false); // open in the approval card; here once written
      liveAppend(block);
    } else if (u.sessionUpdate === "tool_call_update") {
      onToolUpdate(params, u);
    } else if (u.sessionUpdate === "config_option_update") {
      store.configArrived(state, params.sessionId, u.configOptions, false);
      if (params.sessionId === state.selected) ui.renderDetails();
    } else if (u.sessionUpdate === "current_mode_update") {
      const s = state.sessions.get(params.sessionId);
      if (s) ui.updateSession({ ...s, mode: u.currentModeId });
    }
  }

  function onToolUpdate(params, u) {
    const block = toolCard(u.toolCallId);
    if (!block) {
      // Its card is not drawn yet (a page loading mid-command): replayed once it is.
      store.orphan(state, params);
      return;
    }
    const meta = u._meta || {};
    const out = $(".tool-out", block);
    if (typeof meta.outputHtml === "string") {
      if ((meta.outputSeq || 0) > Number(block.dataset.seq || 0)) {
        follow(() => out.append(fragment(meta.outputHtml)));
        block.dataset.seq = String(meta.outputSeq || 0);
        block.dataset.streamed = "1";
      }
    } else if (typeof meta.output === "string") {
      follow(() => (out.textContent += meta.output));
      block.dataset.streamed = "1";
    }
    const finished = u.status === "completed" || u.status === "failed";
    if (u.content && u.content.length) {
      const output = u.content.map((c) => (c.content && c.content.text) || "").join("");
      const streamed = block.dataset.streamed === "1";
      if (finished) {
        const raw = u.rawOutput || {};
        // A command's streamed output (in colour) stays; the stored copy is plain text.
        const keep = streamed && block.dataset.kind === "execute" && out.textContent.length > 0;
        if (block.dataset.kind === "execute") ui.finishTool(block, output, ...ui.exitStatus(raw.exitCode, Boolean(raw.cancelled)), null, keep);
        else ui.finishTool(block, output, u.status === "completed" ? "done" : "failed", u.status === "completed");
        ui.showDiffs(block, u.content, true);
      } else if (!streamed) {
        follow(() => (out.textContent = output)); // the live output so far, whole
      }
    }
  }

  function wire() {
    byId("load-older").addEventListener("click", loadOlder);
  }

  return { loadTranscript, refetchTail, liveAppend, hasLive, nearBottom, onUpdate, wireTranscript: wire };
};
