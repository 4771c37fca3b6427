// kcoord operator console. Reads /v1/groups and /v1/groups/{id}, polls them,
// and draws with plain DOM and SVG: no framework, no build step, no network
// beyond this daemon.
"use strict";

(function () {
  const params = new URLSearchParams(location.search);
  // Poll interval (ms); ?poll=500 for a livelier view.
  const POLL_MS = Math.max(200, Number(params.get("poll")) || 2000);
  const SVG = "http://www.w3.org/2000/svg";
  const app = document.getElementById("app");
  const status = document.getElementById("status");
  const crumbs = document.getElementById("crumbs");

  // What the page knows between polls.
  const ui = {
    view: null,            // "list" | "group"
    groupId: null,
    sort: { key: "group_id", dir: 1 },
    filter: "",
    stateFilter: "",
    timer: null,
    generation: 0,         // bumps on every navigation, drops stale answers
    renders: 0,
    lastRenderMs: 0,
  };
  // For tests and the curious: render count and the last render's duration.
  window.kcoordConsole = ui;

  function esc(v) {
    return String(v == null ? "" : v).replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function num(v) { return v == null ? "—" : Number(v).toLocaleString("en-US"); }
  function duration(ms) {
    if (ms == null) return "…";
    if (ms < 1000) return ms + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    const m = Math.floor(ms / 60000);
    return m < 60 ? m + " m " + Math.round((ms % 60000) / 1000) + " s" : Math.floor(m / 60) + " h " + (m % 60) + " m";
  }
  function ago(ms, now) { return ms == null ? "—" : duration(Math.max(0, now - ms)) + " ago"; }
  // A stable, well-spread colour per owner index.
  function colour(i) { return "hsl(" + Math.round((i * 137.508) % 360) + ", 62%, 46%)"; }
  function el(tag, attrs) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: "no-store" });
    if (r.status === 404) return null;
    if (!r.ok) throw new Error(path + ": HTTP " + r.status);
    return r.json();
  }

  // ---------- routing and polling ----------

  function route() {
    const h = decodeURIComponent(location.hash.replace(/^#/, ""));
    ui.generation++;
    if (h.startsWith("/group/")) {
      ui.view = "group";
      ui.groupId = h.slice("/group/".length);
    } else {
      ui.view = "list";
      ui.groupId = null;
    }
    app.innerHTML = "";
    refresh();
  }

  async function refresh() {
    clearTimeout(ui.timer);
    const gen = ui.generation;
    try {
      if (ui.view === "group") {
        const g = await getJSON("/v1/groups/" + encodeURIComponent(ui.groupId));
        if (gen !== ui.generation) return;
        timed(() => renderGroup(g));
      } else {
        const l = await getJSON("/v1/groups");
        if (gen !== ui.generation) return;
        timed(() => renderList(l));
      }
      status.textContent = "updated " + new Date().toLocaleTimeString();
      status.className = "";
    } catch (e) {
      status.textContent = "cannot reach kcoord: " + e.message;
      status.className = "stale";
    }
    if (gen === ui.generation) ui.timer = setTimeout(refresh, POLL_MS);
  }

  function timed(render) {
    const t0 = performance.now();
    render();
    ui.lastRenderMs = performance.now() - t0;
    ui.renders++;
    app.dataset.renders = ui.renders;
  }

  // ---------- groups list ----------

  const COLUMNS = [
    { key: "group_id", label: "Group" },
    { key: "state", label: "State" },
    { key: "protocol", label: "Type / protocol" },
    { key: "members", label: "Members", num: true },
    { key: "total_lag", label: "Total lag", num: true },
    { key: "rebalances_last_hour", label: "Rebalances (1 h)", num: true },
    { key: "last_rebalance_cause", label: "Last cause" },
  ];

  function listShell() {
    if (document.getElementById("groups-table")) return;
    crumbs.textContent = "groups";
    app.innerHTML =
      '<section class="card"><div class="toolbar">' +
      '<input id="filter" type="search" placeholder="filter: group, protocol, cause…">' +
      '<select id="state-filter"><option value="">every state</option></select>' +
      '<span id="count" class="muted small"></span></div>' +
      '<table id="groups-table"><thead><tr>' +
      COLUMNS.map(c => '<th class="sortable' + (c.num ? " num" : "") + '" data-key="' + c.key + '">' + c.label + "</th>").join("") +
      "</tr></thead><tbody></tbody></table></section>";
    const filter = document.getElementById("filter");
    filter.value = ui.filter;
    filter.addEventListener("input", () => { ui.filter = filter.value; renderList(ui.lastList); });
    const sf = document.getElementById("state-filter");
    sf.addEventListener("change", () => { ui.stateFilter = sf.value; renderList(ui.lastList); });
    document.querySelectorAll("#groups-table th").forEach(th => th.addEventListener("click", () => {
      const key = th.dataset.key;
      ui.sort = { key, dir: ui.sort.key === key ? -ui.sort.dir : 1 };
      renderList(ui.lastList);
    }));
  }

  function sortValue(g, key) {
    if (key === "protocol") return (g.protocol_type || "") + "/" + (g.protocol || "");
    const v = g[key];
    return v == null ? -1 : v;
  }

  function renderList(list) {
    if (!list) return;
    ui.lastList = list;
    listShell();
    const groups = list.groups;
    const sf = document.getElementById("state-filter");
    const states = [...new Set(groups.map(g => g.state))].sort();
    if (sf.options.length !== states.length + 1 || states.some((s, i) => sf.options[i + 1].value !== s)) {
      sf.innerHTML = '<option value="">every state</option>' + states.map(s => '<option>' + esc(s) + "</option>").join("");
      sf.value = states.includes(ui.stateFilter) ? ui.stateFilter : "";
    }
    const needle = ui.filter.trim().toLowerCase();
    const shown = groups.filter(g =>
      (!ui.stateFilter || g.state === ui.stateFilter) &&
      (!needle || [g.group_id, g.protocol_type, g.protocol, g.last_rebalance_cause].some(v => (v || "").toLowerCase().includes(needle))));
    const { key, dir } = ui.sort;
    shown.sort((a, b) => {
      const x = sortValue(a, key), y = sortValue(b, key);
      return (x < y ? -1 : x > y ? 1 : 0) * dir || (a.group_id < b.group_id ? -1 : 1);
    });
    document.querySelectorAll("#groups-table th").forEach(th => {
      th.classList.toggle("sorted-asc", th.dataset.key === key && dir > 0);
      th.classList.toggle("sorted-desc", th.dataset.key === key && dir < 0);
    });
    document.getElementById("count").textContent = shown.length + " of " + groups.length + " groups";
    document.querySelector("#groups-table tbody").innerHTML = shown.map(g =>
      '<tr data-group="' + esc(g.group_id) + '">' +
      '<td><a href="#/group/' + esc(encodeURIComponent(g.group_id)) + '">' + esc(g.group_id) + "</a></td>" +
      '<td><span class="state state-' + esc(g.state) + '">' + esc(g.state) + "</span></td>" +
      "<td>" + esc(g.protocol_type || "—") + (g.protocol ? " / " + esc(g.protocol) : "") + "</td>" +
      '<td class="num">' + num(g.members) + "</td>" +
      '<td class="num">' + num(g.total_lag) + "</td>" +
      '<td class="num">' + num(g.rebalances_last_hour) + "</td>" +
      '<td class="last-cause">' + (g.last_rebalance_cause ? '<span class="cause">' + esc(g.last_rebalance_cause) + "</span>" : "—") + "</td></tr>"
    ).join("");
  }

  // ---------- one group ----------

  // "topic-partition" -> owner index, and each member's partitions.
  function ownership(g) {
    const owners = new Map();
    const memberParts = g.members.map((m, i) => {
      const parts = [];
      for (const tp of m.assignment || []) {
        for (const p of tp.partitions) {
          owners.set(tp.topic + "\u0000" + p, i);
          parts.push([tp.topic, p]);
        }
      }
      return parts;
    });
    return { owners, memberParts };
  }

  function partsText(parts) {
    const by = new Map();
    for (const [t, p] of parts) (by.get(t) || by.set(t, []).get(t)).push(p);
    return [...by].map(([t, ps]) => t + ": " + ps.sort((a, b) => a - b).join(",")).join("; ");
  }

  function renderGroup(g) {
    if (!g) {
      crumbs.innerHTML = '<a href="#/">groups</a> / ' + esc(ui.groupId);
      app.innerHTML = '<section class="card" id="missing"><h1>' + esc(ui.groupId) + '</h1><p class="muted">This group does not exist (any more).</p></section>';
      return;
    }
    crumbs.innerHTML = '<a href="#/">groups</a> / ' + esc(g.group_id);
    const { owners, memberParts } = ownership(g);
    const totalLag = g.offsets.reduce((s, o) => s + (o.lag || 0), 0);
    const hasLag = g.offsets.some(o => o.lag != null);
    const epoch = g.group_epoch != null ? "Group epoch" : "Generation";
    const sections = [
      '<h1 id="group-title">' + esc(g.group_id) + '</h1><div class="facts">' +
        fact("State", '<span class="state state-' + esc(g.state) + '">' + esc(g.state) + "</span>") +
        fact("Type / protocol", esc(g.protocol_type || "—") + (g.protocol ? " / " + esc(g.protocol) : "")) +
        fact(epoch, num(g.generation)) +
        fact("Members", num(g.members.length)) +
        fact("Total lag", hasLag ? num(totalLag) : "—") +
        (g.leader ? fact("Leader", esc(g.leader)) : "") + "</div>",
      membersCard(g, memberParts),
      gridCard(g, owners),
      offsetsCard(g, owners),
      '<section class="card"><h2>Rebalances <span class="muted small">(newest first; last ' + g.rebalances.length + ")</span></h2>" +
        '<div id="timeline"></div><ol id="rebalances" class="timeline-list" reversed></ol></section>',
    ];
    app.innerHTML = sections.join("");
    drawSparklines(g);
    drawTimeline(g);
  }

  function fact(label, html) { return "<div><b>" + label + "</b>" + html + "</div>"; }

  function membersCard(g, memberParts) {
    const rows = g.members.map((m, i) =>
      '<tr data-member="' + esc(m.member_id) + '">' +
      '<td><span class="swatch" style="background:' + colour(i) + '"></span>' + esc(m.member_id) + "</td>" +
      "<td>" + esc(m.client_id) + "</td><td>" + esc(m.client_host) + "</td>" +
      "<td>" + esc(m.group_instance_id || "—") + "</td>" +
      '<td class="num">' + memberParts[i].length + "</td>" +
      '<td class="parts">' + esc(partsText(memberParts[i]) || (m.assignment ? "none" : "not decoded")) + "</td></tr>");
    return '<section class="card"><h2>Members</h2><table id="members-table"><thead><tr>' +
      '<th>Member id</th><th>Client id</th><th>Host</th><th>Instance id</th><th class="num">#</th><th>Partitions</th>' +
      "</tr></thead><tbody>" + rows.join("") + "</tbody></table></section>";
  }

  // Every partition the group owns or has committed, per topic.
  function partitionsByTopic(g, owners) {
    const topics = new Map();
    const add = (t, p) => (topics.get(t) || topics.set(t, new Set()).get(t)).add(p);
    for (const k of owners.keys()) { const [t, p] = k.split("\u0000"); add(t, Number(p)); }
    for (const o of g.offsets) add(o.topic, o.partition);
    return [...topics].sort().map(([t, ps]) => [t, [...ps].sort((a, b) => a - b)]);
  }

  function gridCard(g, owners) {
    const topics = partitionsByTopic(g, owners);
    const grids = topics.map(([t, ps]) => '<div class="topic"><b>' + esc(t) + '</b><div class="grid" data-topic="' + esc(t) + '">' +
      ps.map(p => {
        const i = owners.get(t + "\u0000" + p);
        const who = i == null ? "unassigned" : g.members[i].member_id;
        return '<div class="cell' + (i == null ? " unowned" : "") + '" data-partition="' + p + '" data-owner="' + esc(i == null ? "" : who) +
          '" title="' + esc(t + "-" + p + " → " + who) + '"' + (i == null ? "" : ' style="background:' + colour(i) + '"') + ">" + p + "</div>";
      }).join("") + "</div></div>").join("");
    const legend = g.members.slice(0, 40).map((m, i) => '<span><span class="swatch" style="background:' + colour(i) + '"></span>' + esc(m.member_id.slice(0, 32)) + "</span>").join("") +
      (g.members.length > 40 ? '<span class="muted">… ' + (g.members.length - 40) + " more</span>" : "");
    return '<section class="card"><h2>Partitions by owner</h2>' + (grids || '<p class="muted">No partitions assigned or committed.</p>') +
      '<div class="legend">' + legend + "</div></section>";
  }

  function offsetsCard(g, owners) {
    const rows = g.offsets.map((o, n) => {
      const i = owners.get(o.topic + "\u0000" + o.partition);
      return '<tr data-topic="' + esc(o.topic) + '" data-partition="' + o.partition + '">' +
        "<td>" + esc(o.topic) + '</td><td class="num">' + o.partition + "</td>" +
        "<td>" + (i == null ? '<span class="muted">—</span>' : '<span class="swatch" style="background:' + colour(i) + '"></span>' + esc(g.members[i].client_id)) + "</td>" +
        '<td class="num committed">' + num(o.offset) + '</td><td class="num">' + num(o.log_end_offset) + "</td>" +
        '<td class="num lag' + (o.lag > 1000 ? " lag-high" : "") + '">' + num(o.lag) + "</td>" +
        '<td class="spark" data-row="' + n + '"></td></tr>';
    });
    return '<section class="card"><h2>Committed offsets and lag</h2><table id="offsets-table"><thead><tr>' +
      '<th>Topic</th><th class="num">Partition</th><th>Owner</th><th class="num">Committed</th><th class="num">Log end</th><th class="num">Lag</th><th>Recent lag</th>' +
      "</tr></thead><tbody>" + (rows.join("") || '<tr><td colspan="7" class="muted">No committed offsets.</td></tr>') + "</tbody></table></section>";
  }

  function drawSparklines(g) {
    document.querySelectorAll("#offsets-table td.spark").forEach(td => {
      const samples = g.offsets[Number(td.dataset.row)].lag_samples || [];
      td.appendChild(sparkline(samples));
    });
  }

  function sparkline(samples) {
    const w = 120, h = 24;
    const svg = el("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, class: "sparkline" });
    if (samples.length === 0) return svg;
    const t0 = samples[0][0], t1 = samples[samples.length - 1][0];
    const max = Math.max(1, ...samples.map(s => s[1]));
    const x = t => t1 === t0 ? w - 2 : 1 + (t - t0) / (t1 - t0) * (w - 3);
    const y = v => h - 2 - v / max * (h - 4);
    const pts = samples.map(s => x(s[0]).toFixed(1) + "," + y(s[1]).toFixed(1)).join(" ");
    svg.appendChild(el("polyline", { points: pts, fill: "none", stroke: "#2f6fdb", "stroke-width": 1.5 }));
    const last = samples[samples.length - 1];
    svg.appendChild(el("circle", { cx: x(last[0]), cy: y(last[1]), r: 2, fill: "#2f6fdb" }));
    const title = el("title", {});
    title.textContent = samples.length + " samples, max " + max + ", now " + last[1];
    svg.appendChild(title);
    return svg;
  }

  // Who joined and who left in one rebalance: the members its cause names
  // (the joiner is already among a classic rebalance's members_before),
  // and for classic groups whoever is in only one of members_before/after.
  function changes(r) {
    const joined = new Set(), left = new Set();
    const c = r.cause || {};
    if (r.members_before && r.members_after) {
      const before = new Set(r.members_before), after = new Set(r.members_after);
      r.members_after.forEach(m => before.has(m) || joined.add(m));
      r.members_before.forEach(m => after.has(m) || left.add(m));
    }
    if (c.kind === "member_joined") joined.add(c.member_id);
    if (c.replaced_member_id) left.add(c.replaced_member_id);
    if (c.kind === "static_member_replaced") { joined.add(c.new_member_id); left.add(c.old_member_id); }
    if (c.kind === "session_expired" || c.kind === "member_fenced") left.add(c.member_id);
    (c.member_ids || []).forEach(m => left.add(m));
    (c.removed || []).forEach(m => left.add(m));
    (r.removed_at_rebalance_timeout || []).forEach(m => left.add(m));
    return { joined: [...joined], left: [...left] };
  }

  function causeDetail(c) {
    const skip = new Set(["kind"]);
    return Object.keys(c).filter(k => !skip.has(k) && c[k] != null && !(Array.isArray(c[k]) && c[k].length === 0))
      .map(k => k + "=" + (typeof c[k] === "object" ? JSON.stringify(c[k]) : c[k])).join(" ");
  }

  function drawTimeline(g) {
    const now = g.now_ms || Date.now();
    const list = document.getElementById("rebalances");
    const rs = g.rebalances.slice().reverse();
    if (rs.length === 0) {
      list.outerHTML = '<p class="muted" id="rebalances">No rebalances remembered (history starts empty after a restart).</p>';
      return;
    }
    const start = Math.min(...rs.map(r => r.started_ms)), end = Math.max(now, ...rs.map(r => r.ended_ms || now));
    const span = Math.max(1, end - start);
    const W = 900, left = 8, right = 340, rowH = 20, H = rs.length * rowH + 24;
    const svg = el("svg", { width: W, height: H, viewBox: "0 0 " + W + " " + H, id: "timeline-svg" });
    const x = t => left + (t - start) / span * (W - left - right);
    svg.appendChild(el("line", { x1: left, x2: W - right, y1: H - 16, y2: H - 16, stroke: "#c3c8d2" }));
    const axis = (t, anchor) => { const tx = el("text", { x: x(t), y: H - 3, "text-anchor": anchor }); tx.textContent = new Date(t).toLocaleTimeString(); svg.appendChild(tx); };
    axis(start, "start"); axis(end, "end");
    const outcomeColour = { stable: "#2e9d5b", converged: "#2e9d5b", empty: "#8a93a6", restarted: "#d98a1c", superseded: "#d98a1c", in_progress: "#2f6fdb" };
    rs.forEach((r, i) => {
      const y = 4 + i * rowH;
      const ended = r.ended_ms || now;
      const d = r.duration_ms != null ? r.duration_ms : r.convergence_ms != null ? r.convergence_ms : r.ended_ms ? r.ended_ms - r.started_ms : null;
      const { joined, left: gone } = changes(r);
      const bar = el("rect", { x: x(r.started_ms), y, width: Math.max(3, x(ended) - x(r.started_ms)), height: rowH - 6, rx: 2, fill: outcomeColour[r.outcome] || "#2f6fdb", class: "rebalance-bar" });
      const title = el("title", {});
      title.textContent = r.cause.kind + " · " + duration(d) + " · " + r.outcome;
      bar.appendChild(title);
      svg.appendChild(bar);
      let tx = W - right + 8;
      const label = el("text", { x: tx, y: y + 11 });
      label.textContent = r.cause.kind + " · " + duration(d);
      svg.appendChild(label);
      tx += 200;
      if (joined.length) { const j = el("text", { x: tx, y: y + 11, fill: "#2e9d5b", class: "joined-mark" }); j.textContent = "▲ +" + joined.length; svg.appendChild(j); }
      if (gone.length) { const l = el("text", { x: tx + 50, y: y + 11, fill: "#d0453a", class: "left-mark" }); l.textContent = "▼ −" + gone.length; svg.appendChild(l); }
    });
    document.getElementById("timeline").appendChild(svg);
    list.innerHTML = rs.map(r => {
      const { joined, left: gone } = changes(r);
      const d = r.duration_ms != null ? r.duration_ms : r.convergence_ms;
      const gen = r.generation_after != null ? "generation " + r.generation_before + " → " + r.generation_after
        : r.group_epoch != null ? "epoch " + r.group_epoch_before + " → " + r.group_epoch : "";
      return '<li data-cause="' + esc(r.cause.kind) + '"><span class="cause">' + esc(r.cause.kind) + "</span> " +
        esc(ago(r.started_ms, now)) + ", " + esc(r.outcome) + (d != null ? " in " + esc(duration(d)) : "") + (gen ? ", " + esc(gen) : "") +
        ' <span class="muted small">' + esc(causeDetail(r.cause)) + "</span>" +
        (joined.length ? ' <span class="joined">joined: ' + esc(joined.join(", ")) + "</span>" : "") +
        (gone.length ? ' <span class="left">left: ' + esc(gone.join(", ")) + "</span>" : "") + "</li>";
    }).join("");
  }

  window.addEventListener("hashchange", route);
  route();
})();
