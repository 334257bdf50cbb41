// The sidebar: the session list (by last activity, optionally grouped by repository), its
// search and archived view, a worktree session's branch badges, and keyboard moves.
//
// It draws a page of items (SIDEBAR_PAGE more each time its end scrolls into view), so
// thousands of sessions cost what one page costs; a change to one session moves or
// redraws its item alone (patchItem).
"use strict";

(window.AcpUi = window.AcpUi || {}).sidebar = (ui) => {
  const { $, byId, el, badge, shortPath, relTime, state, store } = ui;

  function renderSidebar() {
    const list = byId("session-list");
    const focusedId = document.activeElement && document.activeElement.closest && document.activeElement.closest("[data-testid=session-item]");
    const keep = focusedId ? focusedId.dataset.sessionId : null;
    const all = store.visibleSessions(state);
    const shown = all.slice(0, state.sidebarLimit);
    const nodes = state.groupByProject ? groupedItems(shown, all) : shown.map(sessionItem);
    if (all.length > shown.length) nodes.push(moreItem(all.length - shown.length));
    else if (state.listPending && !state.filterIds) nodes.push(loadingItem());
    list.replaceChildren(...nodes);
    list.dataset.total = String(all.length);
    if (!list.querySelector("[tabindex='0']") && list.querySelector("[data-testid=session-item]")) list.querySelector("[data-testid=session-item]").tabIndex = 0;
    if (keep) {
      // Focus stays in the list, on the selected item (arrow keys move the selection).
      const again = list.querySelector(`[data-session-id="${CSS.escape(state.selected || keep)}"]`) || list.querySelector(`[data-session-id="${CSS.escape(keep)}"]`);
      if (again) again.focus();
    }
    $(".sidebar-empty").hidden = state.sessions.size > 0;
  }

  // Grouped by repository (a worktree session under its main repository, any other under
  // its folder): the group with the latest activity first; the page limit counts
  // sessions, and each group's header counts all of its sessions.
  function groupedItems(shown, all) {
    const nodes = [];
    for (const group of store.repoGroups(shown, all)) {
      nodes.push(
        el(
          "li",
          { class: "group-header", "data-testid": "session-group", "data-cwd": group.repo, "data-repo": group.repo, role: "presentation", title: group.repo },
          el("span", { class: "group-name", text: shortPath(group.repo, 30) }),
          el("span", { class: "group-count", text: String(group.count) }),
        ),
      );
      nodes.push(...group.members.map(sessionItem));
    }
    return nodes;
  }

  function moreItem(left) {
    const more = el("li", { class: "sidebar-more", "data-testid": "sidebar-more", role: "presentation" });
    more.append(el("button", { type: "button", class: "ghost small", text: `${left} more…`, "aria-label": `Show ${Math.min(left, store.SIDEBAR_PAGE)} more sessions` }));
    more.firstChild.addEventListener("click", showMore);
    observeEnd(more);
    return more;
  }

  // The list's later pages are still on their way (the first is drawn at once).
  function loadingItem() {
    return el("li", { class: "sidebar-more", "data-testid": "sidebar-loading", role: "presentation", text: "Loading more sessions…" });
  }

  function showMore() {
    const list = byId("session-list");
    const top = list.scrollTop;
    store.showMore(state);
    renderSidebar();
    list.scrollTop = top;
  }

  // The next page comes as the end of the list scrolls into view.
  let sidebarObserver = null;
  function observeEnd(node) {
    if (!sidebarObserver && "IntersectionObserver" in window) {
      const grow = (seen) => seen.some((e) => e.isIntersecting) && showMore();
      sidebarObserver = new IntersectionObserver(grow, { root: byId("session-list"), rootMargin: "200px" });
    }
    if (sidebarObserver) sidebarObserver.observe(node);
  }

  // One session changed: redraw its item where it is, or move it to its new place in
  // the activity order; false when only a whole redraw is right (grouped, a filtered
  // view, archived or not, or never drawn and now among the drawn).
  function patchItem(s, before) {
    if (!before || state.groupByProject || state.filterIds || Boolean(s.archived) !== Boolean(before.archived)) return false;
    const list = byId("session-list");
    const old = list.querySelector(`[data-testid=session-item][data-session-id="${CSS.escape(s.sessionId)}"]`);
    const items = [...list.querySelectorAll("[data-testid=session-item]")];
    const last = items.length ? state.sessions.get(items[items.length - 1].dataset.sessionId) : null;
    const activity = String(s.updatedAt || "");
    const drawnMore = list.querySelector("[data-testid=sidebar-more]");
    if (!old && drawnMore && last && activity < String(last.updatedAt || "")) return true; // below the page: drawn when reached
    if (!old && !drawnMore) return false;
    const focused = old && document.activeElement === old;
    const node = sessionItem(s);
    const next = items.find((i) => i !== old && String((state.sessions.get(i.dataset.sessionId) || {}).updatedAt || "") <= activity);
    if (old) old.remove();
    list.insertBefore(node, next || drawnMore || null);
    if (focused) node.focus();
    return true;
  }

  function sessionItem(s) {
    const status = el("span", { "data-testid": "session-status" });
    badge(status, s.awaitingPermission ? "waiting" : s.status);
    if (s.awaitingPermission) status.textContent = "waiting for approval";
    const selected = s.sessionId === state.selected;
    const agent = store.agentShown(s); // null for the builtin loop: nothing to say
    const wt = store.worktreeBadges(s);
    const item = el(
      "li",
      {
        class: "session-item", "data-testid": "session-item", "data-session-id": s.sessionId,
        role: "option", "aria-selected": String(selected), tabindex: selected || (!state.selected && !state.sessions.size) ? "0" : "-1",
        title: `${s.title}\n${s.cwd}${agent ? `\nagent: ${agent}` : ""}`,
        "aria-label": `${s.title}, ${s.awaitingPermission ? "waiting for approval" : s.status}${agent ? `, agent ${agent}` : ""}${wt ? `, ${wt.label}` : ""}`,
      },
      el(
        "div",
        { class: "item-row" },
        el("span", { class: "item-title", text: s.title, title: s.title }),
        store.waitingFor(state, s) === "unseen" ? el("span", { class: "item-unseen", "data-testid": "session-unseen", text: "●", title: "a turn ended since you last looked", "aria-label": "new reply" }) : null,
        agent ? el("span", { class: "item-agent", "data-testid": "session-agent", text: agent, title: `agent: ${agent}` }) : null,
        status,
      ),
      el(
        "div",
        { class: "item-row" },
        el("span", { class: "item-cwd", text: shortPath(s.cwd), title: s.cwd }),
        s.interrupted
          ? el("span", { class: "interrupted", "data-testid": "session-interrupted", text: "⚠ interrupted" })
          : null,
        s.archived ? el("span", { class: "item-gen", "data-testid": "session-archived", text: "archived" }) : null,
        el("span", { class: "item-time", "data-testid": "session-time", text: relTime(s.updatedAt), title: s.updatedAt }),
        el("span", { class: "item-gen", "data-testid": "session-generation", text: `gen ${s.generation}` }),
      ),
      worktreeRow(s),
    );
    item.classList.toggle("selected", selected);
    item.addEventListener("click", () => ui.select(s.sessionId));
    item.addEventListener("keydown", (e) => onItemKey(e, s.sessionId));
    return item;
  }

  // A worktree session's badges: its branch, ↑ahead ↓behind its base (while live), ● for
  // uncommitted work; redrawn with the item whenever its summary changes.
  function worktreeRow(s) {
    const b = store.worktreeBadges(s);
    if (!b) return null;
    return el(
      "div",
      { class: "item-row wt-row", title: b.label },
      el("span", { class: "item-branch", "data-testid": "session-branch", text: `⎇ ${b.branch}`, title: b.label }),
      b.sync ? el("span", { class: "item-sync", "data-testid": "session-sync", text: b.sync, title: `${b.ahead || 0} commits ahead of ${b.base}, ${b.behind || 0} behind` }) : null,
      b.dirty ? el("span", { class: "item-dirty", "data-testid": "session-dirty", text: "●", title: "uncommitted changes in the worktree", "aria-label": "uncommitted changes" }) : null,
    );
  }

  // A summary learnt (a push, an answer): into the store, then its item and the details
  // drawn again. False when the page's copy was newer (nothing changed).
  function updateSession(summary) {
    const got = store.learn(state, summary);
    if (!got) return false;
    drawLearnt(got);
    return true;
  }

  // What `store.learn` (or `store.pushedState`) returned, drawn.
  function drawLearnt(got) {
    if (!patchItem(got.session, got.before)) renderSidebar();
    if (got.session.sessionId === state.selected) ui.renderDetails();
  }

  function toggleGrouping() {
    state.groupByProject = byId("group-by-project").checked;
    renderSidebar();
  }

  let searchTimer = null;
  function onSearchInput() {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(runSearch, 250);
  }

  async function runSearch() {
    const query = byId("session-search").value.trim();
    const archived = byId("show-archived").checked;
    if (!query && !archived) {
      store.clearFilter(state);
      renderSidebar();
      return;
    }
    const found = await ui.call("list_sessions", query, archived);
    if (!found || byId("session-search").value.trim() !== query || byId("show-archived").checked !== archived) return;
    store.searchArrived(state, found);
    renderSidebar();
    byId("session-list").dataset.query = query;
  }

  // Arrows move through the sidebar (and select); Home/End jump; Enter selects.
  function onItemKey(e, sessionId) {
    let items = [...document.querySelectorAll("[data-testid=session-item]")];
    const at = items.findIndex((i) => i.dataset.sessionId === sessionId);
    if ((e.key === "End" || (e.key === "ArrowDown" && at === items.length - 1)) && byId("sidebar-more")) {
      // The next page (End: all of them), then move into it.
      store.showMore(state, e.key === "End");
      renderSidebar();
      items = [...document.querySelectorAll("[data-testid=session-item]")];
    }
    let to = null;
    if (e.key === "ArrowDown") to = Math.min(items.length - 1, at + 1);
    else if (e.key === "ArrowUp") to = Math.max(0, at - 1);
    else if (e.key === "Home") to = 0;
    else if (e.key === "End") to = items.length - 1;
    else if (e.key === "Enter" || e.key === " ") {
      e.preventDefault();
      ui.select(sessionId).then(() => byId("prompt-input").focus());
      return;
    } else return;
    e.preventDefault();
    const target = items[to];
    if (!target) return;
    ui.select(target.dataset.sessionId, false).then(() => {
      const again = document.querySelector(`[data-testid=session-item][data-session-id="${CSS.escape(target.dataset.sessionId)}"]`);
      if (again) again.focus();
    });
  }

  function wire() {
    byId("session-search").addEventListener("input", onSearchInput);
    byId("show-archived").addEventListener("change", runSearch);
    byId("group-by-project").addEventListener("change", toggleGrouping);
  }

  return { renderSidebar, updateSession, drawLearnt, runSearch, wireSidebar: wire };
};
