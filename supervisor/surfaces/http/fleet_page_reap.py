"""The fleet page's reap of leaked MCP servers: a plan preview, and a button that applies it."""

from __future__ import annotations

__all__ = ["REAP_HTML", "REAP_SCRIPT"]

#: The section (placed after the plan preview).
REAP_HTML = """<h2>Leaked MCP servers
<button id="reap-plan-button" type="button">preview reap plan</button>
<button id="reap-apply-button" type="button" disabled>reap</button></h2>
<div id="reap" class="none">not loaded (reaping needs a token with the retire grant)</div>
<div id="reap-result"></div>
"""

#: Its script (uses the page's el, fill, getJSON, headers and params); the apply button
#: posts the previewed plan's token as JSON, the page's only request that changes anything.
REAP_SCRIPT = """function reapMib(bytes) {
  return bytes === null || bytes === undefined ? "?" : (bytes / 1048576).toFixed(1);
}

let reapToken = null;

async function previewReap() {
  const target = document.getElementById("reap");
  const apply = document.getElementById("reap-apply-button");
  apply.disabled = true;
  try {
    const plan = await getJSON("/api/reap/plan");
    if (plan.success === false) throw new Error(plan.code + ": " + (plan.reasons || []).join("; "));
    const rows = [...plan.targets.map(e => ["reap", e]), ...plan.kept.map(e => ["keep", e])];
    const table = el("table");
    fill(table, ["pid", "verdict", "reason", "MiB", "processes", "command"],
      rows.map(([verdict, e]) => [e.pid, verdict, e.reason_code, reapMib(e.rss_bytes),
        e.members.map(m => m.pid).join(", "), e.command.join(" ")]));
    target.className = "";
    target.replaceChildren(
      el("div", "targets " + plan.target_count + " of " + plan.server_count + " servers, " +
        reapMib(plan.target_rss_bytes) + " MiB; duplicate groups of live clients " +
        plan.duplicate_count + " (never reaped); plan_token " + plan.plan_token),
      table);
    reapToken = plan.plan_token;
    apply.textContent = "reap " + plan.target_count + " orphaned server tree(s)";
    apply.disabled = plan.target_count === 0;
    target.dataset.loaded = "1";
  } catch (err) {
    target.textContent = "reap plan failed: " + err.message;
  }
}

async function applyReap() {
  const result = document.getElementById("reap-result");
  document.getElementById("reap-apply-button").disabled = true;
  try {
    // A JSON body: a form on another site cannot send one without a preflight.
    const response = await fetch("/api/reap/apply", {
      method: "POST", cache: "no-store", body: JSON.stringify({plan_token: reapToken}),
      headers: {...headers, "Content-Type": "application/json"}});
    const body = await response.json();
    if (!response.ok || body.success === false) {
      result.className = "bad";
      result.textContent = "reap refused: " + (body.code || body.error) + ": " +
        (body.reasons || [body.detail]).join("; ");
    } else {
      result.className = "";
      result.textContent = "reaped " + body.reaped_count + " of " + body.target_count + ", " +
        reapMib(body.rss_bytes_freed) + " MiB freed: " +
        body.targets.map(t => t.pid + " " + t.outcome).join(", ");
    }
  } catch (err) {
    result.className = "bad";
    result.textContent = "reap failed: " + err.message;
  }
  result.dataset.done = "1";
}

document.getElementById("reap-plan-button").addEventListener("click", previewReap);
document.getElementById("reap-apply-button").addEventListener("click", applyReap);
if (params.get("reap") === "1") previewReap();
"""
