// The top of the window: the banners (errors, notices, the sidecar's and the model
// provider's state), the sidecar pill, the colour theme and the narrow window's sidebar
// toggle.
"use strict";

(window.AcpUi = window.AcpUi || {}).topbar = (ui) => {
  const { $, byId } = ui;
  const { state } = ui;

  // `cause` ("session:ID", "sidecar") lets the banner clear itself once that is over.
  function showError(error, cause = "") {
    const provider = byId("provider-banner");
    const known = !provider.hidden && $(".banner-text", provider).textContent;
    if (known && String(error.message || "").includes(known)) return; // said once, at the top
    const banner = byId("error-banner");
    $(".banner-title", banner).textContent = `${error.title || "Error"}:`;
    $(".banner-text", banner).textContent = error.message || String(error.code);
    banner.dataset.code = String(error.code);
    banner.dataset.cause = cause;
    banner.hidden = false;
  }

  function clearError(cause) {
    const banner = byId("error-banner");
    if (cause === undefined || banner.dataset.cause === cause) banner.hidden = true;
  }

  // A session's last error, shown once: the failed prompt's own answer may have said it.
  function showSessionError(sessionId, text, lastError) {
    const banner = byId("error-banner");
    if (banner.hidden || !$(".banner-text", banner).textContent.includes(lastError)) showError({ title: "Session error", message: text }, `session:${sessionId}`);
    else banner.dataset.cause = `session:${sessionId}`;
  }

  // What an action did, with at most one follow-up (e.g. undo).
  function showNotice(text, action) {
    const banner = byId("notice-banner");
    $(".banner-text", banner).textContent = text;
    const button = byId("notice-action");
    button.hidden = !action;
    button.textContent = action ? action.label : "";
    button.onclick = action
      ? () => {
          banner.hidden = true;
          action.run();
        }
      : null;
    banner.hidden = false;
  }

  function showSidecarBanner(kind, text) {
    const banner = byId("sidecar-banner");
    banner.className = `banner ${kind}`;
    banner.dataset.pid = String((state.info && state.info.sidecar && state.info.sidecar.pid) || "");
    $(".banner-text", banner).textContent = text;
    banner.hidden = false;
  }

  // The sidecar banner goes once its cause is over; `pid`: only if it is still about it.
  function hideSidecarBanner(pid) {
    const banner = byId("sidecar-banner");
    if (pid === undefined || banner.dataset.pid === String(pid)) banner.hidden = true;
  }

  // A problem the sidecar found with its model provider at start (no API key, ...): said
  // once, at the top, until it is gone (a restarted sidecar that no longer reports it).
  function showProvider(problem) {
    const banner = byId("provider-banner");
    $(".banner-text", banner).textContent = problem || "";
    banner.hidden = !problem;
  }

  function renderSidecar(info) {
    const pill = byId("sidecar-state");
    pill.dataset.state = info.state;
    pill.dataset.pid = String(info.pid || "");
    pill.textContent = `sidecar: ${info.state}${info.pid ? ` · pid ${info.pid}` : ""}`;
  }

  // ---- theme and narrow windows --------------------------------------------------------

  const THEMES = ["system", "light", "dark"];
  const THEME_LABELS = { system: "◐ System", light: "☀ Light", dark: "☾ Dark" };

  function applyTheme(theme) {
    state.theme = THEMES.includes(theme) ? theme : "system";
    if (state.theme === "system") delete document.documentElement.dataset.theme;
    else document.documentElement.dataset.theme = state.theme;
    const button = byId("theme-toggle");
    button.textContent = THEME_LABELS[state.theme];
    button.setAttribute("aria-label", `Colour theme: ${state.theme}`);
  }

  async function cycleTheme() {
    const next = THEMES[(THEMES.indexOf(state.theme) + 1) % THEMES.length];
    applyTheme(next);
    await ui.quietCall("set_theme", next);
  }

  function toggleSidebar(open) {
    const show = open === undefined ? !document.body.classList.contains("sidebar-open") : open;
    document.body.classList.toggle("sidebar-open", show);
    byId("sidebar-toggle").setAttribute("aria-expanded", String(show));
  }

  function wire() {
    byId("theme-toggle").addEventListener("click", cycleTheme);
    byId("sidebar-toggle").addEventListener("click", () => toggleSidebar());
    for (const banner of document.querySelectorAll(".banner")) {
      $(".banner-close", banner).addEventListener("click", () => (banner.hidden = true));
    }
  }

  return {
    showError,
    clearError,
    showSessionError,
    showNotice,
    showSidecarBanner,
    hideSidecarBanner,
    showProvider,
    renderSidecar,
    applyTheme,
    toggleSidebar,
    wireTopbar: wire,
  };
};
