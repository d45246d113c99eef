// The HTML, CSS and JavaScript of the inspector's page, served from memory by server.cpp.
#include "inspector/web_page.hpp"

namespace mactor::inspector {
namespace {

constexpr std::string_view page = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>mactor inspector</title>
<style>
body { font: 13px/1.35 system-ui, sans-serif; margin: 12px 16px; color: #222; background: #fff; }
h1 { font-size: 17px; margin: 0 0 6px 0; }
#status { color: #555; margin-bottom: 8px; }
#status.error { color: #b00020; font-weight: bold; }
#stalls { display: none; border: 2px solid #d62728; background: #fde8e8; padding: 6px 10px;
          margin-bottom: 10px; font-family: monospace; white-space: pre-wrap; }
#stalls b { color: #d62728; }
#chart { border: 1px solid #ccc; display: block; margin-bottom: 10px; }
table { border-collapse: collapse; font-family: monospace; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 2px 8px; text-align: left; }
th { background: #f3f3f3; }
td.num { text-align: right; }
tr.stalled td { background: #fde8e8; color: #b00020; }
</style></head>
<body>
<h1>mactor inspector</h1>
<div id="status">connecting...</div>
<div id="stalls"></div>
<svg id="chart" width="1150" height="60" xmlns="http://www.w3.org/2000/svg"></svg>
<table id="actors"><thead><tr><th>kind</th><th>rank</th><th>name</th><th>activity</th>
<th>for (s)</th><th>mailbox</th><th>msgs/s</th><th>sent</th><th>received</th><th>allocated</th>
<th>max allocated</th><th>reserved</th><th>activations</th></tr></thead>
<tbody></tbody></table>
<h2 id="experts_title" style="display: none"></h2>
<table id="experts" style="display: none"><thead><tr><th>layer</th><th>max/mean</th><th>tokens per expert</th></tr>
</thead><tbody></tbody></table>
<script>
"use strict";
const token = new URLSearchParams(location.search).get("token") || "";
const svgNS = "http://www.w3.org/2000/svg";
const colours = { "F": "#4c78a8", "B": "#f58518", "opt": "#54a24b", "dp-sync": "#b279a2",
                  "RF": "#72b7b2", "SF": "#72b7b2", "RB": "#72b7b2", "SB": "#72b7b2" };
const transfers = new Set(["RF", "SF", "RB", "SB"]);
const other = "#9d9d9d";

function el(name, attrs, text) {
  const e = document.createElementNS(svgNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
}

function niceStep(span, ticks) {
  const raw = span / ticks, p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function drawChart(events) {
  const svg = document.getElementById("chart");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const W = 1150, left = 64, right = 12, top = 22, rowH = 30;
  if (!events.length) {
    svg.setAttribute("height", 40);
    svg.appendChild(el("text", {x: 10, y: 24, fill: "#777"}, "no timeline yet (the first iteration has not finished)"));
    return;
  }
  const ranks = [...new Set(events.map(e => e.rank))].sort((a, b) => a - b);
  const t0 = Math.min(...events.map(e => e.start_s));
  const t1 = Math.max(...events.map(e => e.end_s));
  const span = Math.max(t1 - t0, 1e-9);
  const x = t => left + (t - t0) / span * (W - left - right);
  const H = top + ranks.length * rowH + 36;
  svg.setAttribute("height", H);
  const chunked = events.some(e => e.chunk > 0);
  svg.appendChild(el("text", {x: 4, y: 14, "font-size": 12, fill: "#333"},
                     "last iteration, per rank (" + (span * 1000).toFixed(1) + " ms)"));
  ranks.forEach((r, i) => {
    const y = top + i * rowH;
    svg.appendChild(el("rect", {x: left, y: y, width: W - left - right, height: rowH - 4, fill: "#f7f7f7"}));
    svg.appendChild(el("text", {x: 4, y: y + rowH / 2 + 2, "font-size": 12, fill: "#333"}, "rank " + r));
  });
  for (const e of events) {
    const i = ranks.indexOf(e.rank), y = top + i * rowH;
    const x0 = x(e.start_s), w = Math.max(x(e.end_s) - x0, 1);
    const thin = transfers.has(e.op);
    const h = thin ? 5 : rowH - 8, yy = thin ? y + rowH - 9 : y + 2;
    const box = el("rect", {x: x0, y: yy, width: w, height: h, fill: colours[e.op] || other,
                            stroke: thin ? "none" : "#fff", "stroke-width": 0.5});
    const label = e.op + (e.microbatch >= 0 ? e.microbatch : "") + (chunked && e.microbatch >= 0 ? "." + e.chunk : "");
    box.appendChild(el("title", {}, label + "  " + (e.start_s * 1000).toFixed(2) + "-" + (e.end_s * 1000).toFixed(2) + " ms"));
    svg.appendChild(box);
    if (!thin && e.microbatch >= 0 && w >= 8 * String(e.microbatch).length + 4)
      svg.appendChild(el("text", {x: x0 + w / 2, y: yy + h / 2 + 4, "font-size": 11, fill: "#fff",
                                  "text-anchor": "middle"}, chunked ? e.microbatch + "." + e.chunk : e.microbatch));
  }
  const axisY = top + ranks.length * rowH;
  svg.appendChild(el("line", {x1: left, y1: axisY, x2: W - right, y2: axisY, stroke: "#555"}));
  const step = niceStep(span, 10);
  for (let t = 0; t <= span + 1e-12; t += step) {
    svg.appendChild(el("line", {x1: x(t0 + t), y1: axisY, x2: x(t0 + t), y2: axisY + 4, stroke: "#555"}));
    svg.appendChild(el("text", {x: x(t0 + t), y: axisY + 15, "font-size": 10, fill: "#555", "text-anchor": "middle"},
                       parseFloat((t * 1000).toPrecision(3)) + " ms"));
  }
  let lx = left;
  for (const [name, c] of [["forward", colours.F], ["backward", colours.B], ["optimizer", colours.opt],
                           ["dp-sync", colours["dp-sync"]], ["transfer", colours.RF], ["other", other]]) {
    svg.appendChild(el("rect", {x: lx, y: axisY + 22, width: 10, height: 10, fill: c}));
    svg.appendChild(el("text", {x: lx + 14, y: axisY + 31, "font-size": 11, fill: "#333"}, name));
    lx += 90;
  }
}

function drawActors(actors, stalls) {
  const body = document.querySelector("#actors tbody");
  while (body.firstChild) body.removeChild(body.firstChild);
  const stalled = new Set(stalls.map(s => (s.match(/^rank (\d+) (\S+) waits/) || []).slice(1, 3).join(" ")));
  for (const a of actors) {
    const tr = document.createElement("tr");
    if (stalled.has(a.rank + " " + a.kind) && a.activity.startsWith("awaiting")) tr.className = "stalled";
    const cells = [[a.kind], [a.rank, 1], [a.name], [a.activity], [a.activity_seconds.toFixed(1), 1],
                   [a.mailbox_depth, 1], [a.messages_per_second.toFixed(1), 1], [bytes(a.bytes_sent), 1],
                   [bytes(a.bytes_received), 1]];
    for (const k of ["memory_allocated", "memory_max_allocated", "memory_reserved", "memory_activations"])
      cells.push([a.kind === "stage" ? bytes(a[k]) : "-", 1]);
    for (const [v, num] of cells) {
      const td = document.createElement("td");
      td.textContent = v;
      if (num) td.className = "num";
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
}

// A MoE model's tokens per expert in one iteration; max/mean 1.00 is balanced.
function drawExperts(iteration, rows) {
  const table = document.getElementById("experts"), title = document.getElementById("experts_title");
  const body = table.querySelector("tbody");
  while (body.firstChild) body.removeChild(body.firstChild);
  table.style.display = title.style.display = rows.length ? "" : "none";
  title.textContent = "tokens per expert, iteration " + iteration;
  for (const r of rows) {
    const total = r.tokens.reduce((a, b) => a + b, 0), most = Math.max(...r.tokens);
    const mean = r.tokens.length ? total / r.tokens.length : 0;
    const tr = document.createElement("tr");
    for (const [v, num] of [[r.router.replace(/\.mlp\.router$/, "")], [mean > 0 ? (most / mean).toFixed(2) : "-", 1],
                            [r.tokens.join(" ")]]) {
      const td = document.createElement("td");
      td.textContent = v;
      if (num) td.className = "num";
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
}

function drawStalls(stalls) {
  const box = document.getElementById("stalls");
  while (box.firstChild) box.removeChild(box.firstChild);
  box.style.display = stalls.length ? "block" : "none";
  if (!stalls.length) return;
  const b = document.createElement("b");
  b.textContent = "stalled:\n";
  box.appendChild(b);
  box.appendChild(document.createTextNode(stalls.join("\n")));
}

function setStatus(text, error) {
  const s = document.getElementById("status");
  s.textContent = text;
  s.className = error ? "error" : "";
}

async function poll() {
  try {
    const r = await fetch("/api/snapshot", {headers: {"Authorization": "Bearer " + token}, cache: "no-store"});
    if (r.status === 403) {
      setStatus("the inspector refused the token: open the address the job printed, with ?token=TOKEN", true);
    } else if (!r.ok) {
      setStatus("the inspector answered HTTP " + r.status + ": " + await r.text(), true);
    } else {
      const s = await r.json();
      setStatus("iteration " + s.iteration + " / " + s.train_iters + "   uptime " + s.uptime_s.toFixed(1) +
                " s   " + s.actors.length + " actors   updated " + new Date().toLocaleTimeString());
      drawStalls(s.stalls);
      drawChart(s.last_iteration_timeline);
      drawActors(s.actors, s.stalls);
      drawExperts(s.expert_load_iteration || 0, s.expert_load || []);
    }
  } catch (err) {
    setStatus("cannot reach the inspector (" + err + "); is the job still running?", true);
  }
  setTimeout(poll, 500);
}
poll();
</script>
</body></html>
)html";

}  // namespace

std::string_view web_page() { return page; }

}  // namespace mactor::inspector
