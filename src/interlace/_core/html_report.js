// The HTML report's script (html_report.py inlines it into each page): it builds the lanes,
// the wait-for graph and the replay lines from the page's JSON, with textContent only.
(function () {
  "use strict";
  var errors = document.getElementById("js-errors");
  function report(text) { errors.hidden = false; errors.textContent += text + "\n"; }
  window.addEventListener("error", function (e) { report("error: " + e.message); });
  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  var SVG = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }
  var MARKS = { preemption: "preemption", latency: "await latency", stall: "loop stall",
    timer: "timer order", address: "address order", other: "deviation" };

  function build(data) {
    document.getElementById("headline").textContent = data.headline;
    var summary = data.steps + (data.steps === 1 ? " step" : " steps");
    if (data.shrunk_from > data.steps) summary += ", shrunk from " + data.shrunk_from;
    summary += " \u00b7 " + data.deviations + (data.deviations === 1 ? " deviation" : " deviations") +
      " from stock order \u00b7 " + data.label;
    document.getElementById("summary").textContent = summary;
    if (data.scenario) scenario(data.scenario);
    controls(data);
    var address = document.getElementById("address");
    data.address.forEach(function (text) {
      var banner = el("div", "banner");
      banner.appendChild(el("span", "mark address", MARKS.address));
      banner.appendChild(document.createTextNode("before step 1: " + text));
      address.appendChild(banner);
    });
    legend();
    lanes(data, "shrunk");
    if (data.waitfor) graph(data.waitfor);
    replay(data.replay);
    document.getElementById("panel-close").addEventListener("click", function () {
      document.getElementById("panel").hidden = true;
    });
    document.body.setAttribute("data-rendered", "yes");
  }

  function controls(data) {
    var box = document.getElementById("controls");
    var which = [["shrunk", "Shrunk schedule (" + data.steps + " steps)"]];
    if (data.schedules.unshrunk) which.push(["unshrunk", "As first found (" + data.shrunk_from + " steps)"]);
    var buttons = which.map(function (pair) {
      var b = el("button", "", pair[1]);
      b.type = "button";
      b.id = "show-" + pair[0];
      b.setAttribute("aria-pressed", pair[0] === "shrunk" ? "true" : "false");
      b.addEventListener("click", function () {
        buttons.forEach(function (o) { o.setAttribute("aria-pressed", o === b ? "true" : "false"); });
        lanes(data, pair[0]);
      });
      box.appendChild(b);
      return b;
    });
    if (!data.schedules.unshrunk && data.shrunk_from > data.steps) {
      box.appendChild(el("span", "", "(the schedule as first found was not recorded: " +
        "explore(..., keep_unshrunk=True) records it, as --html and --interlace-html do)"));
    }
  }

  function legend() {
    var box = document.getElementById("legend");
    ["preemption", "latency", "stall", "timer", "address"].forEach(function (k) {
      var item = el("span");
      item.appendChild(el("span", "mark " + k, MARKS[k]));
      box.appendChild(item);
    });
    box.appendChild(el("span", "", "grey: a step in library code \u00b7 click a step for its source"));
  }

  function lanes(data, which) {
    var schedule = data.schedules[which];
    var box = document.getElementById("lanes");
    box.textContent = "";
    box.setAttribute("data-schedule", which);
    var actors = [];
    schedule.rows.forEach(function (r) { if (actors.indexOf(r.actor) < 0) actors.push(r.actor); });
    box.style.gridTemplateColumns = "3.5em repeat(" + actors.length + ", minmax(150px, 1fr))";
    box.appendChild(el("div", "stepno", "step"));
    actors.forEach(function (a, i) {
      var head = el("div", "lane-head", a);
      head.setAttribute("data-lane", a);
      head.title = a;
      head.style.gridColumn = String(i + 2);
      head.style.gridRow = "1";
      box.appendChild(head);
    });
    var row = 2;
    // A long run keeps only its last steps (the text report says so too).
    if (schedule.rows.length && schedule.rows[0].n > 1) {
      var earlier = el("div", "gap", "\u2026 steps 1-" + (schedule.rows[0].n - 1) + " were not recorded \u2026");
      earlier.style.gridRow = String(row++);
      box.appendChild(earlier);
    }
    schedule.rows.forEach(function (r, index) {
      if (schedule.omitted && index === schedule.omitted_after) {
        var gap = el("div", "gap", "\u2026 " + schedule.omitted + " steps not shown \u2026");
        gap.style.gridRow = String(row++);
        box.appendChild(gap);
      }
      var no = el("div", "stepno", String(r.n));
      no.style.gridRow = String(row);
      no.style.gridColumn = "1";
      box.appendChild(no);
      var block = el("div", "step");
      if (r.library) block.classList.add("library");
      if (r.mark) { block.classList.add("deviation"); block.setAttribute("data-mark", r.mark); }
      if (/(^|[ (])raised /.test(r.suspended)) block.classList.add("raised");
      block.setAttribute("data-step", String(r.n));
      block.setAttribute("data-actor", r.actor);
      block.style.gridRow = String(row++);
      block.style.gridColumn = String(actors.indexOf(r.actor) + 2);
      if (r.mark) block.appendChild(el("span", "mark " + r.mark, MARKS[r.mark] || MARKS.other));
      block.appendChild(el("span", "what", r.action));
      if (r.resumed) block.appendChild(el("div", "loc", "at " + r.resumed));
      if (r.suspended) block.appendChild(el("div", "loc", "\u2192 " + r.suspended));
      var tip = r.where.map(function (k) { return sourceTip(data.sources[k]); }).join("\n");
      block.title = (r.deviation ? r.deviation + "\n" : "") + tip;
      block.addEventListener("click", function () { panel(data, r, block); });
      box.appendChild(block);
      if (location.hash === "#step-" + r.n) panel(data, r, block);
    });
  }

  function sourceTip(src) {
    return src.lines.filter(function (l) { return l[0] >= src.first && l[0] <= src.last; })
      .map(function (l) { return src.file + ":" + l[0] + "  " + l[1].trim(); }).join("\n");
  }

  function panel(data, r, block) {
    document.querySelectorAll(".step.selected").forEach(function (s) { s.classList.remove("selected"); });
    block.classList.add("selected");
    var body = document.getElementById("panel-body");
    body.textContent = "";
    body.appendChild(el("h2", "", "Step " + r.n + ": " + r.actor));
    body.appendChild(el("p", "", r.action));
    if (r.resumed) body.appendChild(el("p", "loc", "resumed at " + r.resumed));
    if (r.suspended) body.appendChild(el("p", "loc", "then: " + r.suspended));
    if (r.deviation) {
      var p = el("p");
      p.appendChild(el("span", "mark " + r.mark, MARKS[r.mark] || MARKS.other));
      p.appendChild(document.createTextNode(r.deviation));
      body.appendChild(p);
    }
    r.where.forEach(function (k) {
      var src = data.sources[k];
      body.appendChild(el("div", "loc", k));
      var pre = el("pre", "source");
      src.lines.forEach(function (l) {
        var line = el("span", l[0] >= src.first && l[0] <= src.last ? "hl" : "",
          String(l[0]).padStart(5) + "  " + l[1] + "\n");
        pre.appendChild(line);
      });
      body.appendChild(pre);
    });
    if (!r.where.length) body.appendChild(el("p", "loc", "(no source line recorded for this step)"));
    document.getElementById("panel").hidden = false;
  }

  function graph(g) {
    document.getElementById("waitfor").hidden = false;
    var box = document.getElementById("graph");
    var n = g.nodes.length, w = 720, h = n > 2 ? 380 : 200, cx = w / 2, cy = h / 2;
    var rx = n > 1 ? w / 2 - 130 : 0, ry = n > 2 ? h / 2 - 50 : 0;
    var pos = {};
    g.nodes.forEach(function (node, i) {
      var angle = n > 1 ? Math.PI + 2 * Math.PI * i / n : 0;
      pos[node.name] = [cx + rx * Math.cos(angle), cy + ry * Math.sin(angle)];
    });
    var root = svg("svg", { width: w, height: h, viewBox: "0 0 " + w + " " + h, role: "img" });
    var defs = svg("defs", {});
    [["arrow", "#5d6778"], ["arrow-cycle", "#c0392b"]].forEach(function (m) {
      var marker = svg("marker", { id: m[0], viewBox: "0 0 10 10", refX: "10", refY: "5",
        markerWidth: "8", markerHeight: "8", orient: "auto-start-reverse" });
      marker.appendChild(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: m[1] }));
      defs.appendChild(marker);
    });
    root.appendChild(defs);
    g.edges.forEach(function (e, i) {
      var a = pos[e.from], b = pos[e.to];
      var group = svg("g", { "class": "edge" + (e.cycle ? " cycle" : ""), "data-from": e.from, "data-to": e.to });
      var dx = b[0] - a[0], dy = b[1] - a[1], len = Math.sqrt(dx * dx + dy * dy) || 1;
      // Offset each direction sideways, so two threads waiting on each other show two arrows.
      var ox = -dy / len * 8, oy = dx / len * 8, pad = 24 / len;
      group.appendChild(svg("line", { x1: a[0] + dx * pad + ox, y1: a[1] + dy * pad + oy,
        x2: b[0] - dx * pad + ox, y2: b[1] - dy * pad + oy,
        "marker-end": "url(#" + (e.cycle ? "arrow-cycle" : "arrow") + ")" }));
      // A label beside its arrow: left of it or right of it for a steep one, above for a flat one.
      var steep = Math.abs(ox) > Math.abs(oy);
      var anchor = steep ? (ox > 0 ? "start" : "end") : "middle";
      var label = svg("text", { x: (a[0] + b[0]) / 2 + ox * 1.5, y: (a[1] + b[1]) / 2 + oy * 2.2 + (steep ? 4 : -3),
        "text-anchor": anchor });
      label.textContent = e.label;
      group.appendChild(label);
      root.appendChild(group);
    });
    g.nodes.forEach(function (node) {
      var p = pos[node.name];
      var group = svg("g", { "class": "node", "data-node": node.name });
      var width = Math.min(220, 16 + 7 * node.name.length);
      group.appendChild(svg("rect", { x: p[0] - width / 2, y: p[1] - 14, width: width, height: 28, rx: 5 }));
      var text = svg("text", { x: p[0], y: p[1] + 4, "text-anchor": "middle" });
      text.textContent = node.name;
      group.appendChild(text);
      var title = svg("title", {});
      title.textContent = node.name + (node.at ? " at " + node.at : "") + (node.src ? " (" + node.src + ")" : "") + " " + node.waits;
      group.appendChild(title);
      root.appendChild(group);
    });
    box.appendChild(root);
    var list = el("ul");
    g.nodes.forEach(function (node) {
      if (!node.waits) return;
      list.appendChild(el("li", "", node.name + (node.at ? " at " + node.at : "") + " " + node.waits));
    });
    box.appendChild(list);
    if (g.cycle.length) box.appendChild(el("p", "", "Wait-for cycle: " + g.cycle.join(" \u2192 ")));
  }

  function replay(lines) {
    var box = document.getElementById("replay-lines");
    if (!lines.length) box.appendChild(el("p", "", "(the report names no replay line)"));
    lines.forEach(function (line) {
      var row = el("div", "replay-line");
      var code = el("code", "", line);
      var button = el("button", "copy", "copy");
      button.type = "button";
      button.addEventListener("click", function () { copy(line, code, button); });
      row.appendChild(code);
      row.appendChild(button);
      box.appendChild(row);
    });
  }

  function copy(text, code, button) {
    function done(ok) { button.textContent = ok ? "copied" : "select and copy"; }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { fallback(); });
    } else {
      fallback();
    }
    function fallback() {
      // file:// pages are no secure context in every browser: select the line and copy it.
      var range = document.createRange();
      range.selectNodeContents(code);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      var ok = false;
      try { ok = document.execCommand("copy"); } catch (e) { ok = false; }
      done(ok);
    }
  }

  function scenario(s) {
    document.getElementById("scenario").hidden = false;
    var table = el("table");
    function row(cells, tag, span) {
      var tr = el("tr");
      cells.forEach(function (c) {
        var td = el(tag, "", c);
        if (span) td.colSpan = span;
        tr.appendChild(td);
      });
      table.appendChild(tr);
    }
    var width = Math.max(1, s.branches.length);
    s.prefix.forEach(function (c) { row([c], "td", width); });
    row(s.branches.map(function (_, i) { return "branch " + String.fromCharCode(65 + i); }), "th");
    var depth = Math.max.apply(null, s.branches.map(function (b) { return b.length; }).concat([0]));
    for (var i = 0; i < depth; i++) row(s.branches.map(function (b) { return b[i] || ""; }), "td");
    s.suffix.forEach(function (c) { row([c], "td", width); });
    document.getElementById("scenario-table").appendChild(table);
  }

  try {
    build(JSON.parse(document.getElementById("interlace-data").textContent));
  } catch (e) {
    report("error: " + (e && e.stack ? e.stack : e));
  }
})();
