// The agents a session can run (`_session/agents`), as the new-session form offers them:
// part of the page's state (see store.js, which includes these in its exports). No DOM.
"use strict";

((root, factory) => {
  const part = factory();
  if (typeof module === "object" && module.exports) module.exports = part;
  else (root.AcpUi = root.AcpUi || {}).storeAgents = part;
})(typeof self !== "undefined" ? self : this, () => {
  const BUILTIN = "builtin";

  // The token to ask for the agent list with (the new-session form asks each time it opens).
  function agentsWanted(state) {
    return ++state.agentsAsked;
  }

  // The agent list arrived: kept (builtin first, then the sidecar's order) unless a later
  // ask was made meanwhile. A sidecar without `_session/agents` (null) offers builtin alone.
  // Names and commands are untrusted text: kept as strings, drawn as text.
  function agentsArrived(state, list, asked) {
    if (asked !== state.agentsAsked) return false;
    const rows = (Array.isArray(list) ? list : []).filter((a) => a && typeof a.name === "string" && a.name);
    const builtin = rows.find((a) => a.name === BUILTIN) || { name: BUILTIN, command: "", available: true, source: "builtin" };
    const seen = new Set([BUILTIN]);
    const others = rows.filter((a) => !seen.has(a.name) && seen.add(a.name));
    state.agents = [builtin, ...others].map((a) => ({
      name: a.name,
      command: String(a.command || ""),
      available: a.available !== false,
      install: a.available === false && a.install ? String(a.install) : "",
      source: String(a.source || ""),
    }));
    return true;
  }

  // What the picker shows for an agent: its name, or why it cannot run and how to fix it.
  function agentLabel(agent) {
    if (agent.available) return agent.name;
    return `${agent.name} — not installed${agent.install ? `: ${agent.install}` : ""}`;
  }

  // Why a session with `name` would not start (null: it can): the form says this instead
  // of creating a session that fails at once.
  function agentProblem(state, name) {
    const agent = state.agents.find((a) => a.name === name);
    if (!agent || agent.available) return null;
    const how = agent.install ? ` Install it with: ${agent.install}` : ` Its command (${agent.command || "none"}) was not found.`;
    return `${agent.name} is not installed.${how}`;
  }

  // The agent a session runs, to be shown: null for our own loop (the usual case).
  function agentShown(session) {
    const name = session && typeof session.agent === "string" ? session.agent : BUILTIN;
    return name && name !== BUILTIN ? name : null;
  }

  return { agentsWanted, agentsArrived, agentLabel, agentProblem, agentShown };
});
