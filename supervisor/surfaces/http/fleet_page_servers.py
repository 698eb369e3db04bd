"""The fleet page's MCP servers section: counts, charts of memory and of counts over time."""

from __future__ import annotations

__all__ = ["SERVERS_HTML", "SERVERS_SCRIPT"]

SERVERS_HTML = """<h2>MCP servers on this host</h2>
<div id="servers-summary" class="none">loading…</div>
<div class="charts">
<figure><figcaption>memory by client</figcaption><svg id="chart-client"></svg></figure>
<figure><figcaption>memory by server command</figcaption><svg id="chart-command"></svg></figure>
<figure><figcaption>orphaned and duplicate groups over time</figcaption>
<svg id="chart-history"></svg></figure>
</div>
<table id="servers"></table>
<h3>Duplicate servers</h3>
<table id="duplicates"></table>
<h3>Budgets</h3>
<table id="budgets"></table>
"""

SERVERS_SCRIPT = r"""
const SVG = "http://www.w3.org/2000/svg";
function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  Object.entries(attrs || {}).forEach(([k, v]) => node.setAttribute(k, String(v)));
  if (text !== undefined) node.textContent = String(text);
  return node;
}
function mib(bytes) { return (Number(bytes || 0) / 1048576).toFixed(1) + " MiB"; }

function bars(svg, items) {
  svg.replaceChildren();
  const rows = items.slice(0, 8), width = 360, row = 18;
  svg.setAttribute("width", width);
  svg.setAttribute("height", Math.max(row, rows.length * row));
  const top = Math.max(1, ...rows.map(r => r.value));
  rows.forEach((r, i) => {
    const w = Math.max(1, Math.round((width - 170) * r.value / top));
    svg.appendChild(svgEl("rect", {x: 0, y: i * row + 2, width: w, height: row - 4,
                                  fill: "#5b8def", "data-label": r.label}));
    svg.appendChild(svgEl("text", {x: w + 4, y: i * row + 13, "font-size": 11},
                          r.label.slice(0, 28) + " " + mib(r.value)));
  });
  if (!rows.length) svg.appendChild(svgEl("text", {x: 0, y: 13, "font-size": 11}, "none"));
}

function lines(svg, history) {
  svg.replaceChildren();
  const width = 360, height = 80;
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  const series = [["orphaned", "#b3261e"], ["duplicate_groups", "#e8a33d"]];
  const top = Math.max(1, ...history.flatMap(p => series.map(([k]) => p[k])));
  const step = history.length > 1 ? width / (history.length - 1) : 0;
  series.forEach(([key, colour]) => {
    const points = history.map((p, i) =>
      (i * step).toFixed(1) + "," + (height - 4 - (height - 8) * p[key] / top).toFixed(1));
    svg.appendChild(svgEl("polyline", {points: points.join(" "), fill: "none",
                                      stroke: colour, "stroke-width": 2, "data-series": key}));
  });
  const last = history[history.length - 1] || {orphaned: 0, duplicate_groups: 0};
  svg.appendChild(svgEl("text", {x: 4, y: 12, "font-size": 11},
    "orphaned " + last.orphaned + ", duplicate groups " + last.duplicate_groups));
}

// An idle time from the kernel's I/O counters; "?" when they could not be read.
function idleText(seconds) {
  if (seconds === null || seconds === undefined) return "?";
  if (seconds >= 3600) return (seconds / 3600).toFixed(1) + " h";
  return seconds >= 60 ? (seconds / 60).toFixed(1) + " min" : Math.round(seconds) + " s";
}

function renderServers(view) {
  const kinds = Object.entries(view.by_provenance || {}).map(([k, v]) => k + " " + v).join(", ");
  const summary = document.getElementById("servers-summary");
  summary.className = "";
  summary.replaceChildren(
    el("span", "servers " + view.servers.length + " (" + kinds + ")"),
    el("span", "orphaned " + view.orphaned, view.orphaned ? "bad" : ""),
    el("span", "duplicate groups " + view.duplicate_groups),
    el("span", "repeating " + mib(view.repeated_bytes)),
    el("span", "memory " + mib(view.memory_bytes)),
    el("span", view.enabled ? "sweeps " + view.sweeps : "discovery sweeps off"));
  const byClient = Object.entries(view.memory_by_client || {})
    .map(([label, value]) => ({label, value})).sort((a, b) => b.value - a.value);
  bars(document.getElementById("chart-client"), byClient);
  bars(document.getElementById("chart-command"),
       (view.by_command || []).map(r => ({label: r.key, value: r.memory_bytes})));
  lines(document.getElementById("chart-history"), view.history || []);
  fill(document.getElementById("servers"),
    ["pid", "provenance", "owner", "owner alive", "replaced", "memory", "cpu %", "idle",
     "children", "command", "evidence"],
    view.servers.map(s => [s.process.pid, s.provenance,
      s.owner ? s.owner.name + " " + s.owner.process.pid : "-",
      el("td", s.owner ? String(s.owner.alive) : "-", s.orphaned ? "bad" : ""),
      s.superseded_by ? "superseded by " + s.superseded_by.pid : "-",
      mib(s.memory_bytes), s.usage.cpu_percent === null ? "-" : s.usage.cpu_percent,
      idleText(s.idle_seconds), s.usage.children.length, s.command.join(" ").slice(0, 80),
      s.evidence.join(", ")]));
  fill(document.getElementById("duplicates"), ["command", "directory", "servers", "clients",
                                               "repeating"],
    view.duplicates.map(g => [g.command.join(" ").slice(0, 80), g.cwd,
      g.servers.map(s => s.pid).join(", "), g.clients.map(c => c || "-").join(", "),
      mib(g.repeated_bytes)]));
  fill(document.getElementById("budgets"),
    ["budget", "pid", "name", "memory", "cap", "over the cap for", "idle", "idle limit", "due"],
    (view.budgets || []).map(b => [b.budget.pattern, b.process.pid, b.name,
      b.memory_bytes === null ? "?" : mib(b.memory_bytes),
      b.budget.memory_bytes === null ? "-" : mib(b.budget.memory_bytes),
      b.over_seconds === null ? "-" :
        idleText(b.over_seconds) + " of " + idleText(b.budget.memory_hold_seconds),
      idleText(b.idle_seconds),
      b.budget.idle_seconds === null ? "-" : idleText(b.budget.idle_seconds),
      el("td", b.due || "-", b.due ? "bad" : "")]));
  document.body.dataset.serversLoaded = "1";
}

async function refreshServers() {
  try {
    renderServers(await getJSON("/api/servers"));
  } catch (err) {
    document.getElementById("servers-summary").textContent = "servers: " + err.message;
  }
}
"""
