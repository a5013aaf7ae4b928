/* atlas-bridge lineage page: draws the embedded lineage with dagre (layered layout) and plain SVG.
 *
 * Two views: "tables" (datasets and the processes between them) and "columns" (each dataset a box of
 * column rows; direct fdd edges solid, indirect fdr edges dashed and labelled with their clauses).
 * Big graphs stay usable: tables fold into one box each in the column view when there are many columns
 * (expand one with its +/- toggle), the filter box shows only the lineage of matching nodes (to a
 * chosen depth), and a view over NODE_CAP nodes is not drawn at all: a message says how to narrow it.
 * All text is set with textContent: nothing from the data is ever parsed as HTML.
 */
(function () {
  "use strict";
  var NODE_CAP = 800;       // nodes + column rows drawn at once
  var EDGE_CAP = 2000;      // edges drawn at once
  var COLLAPSE_AT = 300;    // more columns than this: the column view starts with tables folded
  var ROW_H = 18, HEAD_H = 24, CHAR_W = 7.3, PAD = 10;
  var NS = "http://www.w3.org/2000/svg";
  var DATA = JSON.parse(document.getElementById("lineage-data").textContent);

  var datasets = new Map(), columns = new Map(), processes = new Map(), colsOf = new Map();
  DATA.datasets.forEach(function (d) { datasets.set(d.id, d); colsOf.set(d.id, []); });
  DATA.columns.forEach(function (c) {
    columns.set(c.id, c);
    if (!colsOf.has(c.dataset)) { colsOf.set(c.dataset, []); }
    colsOf.get(c.dataset).push(c.id);
  });
  DATA.processes.forEach(function (p) { processes.set(p.id, p); });

  function newGraph() { return { out: new Map(), inn: new Map() }; }
  function push(map, k, v) { if (!map.has(k)) { map.set(k, []); } map.get(k).push(v); }
  function addEdge(g, a, b) { push(g.out, a, b); push(g.inn, b, a); }
  /* Everything reachable from starts, against (up) or along (down) the edges, within depth hops. */
  function reach(g, starts, dir, depth) {
    var adj = dir === "up" ? g.inn : g.out, seen = new Set(), frontier = Array.from(starts), hops = 0;
    while (frontier.length && hops < depth) {
      var next = [];
      frontier.forEach(function (n) {
        (adj.get(n) || []).forEach(function (m) { if (!seen.has(m)) { seen.add(m); next.push(m); } });
      });
      frontier = next;
      hops += 1;
    }
    return seen;
  }

  var tableGraph = newGraph();
  processes.forEach(function (p) {
    p.inputs.forEach(function (i) { addEdge(tableGraph, i, p.id); });
    p.outputs.forEach(function (o) { addEdge(tableGraph, p.id, o); });
  });
  var columnGraph = newGraph();
  DATA.links.forEach(function (l) { addEdge(columnGraph, l.source, l.target); });

  var state = {
    view: "tables", selected: null, filter: "", depth: Infinity, zoom: 1,
    expanded: new Set(), collapsedByDefault: DATA.columns.length > COLLAPSE_AT, showFdr: true, fit: true,
    edgeLinks: new Map()  // edge element -> the links (or table edges) it stands for
  };
  var svg = document.getElementById("graph");

  function el(tag, attrs, parent) {
    var e = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (parent) { parent.appendChild(e); }
    return e;
  }
  function text(parent, x, y, s, cls) {
    var t = el("text", { x: x, y: y }, parent);
    if (cls) { t.setAttribute("class", cls); }
    t.textContent = s;
    return t;
  }
  function where(p) { return p.file ? p.file + (p.line ? ":" + p.line : "") : ""; }
  function labelOf(id) {
    var d = datasets.get(id) || columns.get(id) || processes.get(id);
    if (!d) { return id; }
    if (columns.has(id)) { var ds = datasets.get(d.dataset); return (ds ? ds.name + "." : "") + d.name; }
    return d.name;
  }
  function isCollapsed(did) {
    return state.collapsedByDefault ? !state.expanded.has(did) : state.expanded.has("-" + did);
  }
  function setCollapsed(did, folded) {
    if (state.collapsedByDefault) { if (folded) { state.expanded.delete(did); } else { state.expanded.add(did); } }
    else if (folded) { state.expanded.add("-" + did); } else { state.expanded.delete("-" + did); }
  }

  /* Nodes of the current view to draw: all, or the matches of the filter plus their lineage. */
  function visibleIds(all, g) {
    if (!state.filter) { return { ids: new Set(all), matches: new Set() }; }
    var f = state.filter.toLowerCase();
    var matches = all.filter(function (id) { return labelOf(id).toLowerCase().indexOf(f) >= 0; });
    var depth = state.view === "tables" ? state.depth * 2 : state.depth;  // a process is a hop there
    var ids = new Set(matches);
    reach(g, matches, "up", depth).forEach(function (n) { ids.add(n); });
    reach(g, matches, "down", depth).forEach(function (n) { ids.add(n); });
    return { ids: ids, matches: new Set(matches) };
  }

  function curve(points) {
    var d = "M" + points[0].x + "," + points[0].y;
    for (var i = 1; i < points.length - 1; i++) {
      var mx = (points[i].x + points[i + 1].x) / 2, my = (points[i].y + points[i + 1].y) / 2;
      d += " Q" + points[i].x + "," + points[i].y + " " + mx + "," + my;
    }
    var last = points[points.length - 1];
    return d + " L" + last.x + "," + last.y;
  }
  function defs() {
    var d = el("defs", {}, svg);
    [["arrow", "#718096"], ["arrow-fdd", "#2b6cb0"], ["arrow-fdr", "#c05621"]].forEach(function (m) {
      var mk = el("marker", { id: m[0], viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
        orient: "auto-start-reverse" }, d);
      el("path", { d: "M0,0 L10,5 L0,10 z", fill: m[1] }, mk);
    });
  }
  function titled(node, s) { var t = el("title", {}, node); t.textContent = s; }
  function tooObig(n, what) {
    var msg = document.getElementById("message");
    msg.hidden = false;
    msg.textContent = "This view has " + n + " " + what + ", over the cap of " + (what === "column edges" ? EDGE_CAP : NODE_CAP) +
      " drawn at once. Type a table or column name in the filter box to see only its lineage" +
      (state.view === "columns" ? ", or collapse tables (Collapse all)." : ", or lower the depth.");
    svg.setAttribute("width", 0); svg.setAttribute("height", 0);
  }

  function layout(g) {
    dagre.layout(g);
    var gr = g.graph();
    return { w: Math.max(gr.width || 0, 10), h: Math.max(gr.height || 0, 10) };
  }
  function finish(size, counts) {
    state.size = size;
    if (state.fit) {  // a new view starts fitted to the window's width (never enlarged, never unreadable)
      state.fit = false;
      state.zoom = Math.max(0.5, Math.min(1, document.getElementById("canvas").clientWidth / size.w));
    }
    applyZoom();
    document.getElementById("status").textContent = counts;
  }

  function renderTables() {
    var all = Array.from(datasets.keys()).filter(function (id) { return id.indexOf("d:(") !== 0; })
      .concat(Array.from(processes.keys()));
    var vis = visibleIds(all, tableGraph);
    if (vis.ids.size > NODE_CAP) { return tooObig(vis.ids.size, "tables and processes"); }
    var g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 14, ranksep: 46, edgesep: 6, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(function () { return {}; });
    vis.ids.forEach(function (id) {
      var p = processes.get(id), label = p ? p.op : labelOf(id);
      g.setNode(id, { label: label, width: label.length * CHAR_W + 2 * PAD, height: p ? 22 : 28 });
    });
    processes.forEach(function (p) {
      if (!vis.ids.has(p.id)) { return; }
      p.inputs.forEach(function (i) { if (vis.ids.has(i) && i !== p.id) { g.setEdge(i, p.id); } });
      p.outputs.forEach(function (o) { if (vis.ids.has(o)) { g.setEdge(p.id, o); } });
    });
    var size = layout(g);
    var edges = el("g", { "class": "edges" }, svg), nodes = el("g", { "class": "nodes" }, svg);
    g.edges().forEach(function (e) {
      var path = el("path", { "class": "edge flow", d: curve(g.edge(e).points), "data-src": e.v, "data-dst": e.w }, edges);
      state.edgeLinks.set(path, [{ source: e.v, target: e.w }]);
    });
    var nd = 0, np = 0;
    g.nodes().forEach(function (id) {
      var n = g.node(id), p = processes.get(id), ds = datasets.get(id);
      var kind = p ? "process" : ds.kind;
      var grp = el("g", { "class": "node " + kind + (vis.matches.has(id) ? " match" : ""), "data-id": id,
        "data-kind": kind, transform: "translate(" + (n.x - n.width / 2) + "," + (n.y - n.height / 2) + ")" }, nodes);
      el("rect", { width: n.width, height: n.height, rx: p ? 10 : 3 }, grp);
      text(grp, PAD, n.height / 2 + 4, n.label);
      if (p) { np += 1; titled(grp, p.name + (where(p) ? "\n" + where(p) : "") + (p.sql ? "\n\n" + p.sql : "")); }
      else { nd += 1; titled(grp, ds.kind + " " + ds.name); }
    });
    finish(size, nd + " datasets, " + np + " processes" + (state.filter ? " (filtered)" : ""));
  }

  function renderColumns() {
    var allCols = Array.from(columns.keys());
    var vis = visibleIds(allCols, columnGraph);
    var shownDs = [];
    datasets.forEach(function (d, id) {
      var cols = colsOf.get(id) || [];
      if (cols.some(function (c) { return vis.ids.has(c); })) {
        shownDs.push(id);
      }
    });
    var boxes = new Map(), total = 0;
    shownDs.forEach(function (id) {
      var cols = (colsOf.get(id) || []).filter(function (c) { return vis.ids.has(c); });
      var folded = isCollapsed(id);
      var rows = folded ? [] : cols;
      var label = datasets.get(id).name;
      var longest = Math.max(label.length + 4, rows.reduce(function (m, c) { return Math.max(m, columns.get(c).name.length); }, 0));
      boxes.set(id, { rows: rows, folded: folded, count: cols.length,
        width: longest * CHAR_W + 2 * PAD + 16, height: HEAD_H + Math.max(rows.length, folded && cols.length ? 1 : 0) * ROW_H + 4 });
      total += 1 + rows.length;
    });
    function shownAs(cid) {
      var c = columns.get(cid), b = boxes.get(c.dataset);
      if (!b || !vis.ids.has(cid)) { return null; }
      return b.folded ? c.dataset : cid;
    }
    var g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 90, marginx: 16, marginy: 16 });
    g.setDefaultEdgeLabel(function () { return {}; });
    boxes.forEach(function (b, id) { g.setNode(id, { width: b.width, height: b.height }); });
    /* A column that filters, joins or groups rows restricts the whole row set of what its statement
       writes: the converter spells that out for every written column; here it is one edge to the box. */
    var groups = new Map();
    function groupKey(l) { return [l.source, columns.get(l.target).dataset, l.process, (l.clauses || []).join(",")].join("|"); }
    DATA.links.forEach(function (l) { if (l.kind === "fdr") { push(groups, groupKey(l), l.target); } });
    var drawn = new Map();  // "src|dst|kind" -> {src, dst, kind, links}
    DATA.links.forEach(function (l) {
      if (l.kind === "fdr" && !state.showFdr) { return; }
      var s = shownAs(l.source), t = shownAs(l.target);
      if (t && l.kind === "fdr" && groups.get(groupKey(l)).length > 1) { t = columns.get(l.target).dataset; }
      if (!s || !t) { return; }
      var sd = columns.get(l.source).dataset, td = columns.get(l.target).dataset;
      if (sd !== td) { g.setEdge(sd, td); }
      var key = s + "|" + t + "|" + l.kind;
      if (!drawn.has(key)) { drawn.set(key, { src: s, dst: t, kind: l.kind, links: [] }); }
      drawn.get(key).links.push(l);
    });
    if (total > NODE_CAP) { return tooObig(total, "tables and columns"); }
    if (drawn.size > EDGE_CAP) { return tooObig(drawn.size, "column edges"); }
    var size = layout(g);
    function anchor(id, side) {
      var c = columns.get(id), did = c ? c.dataset : id, n = g.node(did), b = boxes.get(did);
      var x = n.x + (side === "out" ? n.width / 2 : -n.width / 2), top = n.y - n.height / 2;
      var i = c ? b.rows.indexOf(id) : -1;
      return { x: x, y: i >= 0 ? top + HEAD_H + i * ROW_H + ROW_H / 2 : top + HEAD_H / 2 };
    }
    var edges = el("g", { "class": "edges" }, svg), labels = el("g", { "class": "labels" }, svg);
    var nodes = el("g", { "class": "nodes" }, svg);
    var nfdd = 0, nfdr = 0;
    drawn.forEach(function (e) {
      var a = anchor(e.src, "out"), b = anchor(e.dst, "in"), d;
      var sameBox = (columns.get(e.src) ? columns.get(e.src).dataset : e.src) === (columns.get(e.dst) ? columns.get(e.dst).dataset : e.dst);
      if (sameBox) { var bx = a.x; d = "M" + bx + "," + a.y + " C" + (bx + 40) + "," + a.y + " " + (bx + 40) + "," + b.y + " " + bx + "," + b.y; }
      else {
        var dx = Math.max(40, Math.abs(b.x - a.x) / 2);
        d = "M" + a.x + "," + a.y + " C" + (a.x + dx) + "," + a.y + " " + (b.x - dx) + "," + b.y + " " + b.x + "," + b.y;
      }
      var procs = Array.from(new Set(e.links.map(function (l) { return l.process; })));
      var clauses = Array.from(new Set([].concat.apply([], e.links.map(function (l) { return l.clauses || []; })))).sort();
      var path = el("path", { "class": "edge " + e.kind, d: d, "data-src": e.src, "data-dst": e.dst, "data-kind": e.kind }, edges);
      var hit = el("path", { "class": "edge-hit", d: d, "data-edge": "1" }, edges);
      state.edgeLinks.set(path, e.links);
      hit.edge = path;
      var tip = e.kind + (clauses.length ? " (" + clauses.join(", ").toUpperCase() + ")" : "") + ": " + labelOf(e.src) + " -> " + labelOf(e.dst);
      procs.forEach(function (pid) {
        var p = processes.get(pid);
        if (p) { tip += "\nvia " + p.name + (where(p) ? " at " + where(p) : ""); }
      });
      e.links.forEach(function (l) { (l.fields || []).forEach(function (f) { tip += "\nfield " + f; }); });
      e.links.forEach(function (l) { if (l.expression) { tip += "\n" + l.expression; } });
      titled(hit, tip);
      if (e.kind === "fdr") {
        nfdr += 1;
        if (clauses.length && columns.has(e.src)) {  // folded boxes: the edge's tooltip has them
          var t = text(labels, a.x + 6, a.y - 3, clauses.join(", ").toUpperCase(), "clause");
          state.edgeLinks.set(t, e.links);
        }
      } else { nfdd += 1; }
    });
    var ncols = 0;
    boxes.forEach(function (b, id) {
      var n = g.node(id), ds = datasets.get(id);
      var grp = el("g", { "class": "node dataset " + ds.kind, "data-id": id, "data-kind": ds.kind,
        transform: "translate(" + (n.x - n.width / 2) + "," + (n.y - n.height / 2) + ")" }, nodes);
      el("rect", { width: n.width, height: n.height, rx: 3 }, grp);
      text(grp, PAD, 16, ds.name, "head");
      titled(grp, ds.kind + " " + ds.name + (b.folded ? "\n" + b.count + " columns (use + to expand)" : ""));
      if (b.count) {
        var tg = el("g", { "class": "toggle", "data-toggle": id, transform: "translate(" + (n.width - 18) + ",5)" }, grp);
        el("rect", { width: 13, height: 13, rx: 2 }, tg);
        text(tg, 3, 11, b.folded ? "+" : "\u2212");
        titled(tg, b.folded ? "Show the columns" : "Fold the columns");
      }
      if (b.folded && b.count) { text(grp, PAD, HEAD_H + 12, b.count + " column" + (b.count > 1 ? "s" : ""), "more"); }
      b.rows.forEach(function (cid, i) {
        var c = columns.get(cid);
        var row = el("g", { "class": "node column" + (c.name === "(rows)" ? " rows" : "") + (vis.matches.has(cid) ? " match" : ""),
          "data-id": cid, "data-kind": "column", "data-dataset": id, transform: "translate(1," + (HEAD_H + i * ROW_H) + ")" }, grp);
        el("rect", { width: n.width - 2, height: ROW_H }, row);
        text(row, PAD, 13, c.name);
        titled(row, labelOf(cid) + (c.type ? " " + c.type : ""));
        ncols += 1;
      });
    });
    finish(size, boxes.size + " datasets, " + ncols + " columns shown, " + nfdd + " direct and " + nfdr +
      " indirect edges" + (state.filter ? " (filtered)" : "") +
      (state.collapsedByDefault ? "; tables start folded (" + DATA.columns.length + " columns): + expands one" : ""));
  }

  function legend() {
    if (state.view !== "columns") { return; }
    var lg = el("g", { "class": "legend", transform: "translate(16," + (state.size.h + 4) + ")" }, svg);
    el("path", { "class": "edge fdd", d: "M0,6 L40,6" }, lg); text(lg, 46, 10, "direct (fdd): the value flows");
    el("path", { "class": "edge fdr", d: "M250,6 L290,6" }, lg); text(lg, 296, 10, "indirect (fdr): rows chosen by the clause shown");
    state.size.h += 24;
    applyZoom();
  }

  function render() {
    while (svg.firstChild) { svg.removeChild(svg.firstChild); }
    state.edgeLinks = new Map();
    document.getElementById("message").hidden = true;
    svg.setAttribute("data-view", state.view);
    defs();
    if (!DATA.datasets.length) {
      var msg = document.getElementById("message");
      msg.hidden = false;
      msg.textContent = "No lineage to show: none of the statements reads one dataset to write another " +
        "(a SELECT on its own writes nothing).";
      state.size = null;
    } else if (state.view === "tables") { renderTables(); } else { renderColumns(); }
    if (state.size && document.getElementById("message").hidden) { legend(); }
    if (state.selected && !svg.querySelector('[data-id="' + cssEscape(state.selected) + '"]')) { state.selected = null; }
    highlight();
    document.body.setAttribute("data-ready", String(Number(document.body.getAttribute("data-ready") || 0) + 1));
  }
  function cssEscape(s) { return window.CSS && CSS.escape ? CSS.escape(s) : s.replace(/["\\]/g, "\\$&"); }

  function applyZoom() {
    if (!state.size) { return; }
    svg.setAttribute("viewBox", "0 0 " + state.size.w + " " + state.size.h);
    svg.setAttribute("width", Math.round(state.size.w * state.zoom));
    svg.setAttribute("height", Math.round(state.size.h * state.zoom));
  }

  /* Mark the selection, everything upstream ("up") and downstream ("down") of it; dim the rest. */
  function highlight() {
    var lit = svg.querySelectorAll(".sel, .up, .down, .dim");
    lit.forEach(function (e) { e.classList.remove("sel", "up", "down", "dim"); });
    svg.classList.toggle("lit", !!state.selected);
    if (!state.selected) { return; }
    var sel = state.selected, starts;
    var g = state.view === "tables" ? tableGraph : columnGraph;
    if (state.view === "columns" && datasets.has(sel)) { starts = new Set(colsOf.get(sel) || []); }
    else { starts = new Set([sel]); }
    var up = reach(g, starts, "up", Infinity), down = reach(g, starts, "down", Infinity);
    function kinds(ids) {
      var k = [];
      if (ids.some(function (i) { return starts.has(i); })) { k.push("sel"); }
      if (ids.some(function (i) { return up.has(i); })) { k.push("up"); }
      if (ids.some(function (i) { return down.has(i); })) { k.push("down"); }
      return k;
    }
    svg.querySelectorAll("[data-id]").forEach(function (node) {
      var id = node.getAttribute("data-id"), k;
      if (id === sel) { k = ["sel"]; }
      else if (state.view === "columns" && datasets.has(id)) {
        k = kinds(colsOf.get(id) || []).filter(function (x) { return x !== "sel"; });
        if (!k.length && id === (columns.get(sel) || {}).dataset) { k = ["has-sel"]; }
      } else { k = kinds([id]); }
      if (k.length) { k.forEach(function (x) { node.classList.add(x); }); } else { node.classList.add("dim"); }
    });
    function inSet(set, id) { return set.has(id) || starts.has(id); }
    state.edgeLinks.forEach(function (links, edge) {
      var isUp = links.some(function (l) { return inSet(up, l.source) && inSet(up, l.target) && !starts.has(l.source); });
      var isDown = links.some(function (l) { return inSet(down, l.source) && inSet(down, l.target) && !starts.has(l.target); });
      if (isUp) { edge.classList.add("up"); }
      if (isDown) { edge.classList.add("down"); }
      if (!isUp && !isDown) { edge.classList.add("dim"); }
    });
  }

  /* The side panel: what was clicked, and the statements (text and file:line) behind it. */
  function details(id) {
    var box = document.getElementById("details");
    while (box.firstChild) { box.removeChild(box.firstChild); }
    function add(tag, s, cls) { var e = document.createElement(tag); e.textContent = s; if (cls) { e.className = cls; } box.appendChild(e); return e; }
    function proc(p, heading) {
      add("h3", heading || p.name);
      if (heading) { add("div", p.name); }
      if (where(p)) { add("div", where(p), "where"); }
      if (p.sql) { add("pre", p.sql); }
    }
    if (!id) { add("p", "Click a table, column or process to see its lineage and statement.", "hint"); return; }
    if (processes.has(id)) {
      var p = processes.get(id);
      add("h2", p.name);
      add("div", "process (" + p.op + ")");
      if (where(p)) { add("div", where(p), "where"); }
      add("h3", "Reads"); add("div", p.inputs.map(labelOf).join(", ") || "-");
      add("h3", "Writes"); add("div", p.outputs.map(labelOf).join(", ") || "-");
      if (p.sql) { add("h3", "Statement"); add("pre", p.sql); }
      return;
    }
    if (datasets.has(id)) {
      var d = datasets.get(id);
      add("h2", d.name); add("div", d.kind);
      if (d.sql) { add("h3", "View text"); add("pre", d.sql); }
      processes.forEach(function (q) { if (q.outputs.indexOf(id) >= 0) { proc(q, "Written by"); } });
      return;
    }
    if (columns.has(id)) {
      var c = columns.get(id);
      add("h2", labelOf(id)); add("div", "column" + (c.type ? " " + c.type : ""));
      var groups = new Map(), seen = new Set();  // one line per (kind, clauses, expression): its sources
      DATA.links.forEach(function (l) {
        if (l.target !== id) { return; }
        var key = [l.kind, (l.clauses || []).join(", ").toUpperCase(), l.expression || ""].join("\u0000");
        push(groups, key, l);
      });
      groups.forEach(function (ls) {
        var l = ls[0];
        add("div", l.kind + (l.clauses ? " (" + l.clauses.join(", ").toUpperCase() + ")" : "") + " from " +
          ls.map(function (x) { return labelOf(x.source); }).join(", "));
        ls.forEach(function (x) { (x.fields || []).forEach(function (f) { add("div", "field " + f, "field"); }); });
        if (l.expression) { add("pre", l.expression); }
      });
      groups.forEach(function (ls) {
        ls.forEach(function (l) {
          if (!seen.has(l.process) && processes.has(l.process)) { seen.add(l.process); proc(processes.get(l.process), "Statement"); }
        });
      });
    }
  }
  function edgeDetails(links) {
    var box = document.getElementById("details");
    while (box.firstChild) { box.removeChild(box.firstChild); }
    var seen = new Set();
    links.forEach(function (l) {
      var h = document.createElement("h2");
      h.textContent = l.kind + ": " + labelOf(l.source) + " \u2192 " + labelOf(l.target);
      box.appendChild(h);
      if (l.clauses) { var c = document.createElement("div"); c.textContent = "clauses: " + l.clauses.join(", ").toUpperCase(); box.appendChild(c); }
      (l.fields || []).forEach(function (f) { var fd = document.createElement("div"); fd.className = "field"; fd.textContent = "field " + f; box.appendChild(fd); });
      var p = processes.get(l.process);
      if (p && !seen.has(p.id)) {
        seen.add(p.id);
        [["h3", p.name], ["div", where(p), "where"], ["pre", p.sql || ""]].forEach(function (x) {
          if (!x[1]) { return; }
          var e = document.createElement(x[0]); e.textContent = x[1]; if (x[2]) { e.className = x[2]; } box.appendChild(e);
        });
      }
    });
  }

  svg.addEventListener("click", function (ev) {
    var t = ev.target;
    var toggle = t.closest && t.closest("[data-toggle]");
    if (toggle) {
      var did = toggle.getAttribute("data-toggle");
      setCollapsed(did, !isCollapsed(did));
      render();
      return;
    }
    var node = t.closest && t.closest("[data-id]");
    if (node) {
      state.selected = node.getAttribute("data-id");
      details(state.selected);
      highlight();
      return;
    }
    var hit = t.closest && t.closest("[data-edge]");
    if (hit && hit.edge) { edgeDetails(state.edgeLinks.get(hit.edge) || []); return; }
    state.selected = null;
    details(null);
    highlight();
  });

  document.querySelectorAll('input[name="view"]').forEach(function (r) {
    r.addEventListener("change", function () {
      state.view = r.value; state.selected = null; state.fit = true; details(null); render();
    });
  });
  var timer = null;
  document.getElementById("filter").addEventListener("input", function (ev) {
    clearTimeout(timer);
    timer = setTimeout(function () { state.filter = ev.target.value.trim(); render(); }, 150);
  });
  document.getElementById("filter").addEventListener("keydown", function (ev) {
    if (ev.key === "Enter") { clearTimeout(timer); state.filter = ev.target.value.trim(); render(); }
  });
  document.getElementById("depth").addEventListener("change", function (ev) {
    state.depth = ev.target.value === "all" ? Infinity : Number(ev.target.value);
    render();
  });
  document.getElementById("show-fdr").addEventListener("change", function (ev) { state.showFdr = ev.target.checked; render(); });
  document.getElementById("expand-all").addEventListener("click", function () {
    state.expanded = new Set(); state.collapsedByDefault = false; render();
  });
  document.getElementById("collapse-all").addEventListener("click", function () {
    state.expanded = new Set(); state.collapsedByDefault = true; render();
  });
  document.getElementById("zoom-in").addEventListener("click", function () { state.zoom *= 1.25; applyZoom(); });
  document.getElementById("zoom-out").addEventListener("click", function () { state.zoom /= 1.25; applyZoom(); });
  document.getElementById("zoom-fit").addEventListener("click", function () {
    var c = document.getElementById("canvas");
    if (state.size) { state.zoom = Math.min(c.clientWidth / state.size.w, c.clientHeight / state.size.h, 2); applyZoom(); }
  });

  var initial = new URLSearchParams(window.location.search);
  if (initial.get("view") === "columns") { state.view = "columns"; document.getElementById("view-columns").checked = true; }
  if (initial.get("filter")) { state.filter = initial.get("filter"); document.getElementById("filter").value = state.filter; }
  render();
}());
