// The agent's plan, pinned above the composer: the selected session's latest ACP `plan`
// update (the builtin agent's `update_plan` tool, or an external agent's), each entry with
// its mark (✓ done, ◐ in progress, ○ pending); collapsible. After a rebuild or a switch it
// comes back from the host (the last plan pushed), else from the transcript's last
// `update_plan` call. Entries are drawn as text, never as HTML.
"use strict";

(window.AcpUi = window.AcpUi || {}).plan = (ui) => {
  const { byId, el, state, store } = ui;

  function renderPlan() {
    const box = byId("plan");
    const view = state.selected ? store.planView(state, state.selected) : null;
    box.hidden = !view;
    if (!view) return;
    const toggle = byId("plan-toggle");
    toggle.setAttribute("aria-expanded", String(state.planOpen));
    byId("plan-summary").textContent = `Plan · ${view.done}/${view.total} done${view.current ? ` · now: ${view.current}` : ""}`;
    const list = byId("plan-list");
    list.hidden = !state.planOpen;
    list.replaceChildren(
      ...view.rows.map((r) =>
        el(
          "li",
          { class: `plan-entry ${r.status}`, "data-testid": "plan-entry", "data-status": r.status, "aria-label": `${r.label}: ${r.text}` },
          el("span", { class: "plan-mark", "data-testid": "plan-mark", text: r.mark, title: r.label, "aria-hidden": "true" }),
          el("span", { class: "plan-text", text: r.text }),
          r.high ? el("span", { class: "plan-high", text: "high", title: "high priority" }) : null,
        ),
      ),
    );
  }

  function onPlan(params) {
    if (store.planArrived(state, params.sessionId, params.update.entries) && params.sessionId === state.selected) renderPlan();
  }

  // A session selected (or the page rebuilt): its plan as the host last saw it, else as
  // the transcript shown holds it.
  async function loadPlan(sessionId) {
    const got = await ui.quietCall("plan", sessionId);
    if (state.selected !== sessionId) return;
    let entries = got && Array.isArray(got.entries) ? got.entries : null;
    const t = state.transcript;
    if (!entries && t && t.loaded && t.sessionId === sessionId) entries = store.planFromEntries(t.messages);
    if (entries && !state.plans.has(sessionId)) store.planArrived(state, sessionId, entries);
    renderPlan();
  }

  function wire() {
    byId("plan-toggle").addEventListener("click", () => {
      state.planOpen = !state.planOpen;
      renderPlan();
    });
  }

  return { renderPlan, onPlan, loadPlan, wirePlan: wire };
};
