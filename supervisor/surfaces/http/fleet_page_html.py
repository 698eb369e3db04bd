"""The fleet page itself: one HTML document with inline script and style, no external assets."""

from __future__ import annotations

import json

from supervisor.policy.identity.worker_env import NAMESPACES
from supervisor.surfaces.http.fleet_page_reap import REAP_HTML, REAP_SCRIPT
from supervisor.surfaces.http.fleet_page_servers import SERVERS_HTML, SERVERS_SCRIPT

__all__ = ["PAGE_HTML", "REFRESH_SECONDS"]

#: How often the page fetches /api/fleet again.
REFRESH_SECONDS = 5

PAGE_HTML = (
    """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>fleet-supervisor</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1b1f24; background: #fff; }
h1 { font-size: 20px; margin: 0 0 .3em; }
h2 { font-size: 16px; margin: 1.4em 0 .4em; }
table { border-collapse: collapse; min-width: 40em; }
th, td { border: 1px solid #c9d1d9; padding: 3px 8px; text-align: left; }
th { background: #eef2f6; }
.live { background: #d8f5dd; }
.stale { background: #ffe2c2; }
.none { color: #8a939c; }
.bad { color: #b3261e; font-weight: 600; }
#summary span, #servers-summary span { margin-right: 1.2em; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: .4em 0; }
figcaption { font-size: 12px; color: #57606a; }
button { font: inherit; padding: 3px 12px; }
</style>
</head>
<body data-loaded="0">
<h1>fleet-supervisor</h1>
<div id="summary">loading…</div>
<div id="error" class="bad"></div>
<h2>Fleet by instance and namespace</h2>
<table id="instances"></table>
<h2>Stale rows</h2>
<table id="stale"></table>
<h2>Orphaned workers (launching client gone)</h2>
<table id="orphans"></table>
<h2>Leases</h2>
<div id="leases"></div>
SERVERS_HTML
<h2>Plan preview <button id="plan-button" type="button">preview retirement plan</button></h2>
<div id="plan" class="none">not loaded (a plan is written to the audit log)</div>
REAP_HTML
<script>
"use strict";
const NAMESPACES = NAMESPACES_JSON;
const params = new URLSearchParams(location.search);
const headers = params.get("token") ? {"Authorization": "Bearer " + params.get("token")} : {};

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (cls) node.className = cls;
  return node;
}

function fill(table, head, rows) {
  table.replaceChildren();
  const tr = el("tr");
  head.forEach(h => tr.appendChild(el("th", h)));
  table.appendChild(tr);
  if (!rows.length) {
    const empty = el("tr");
    const td = el("td", "none", "none");
    td.colSpan = head.length;
    empty.appendChild(td);
    table.appendChild(empty);
  }
  rows.forEach(cells => {
    const row = el("tr");
    cells.forEach(c => row.appendChild(c instanceof Node ? c : el("td", c)));
    table.appendChild(row);
  });
}

async function getJSON(path) {
  const response = await fetch(path, {headers: headers, cache: "no-store"});
  const body = await response.json();
  if (!response.ok) throw new Error(body.detail || response.status);
  return body;
}

function render(fleet) {
  const summary = document.getElementById("summary");
  summary.replaceChildren(
    el("span", "live " + fleet.live_worker_count),
    el("span", "stale " + fleet.stale_worker_count),
    el("span", "historical " + fleet.historical_worker_count),
    el("span", "orphaned " + (fleet.orphaned_worker_count || 0)),
    el("span", "live_fleet_safe " + fleet.live_fleet_safe, fleet.live_fleet_safe ? "" : "bad"),
    el("span", "as " + fleet.viewer),
    el("span", "updated " + new Date().toLocaleTimeString()));
  const active = fleet.workers.filter(w => w.status === "active");
  const byInstance = new Map();
  active.forEach(w => {
    const key = w.client_instance_id || "(no instance id)";
    if (!byInstance.has(key)) byInstance.set(key, {});
    (byInstance.get(key)[w.namespace] ||= []).push(w);
  });
  fill(document.getElementById("instances"), ["instance", ...NAMESPACES],
    [...byInstance.entries()].sort().map(([iid, spaces]) => [iid, ...NAMESPACES.map(ns => {
      const ws = spaces[ns] || [];
      if (!ws.length) return el("td", "-", "none");
      return el("td", ws.map(w => (w.live ? "live " : "stale ") + w.pid).join(", "),
                ws.every(w => w.live) ? "live" : "stale");
    })]));
  fill(document.getElementById("stale"), ["worker", "namespace", "pid", "ownership", "reason"],
    fleet.workers.filter(w => w.stale).map(w => [w.worker_identity, w.namespace, w.pid,
      w.ownership_state, w.liveness.reason]));
  fill(document.getElementById("orphans"), ["worker", "namespace", "pid", "client pid", "reason"],
    (fleet.orphaned_workers || []).map(o => [o.worker_identity, o.namespace, o.pid,
      o.client_pid, o.reason_code]));
  const leases = fleet.leases;
  document.getElementById("leases").textContent = leases.readable
    ? leases.active_lease_count + " active; owner sessions: " +
      ((leases.owners.session_ids || []).join(", ") || "none")
    : "unreadable: " + leases.detail;
  document.body.dataset.loaded = "1";
  document.body.dataset.refreshes = String(Number(document.body.dataset.refreshes || 0) + 1);
}

async function refresh() {
  try {
    render(await getJSON("/api/fleet"));
    document.getElementById("error").textContent = "";
  } catch (err) {
    document.getElementById("error").textContent = "refresh failed: " + err.message;
  }
}

async function previewPlan() {
  const target = document.getElementById("plan");
  try {
    const plan = await getJSON("/api/plan");
    // The plan is compact: candidates in full, preserved rows as groups per reason
    // code with a count and the first examples.
    const groups = plan.preserved_summary || [];
    const examples = groups.flatMap(g => g.examples.map(e => ({...e, reason_code: g.reason_code})));
    const table = el("table");
    fill(table, ["worker", "reason code", "detail"],
      [...plan.candidates, ...examples].map(e => [e.worker_identity, e.reason_code, e.detail]));
    target.className = "";
    target.replaceChildren(
      el("div", "candidates " + plan.candidate_count + ", preserved " + plan.preserved_count +
        ", candidate_fingerprint " + plan.candidate_fingerprint),
      el("div", "preserved by reason: " +
        (groups.map(g => g.reason_code + " " + g.count).join(", ") || "none")),
      table);
    target.dataset.loaded = "1";
  } catch (err) {
    target.textContent = "plan failed: " + err.message;
  }
}

SERVERS_SCRIPT
REAP_SCRIPT
document.getElementById("plan-button").addEventListener("click", previewPlan);
refresh();
refreshServers();
setInterval(refresh, REFRESH_MS);
setInterval(refreshServers, REFRESH_MS);
if (params.get("plan") === "1") previewPlan();
</script>
</body>
</html>
""".replace("REFRESH_MS", str(REFRESH_SECONDS * 1000))
    .replace("SERVERS_HTML", SERVERS_HTML)
    .replace("SERVERS_SCRIPT", SERVERS_SCRIPT)
    .replace("REAP_HTML", REAP_HTML)
    .replace("REAP_SCRIPT", REAP_SCRIPT)
    .replace("NAMESPACES_JSON", json.dumps(NAMESPACES))
)
