// The page's only link to Python: calls go to `window.pywebview.api` (the js_api bridge,
// desktop/bridge.py) and pushed events come in through `window.app.onPush` (queued by the
// store until the first full load is done, then handed to the view that draws them).
"use strict";

(window.AcpUi = window.AcpUi || {}).bridge = (ui) => {
  const { state, store } = ui;

  // A call whose failure the user should see (in the error banner): null on failure.
  async function call(name, ...args) {
    let result;
    try {
      result = await window.pywebview.api[name](...args);
    } catch (err) {
      ui.showError({ title: "Bridge error", message: String((err && err.message) || err) });
      return null;
    }
    if (result && result.error) {
      ui.showError(result.error);
      return null;
    }
    return result;
  }

  // A call whose failure changes nothing the user must know: null on failure.
  async function quietCall(name, ...args) {
    try {
      const result = await window.pywebview.api[name](...args);
      return result && result.error ? null : result;
    } catch (err) {
      return null;
    }
  }

  // A call whose error the caller shows itself (in a form): the answer, or {error}.
  async function ask(name, ...args) {
    try {
      return await window.pywebview.api[name](...args);
    } catch (err) {
      return { error: { title: "Bridge error", message: String((err && err.message) || err) } };
    }
  }

  function handle(event) {
    if (event.type === "notification" && event.method === "_session/state") ui.onState(event.params);
    else if (event.type === "notification" && event.method === "session/update" && event.params.update && event.params.update.sessionUpdate === "plan") ui.onPlan(event.params);
    else if (event.type === "notification" && event.method === "session/update") ui.onUpdate(event.params);
    else if (event.type === "notification" && event.method === "_session/queue_update") ui.onQueueUpdate(event.params);
    else if (event.type === "notification" && event.method === "_session/turn_changes") ui.turns.onTurnChanges(event.params);
    else if (event.type === "host") ui.onHost(event.event, event.data);
    else if (event.type === "bridge" && event.event === "auto_resumed") ui.onAutoResumed(event.data);
    else if (event.type === "bridge" && event.event === "prompt_failed") ui.onPromptFailed(event.data);
    else if (event.type === "bridge" && event.event === "select_session") ui.onSelectSession(event.data);
  }

  // What was pushed before the first load finished, in order (then pushes go straight on).
  function booted() {
    for (const event of store.booted(state)) handle(event);
  }

  // Boot once the bridge is there (it may be before this script runs, or after).
  function start(boot) {
    window.app = {
      onPush(batch) {
        for (const event of store.enqueue(state, batch)) handle(event);
      },
    };
    if (window.pywebview && window.pywebview.api && window.pywebview.api.page_ready) boot();
    else window.addEventListener("pywebviewready", boot);
  }

  return { call, quietCall, ask, booted, start };
};
