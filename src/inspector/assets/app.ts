/**
 * The inspector's page script: plain DOM, no framework, served from the package
 * itself. Every view reads the JSON API once through the live stream
 * (`/api/events`, server-sent events) and renders again whenever the server sends a
 * change. Text always goes in as text (never as HTML), so a recorded value cannot
 * inject markup. Links are real links (deep links, the back button, keyboard).
 *
 * @internal
 */
export const APP_JS = String.raw`
(function () {
  "use strict";
  var main = document.getElementById("main");
  var liveEl = document.getElementById("live");
  var meta = { readOnly: true, source: "" };
  var stream = null;
  var expanded = {};
  var collapsed = {};
  var outputs = {};

  function h(tag, attrs) {
    var el = document.createElement(tag);
    if (attrs) {
      for (var k in attrs) {
        var v = attrs[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "text") el.textContent = String(v);
        else if (k === "style") el.style.cssText = String(v);
        else if (k.indexOf("on") === 0) el.addEventListener(k.slice(2), v);
        else el.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (var i = 2; i < arguments.length; i++) add(el, arguments[i]);
    return el;
  }
  function add(el, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) { child.forEach(function (c) { add(el, c); }); return; }
    el.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  }
  function clear(el) { while (el.firstChild) el.removeChild(el.firstChild); }
  function badge(status, text) { return h("span", { "class": "badge s-" + status, "data-status": status, text: text || status }); }
  function link(href, text, attrs) {
    var a = h("a", Object.assign({ href: href }, attrs || {}), text);
    a.addEventListener("click", function (e) {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault();
      go(href);
    });
    return a;
  }
  function go(href, replace) {
    if (replace) history.replaceState(null, "", href); else history.pushState(null, "", href);
    route();
  }
  function enc(s) { return encodeURIComponent(s); }
  function executionHref(id) { return "/executions/" + enc(id); }
  function childHref(id) { return "/children/" + enc(id); }
  function bytes(n) {
    if (n === null || n === undefined) return "-";
    if (n < 1024) return n + " B";
    if (n < 1048576) return (n / 1024).toFixed(1) + " KiB";
    return (n / 1048576).toFixed(1) + " MiB";
  }
  function span(ms) {
    if (ms === null || ms === undefined) return "-";
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    var m = Math.floor(s / 60);
    if (m < 60) return m + "m " + (s % 60) + "s";
    var hr = Math.floor(m / 60);
    if (hr < 24) return hr + "h " + (m % 60) + "m";
    return Math.floor(hr / 24) + "d " + (hr % 24) + "h";
  }
  function time(iso) { return iso ? iso.replace("T", " ").replace("Z", "") : "-"; }
  function setLive(on, text) { liveEl.className = on ? "live on" : "live"; liveEl.textContent = text; }

  /** Keeps focus on the element with the same data-key across a render. */
  function keepFocus(render) {
    var active = document.activeElement;
    var key = active && active.getAttribute ? active.getAttribute("data-key") : null;
    render();
    if (key) {
      var again = main.querySelector("[data-key=\"" + CSS.escape(key) + "\"]");
      if (again && again !== document.activeElement) again.focus();
    }
  }

  function watch(params, render) {
    if (stream) stream.close();
    setLive(false, "connecting");
    var es = new EventSource("/api/events?" + params.toString());
    stream = es;
    es.onmessage = function (e) {
      if (stream !== es) return;
      var message = JSON.parse(e.data);
      setLive(true, "live");
      keepFocus(function () { render(message.status, message.body); });
    };
    es.onerror = function () { if (stream === es) setLive(false, "reconnecting"); };
  }

  function notFound(container, message) {
    clear(container);
    add(container, h("section", { "class": "notfound", "data-testid": "not-found" },
      h("h1", { text: "Not found" }), h("p", { text: message }),
      h("p", null, link("/executions", "All executions"))));
  }

  function confirmAction(title, text) {
    var dialog = document.getElementById("confirm");
    document.getElementById("confirm-title").textContent = title;
    document.getElementById("confirm-text").textContent = text;
    return new Promise(function (resolve) {
      dialog.addEventListener("close", function done() {
        dialog.removeEventListener("close", done);
        resolve(dialog.returnValue === "ok");
      });
      dialog.returnValue = "";
      dialog.showModal();
    });
  }

  function post(path) {
    return fetch(path, { method: "POST", headers: { "x-noetic-inspector": "1" }, credentials: "same-origin" })
      .then(function (r) { return r.json().then(function (body) { return { status: r.status, body: body }; }); });
  }

  function toast(container, text, bad) {
    var el = h("div", { "class": "toast" + (bad ? " problem" : ""), role: "status", text: text });
    container.insertBefore(el, container.firstChild);
    setTimeout(function () { if (el.parentNode) el.parentNode.removeChild(el); }, 6000);
  }

  // ---------------------------------------------------------------- JSON viewer
  function jsonNode(value, key, depth) {
    var label = key === null ? null : h("span", { "class": "k", text: JSON.stringify(key) + ": " });
    if (value === null || typeof value !== "object") {
      var cls = typeof value === "string" ? "str" : typeof value === "number" ? "num" : "lit";
      return h("div", null, label, h("span", { "class": cls, text: JSON.stringify(value) }));
    }
    var isArray = Array.isArray(value);
    var keys = isArray ? value.map(function (_, i) { return i; }) : Object.keys(value);
    var summary = (isArray ? "[" + keys.length + " items]" : "{" + keys.length + " keys}");
    var details = h("details", depth < 2 ? { open: true } : null, h("summary", null, label, summary));
    keys.forEach(function (k) { add(details, jsonNode(value[k], isArray ? null : k, depth + 1)); });
    return details;
  }
  function jsonView(value) { return h("div", { "class": "json mono", "data-testid": "json" }, jsonNode(value, null, 0)); }

  // ---------------------------------------------------------------- executions list
  function executionsView(params) {
    var q = new URLSearchParams(params);
    var form = h("form", { "class": "controls", role: "search" });
    var status = h("select", { name: "status", "data-key": "status" }, h("option", { value: "", text: "any status" }));
    (meta.statuses || []).forEach(function (s) { add(status, h("option", { value: s, text: s })); });
    status.value = q.get("status") || "";
    var search = h("input", { name: "q", type: "search", placeholder: "execution id", "data-key": "q", "aria-label": "Search by execution id" });
    search.value = q.get("q") || "";
    var sort = h("select", { name: "sort", "data-key": "sort" },
      h("option", { value: "checkpoint", text: "last checkpoint" }), h("option", { value: "id", text: "id" }),
      h("option", { value: "steps", text: "steps" }), h("option", { value: "status", text: "status" }));
    sort.value = q.get("sort") || "checkpoint";
    var dir = h("select", { name: "dir", "data-key": "dir" }, h("option", { value: "desc", text: "descending" }), h("option", { value: "asc", text: "ascending" }));
    dir.value = q.get("dir") || "desc";
    add(form, [
      h("label", null, "Status", status), h("label", null, "Search (/)", search),
      h("label", null, "Sort by", sort), h("label", null, "Order", dir)
    ]);
    function apply() {
      var next = new URLSearchParams();
      if (status.value) next.set("status", status.value);
      if (search.value.trim()) next.set("q", search.value.trim());
      if (sort.value !== "checkpoint") next.set("sort", sort.value);
      if (dir.value !== "desc") next.set("dir", dir.value);
      go("/executions" + (next.toString() ? "?" + next.toString() : ""), true);
    }
    var timer = null;
    status.addEventListener("change", apply); sort.addEventListener("change", apply); dir.addEventListener("change", apply);
    search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(apply, 250); });
    form.addEventListener("submit", function (e) { e.preventDefault(); apply(); });

    var body = h("div");
    clear(main);
    add(main, [h("h1", { text: "Executions" }), form, body]);
    var api = new URLSearchParams(q);
    api.set("view", "executions");
    watch(api, function (code, data) {
      clear(body);
      if (code !== 200) { add(body, h("p", { "class": "problem", text: data.error })); return; }
      var chips = h("div", { "class": "chips", "aria-label": "Statuses" });
      Object.keys(data.counts).sort().forEach(function (s) {
        var p = new URLSearchParams(q); p.set("status", s); p.delete("offset");
        add(chips, link("/executions?" + p.toString(), [badge(s, s + " " + data.counts[s])], { "data-key": "chip-" + s }));
      });
      add(body, chips);
      if (data.rows.length === 0) {
        add(body, h("p", { "class": "muted", text: data.all === 0 ? "No recorded executions in " + meta.source + "." : "No execution matches." }));
        return;
      }
      function th(label, key, num) {
        var active = data.query.sort === key;
        var b = h("button", { type: "button", "data-key": "sort-" + key, text: label + (active ? (data.query.descending ? " \u2193" : " \u2191") : "") });
        b.addEventListener("click", function () { sort.value = key; dir.value = active && data.query.descending ? "asc" : "desc"; apply(); });
        return h("th", { "class": num ? "num" : null, "aria-sort": active ? (data.query.descending ? "descending" : "ascending") : null }, b);
      }
      var table = h("table", { "data-testid": "executions" },
        h("thead", null, h("tr", null, th("Execution", "id"), th("Status", "status"), h("th", { text: "Name" }),
          h("th", { text: "Thread" }), th("Steps", "steps", true), th("Last checkpoint", "checkpoint"))));
      var tbody = h("tbody");
      data.rows.forEach(function (row) {
        var root = row.frontier.length > 0 ? row.frontier[0].replace(/^\//, "").replace(/#\d+$/, "") : "-";
        add(tbody, h("tr", { "data-execution": row.executionId },
          h("td", { "class": "mono" }, link(executionHref(row.executionId), row.executionId, { "data-key": "x-" + row.executionId })),
          h("td", null, badge(row.status), row.problem ? h("div", { "class": "problem", text: (row.status === "failed" ? "" : "execution:" + row.executionId + ":snapshot: ") + row.problem }) : null),
          h("td", { "class": "mono", text: root }),
          h("td", { "class": "mono", text: row.threadId || "-" }),
          h("td", { "class": "num", text: row.stepsRecorded }),
          h("td", { "class": "mono", text: time(row.lastCheckpoint) })));
      });
      add(table, tbody);
      add(body, table);
      var pager = h("div", { "class": "pager" });
      var from = data.offset + 1, to = data.offset + data.rows.length;
      add(pager, h("span", { text: "Showing " + from + "\u2013" + to + " of " + data.total + (data.total !== data.all ? " (" + data.all + " in all)" : "") }));
      function pageLink(offset, label) {
        var p = new URLSearchParams(q); if (offset > 0) p.set("offset", String(offset)); else p.delete("offset");
        return link("/executions" + (p.toString() ? "?" + p.toString() : ""), label, { "data-key": "page-" + label });
      }
      if (data.offset > 0) add(pager, pageLink(Math.max(0, data.offset - data.limit), "Previous"));
      if (to < data.total) add(pager, pageLink(data.offset + data.limit, "Next"));
      add(body, pager);
    });
    document.onkeydown = function (e) {
      if (e.key === "/" && document.activeElement.tagName !== "INPUT") { e.preventDefault(); search.focus(); }
    };
  }

  // ---------------------------------------------------------------- execution detail
  function ledgerTree(executionId, records) {
    var root = { segment: "", path: "", children: {}, order: [], records: [], first: Infinity };
    records.forEach(function (record) {
      var segments = record.path === "?" ? ["?"] : record.path.split(/(?=[\/\[])/).filter(function (s) { return s !== ""; });
      var node = root, path = "";
      segments.forEach(function (segment) {
        path += segment;
        if (!node.children[segment]) { node.children[segment] = { segment: segment, path: path, children: {}, order: [], records: [], first: Infinity }; node.order.push(segment); }
        node = node.children[segment];
        node.first = Math.min(node.first, record.seq);
      });
      node.records.push(record);
    });
    var table = h("table", { "class": "tree", "data-testid": "ledger" },
      h("thead", null, h("tr", null, h("th", { text: "Path" }), h("th", { text: "Kind" }), h("th", { text: "Step" }),
        h("th", { "class": "num", text: "Output" }), h("th", { text: "Recorded" }), h("th", { "class": "num", text: "Seq" }), h("th", { text: "Marks" }))));
    var tbody = h("tbody");
    function marks(record) {
      var list = [badge(record.state === "tombstone" ? "tombstone" : record.state, record.state === "superseded" ? "superseded by " + record.by : record.state === "discarded" ? "discarded by " + record.by : record.state)];
      if (record.waiting) list.push(badge("waiting", "intent: waiting on reconcile"));
      if (record.diverged) list.push(badge("diverged", "diverged"));
      if (record.state === "corrupt") list.push(h("span", { "class": "problem mono", text: "unreadable " + record.key }));
      return h("div", { "class": "marks" }, list);
    }
    function visit(node, depth, hidden) {
      var kids = node.order.map(function (k) { return node.children[k]; }).sort(function (a, b) { return a.first - b.first; });
      var isCollapsed = !!collapsed[executionId + " " + node.path];
      var toggle = kids.length === 0 ? h("span", { "class": "toggle" }) : h("button", {
        "class": "toggle", type: "button", "aria-expanded": isCollapsed ? "false" : "true", "data-key": "t-" + node.path,
        "aria-label": (isCollapsed ? "Expand " : "Collapse ") + node.path, text: isCollapsed ? "\u25B8" : "\u25BE",
        onclick: function () { collapsed[executionId + " " + node.path] = !isCollapsed; route(true); }
      });
      var name = h("span", { style: "padding-left:" + (depth * 16) + "px" }, toggle, h("span", { "class": "mono", text: node.segment }));
      if (!hidden) {
        if (node.records.length === 0) add(tbody, h("tr", null, h("td", { "class": "path" }, name), h("td"), h("td"), h("td"), h("td"), h("td"), h("td")));
        node.records.forEach(function (record, i) {
          var outKey = executionId + " " + record.seq;
          var showOutput = record.record === "step" ? h("button", {
            type: "button", "data-key": "o-" + record.seq, "aria-expanded": expanded[outKey] ? "true" : "false",
            text: (expanded[outKey] ? "hide " : "show ") + bytes(record.outputBytes),
            onclick: function () {
              expanded[outKey] = !expanded[outKey];
              if (expanded[outKey] && !outputs[outKey]) {
                fetch("/api/executions/" + enc(executionId) + "/outputs/" + record.seq, { credentials: "same-origin" })
                  .then(function (r) { return r.json(); }).then(function (body) { outputs[outKey] = body; route(true); });
              } else route(true);
            }
          }) : h("span", { text: record.outputBytes === null ? "-" : bytes(record.outputBytes) });
          add(tbody, h("tr", { "data-seq": record.seq, "data-path": record.path },
            h("td", { "class": "path" }, i === 0 ? name : h("span", { style: "padding-left:" + (depth * 16 + 18) + "px", "class": "muted", text: "\u2033" })),
            h("td", { "class": "mono", text: record.kind || (record.record === "tombstone" ? "tombstone" : "?") }),
            h("td", { "class": "mono", text: record.stepId || "-" }),
            h("td", { "class": "num" }, showOutput),
            h("td", { "class": "mono", text: time(record.at) }),
            h("td", { "class": "num", text: record.seq }),
            h("td", null, marks(record))));
          if (expanded[outKey]) {
            var out = outputs[outKey];
            add(tbody, h("tr", null, h("td", { colspan: 7 },
              out === undefined ? h("span", { "class": "muted", text: "loading\u2026" })
                : out.error ? h("span", { "class": "problem", text: out.error })
                : out.undefined ? h("code", { text: "undefined" }) : jsonView(out.value))));
          }
        });
      }
      kids.forEach(function (kid) { visit(kid, depth + 1, hidden || isCollapsed); });
    }
    root.order.map(function (k) { return root.children[k]; }).sort(function (a, b) { return a.first - b.first; })
      .forEach(function (node) { visit(node, 0, false); });
    add(table, tbody);
    return table;
  }

  function timeline(records) {
    var timed = records.filter(function (r) { return r.at; });
    if (timed.length === 0) return h("p", { "class": "muted", text: "No record carries its time." });
    var first = Date.parse(timed[0].at), last = Date.parse(timed[timed.length - 1].at);
    timed.forEach(function (r) { var t = Date.parse(r.at); if (t < first) first = t; if (t > last) last = t; });
    var spanMs = Math.max(1, last - first);
    var grid = h("div", { "class": "timeline", "data-testid": "timeline" });
    timed.forEach(function (r) {
      var t = Date.parse(r.at);
      add(grid, [h("span", { "class": "mono", text: r.path }),
        h("div", { "class": "bar", title: r.at }, h("span", { "class": "dot", style: "left:" + ((t - first) / spanMs * 100).toFixed(2) + "%" })),
        h("span", { "class": "mono muted", text: "+" + (t - first) + " ms" })]);
    });
    return grid;
  }

  function fields(pairs) {
    var dl = h("dl", { "class": "fields" });
    pairs.forEach(function (p) { if (p) add(dl, [h("dt", { text: p[0] }), h("dd", null, p[1])]); });
    return dl;
  }

  function executionView(id) {
    clear(main);
    var body = h("div");
    add(main, body);
    var api = new URLSearchParams({ view: "execution", id: id });
    watch(api, function (code, data) {
      if (code === 404) { notFound(body, "No execution " + id + " is recorded in " + meta.source + "."); return; }
      clear(body);
      if (code !== 200) { add(body, h("p", { "class": "problem", text: data.error })); return; }
      var row = data.execution, snap = data.snapshot, ledger = data.ledger;
      var status = row ? row.status : "empty";
      var head = h("h1", null, "Execution ", h("span", { "class": "mono", text: id }), " ", h("span", { "data-testid": "status" }, badge(status)));
      add(body, head);
      var actions = h("div", { "class": "controls" });
      if (!meta.readOnly) {
        add(actions, h("button", { type: "button", "class": "danger", "data-key": "clear", text: "Clear execution\u2026", onclick: function () {
          confirmAction("Clear execution " + id + "?",
            "Deletes its snapshot, its " + ledger.records.length + " ledger records and its in-process child agents' snapshots. " +
            "A resume of " + id + " would start over from nothing. This cannot be undone.").then(function (ok) {
            if (!ok) return;
            post("/api/executions/" + enc(id) + "/clear").then(function (r) {
              if (r.status === 200) go("/executions"); else toast(body, r.body.error, true);
            });
          });
        } }));
      }
      add(body, actions);
      var links = [];
      if (data.parent) links.push(["parent", h("span", null, data.parent.executionId ? link(executionHref(data.parent.executionId), data.parent.executionId, { "data-key": "parent" }) : "-", " via child ", link(childHref(data.parent.handleId), data.parent.handleId))]);
      if (data.children.length > 0) links.push(["children", h("span", null, data.children.map(function (c, i) {
        return [i > 0 ? ", " : "", link(childHref(c.handleId), c.handleId, { "data-key": "c-" + c.handleId }), " ", badge(c.shown),
          c.executionId ? [" ", link(executionHref(c.executionId), "(its execution)")] : null];
      }))]);
      if (row && row.runningIn) links.push(["running in", h("span", null, "child ", link(childHref(row.runningIn.handleId), row.runningIn.handleId), " (pid " + (row.runningIn.pid === null ? "not yet recorded" : row.runningIn.pid) + ")")]);
      if (row && row.lease) links.push(["lease", row.lease.owner + " until " + new Date(row.lease.expiresAt).toISOString() + (row.lease.live ? " (live)" : " (expired or released)")]);
      var snapPanel = h("section", { "class": "panel", "aria-labelledby": "snap-h" }, h("h2", { id: "snap-h", text: "Snapshot" }));
      if (data.snapshotProblem) {
        add(snapPanel, h("p", { "class": "problem", "data-testid": "unreadable" }, badge("unreadable"), " ", h("code", { text: data.snapshotProblem.key }), ": " + data.snapshotProblem.message));
      } else if (!snap) {
        add(snapPanel, h("p", { "class": "muted", text: "No snapshot recorded (a crash during a first save leaves none)." }));
      } else {
        add(snapPanel, fields([
          ["captured", h("span", { "class": "mono", text: time(snap.capturedAt) })],
          ["thread", snap.threadId || "-"], ["resource", snap.resourceId || "-"],
          ["frontier", snap.frontier.length === 0 ? "(idle)" : h("span", { "class": "mono", text: snap.frontier.map(function (f) { return f.path; }).join(" \u203A ") + (status === "finished" ? "  (completed after this snapshot)" : "") })],
          ["layers", snap.layers.join(", ") || "-"],
          ["cwd", snap.cwd && snap.cwd.current ? snap.cwd.current : "-"],
          ["ask-user", snap.askUser.length === 0 ? "none pending" : snap.askUser.map(function (p) { return p.id + " (" + time(p.createdAt) + ")"; }).join(", ")],
          ["item log", snap.items + " items"]
        ].concat(links)));
      }
      var counts = { live: 0, superseded: 0, discarded: 0, tombstone: 0, corrupt: 0 };
      ledger.records.forEach(function (r) { counts[r.state]++; });
      var summary = h("p", null, ledger.records.length + " records: " + counts.live + " live, " + counts.superseded + " superseded, " +
        counts.discarded + " discarded, " + counts.tombstone + " tombstones",
        counts.corrupt > 0 ? [", ", badge("corrupt", counts.corrupt + " unreadable")] : null,
        ledger.missing > 0 ? [" ", badge("evicted", ledger.missing + " evicted (seqs below " + ledger.lowestSeq + "; they re-run on resume)")] : null,
        ledger.recordFailed > 0 ? [" ", badge("failed", ledger.recordFailed + " record writes failed")] : null);
      add(body, h("div", { "class": "grid2" }, snapPanel,
        h("section", { "class": "panel", "aria-labelledby": "tl-h" }, h("h2", { id: "tl-h", text: "Timeline" }), timeline(ledger.records))));
      add(body, h("section", { "aria-labelledby": "ledger-h" }, h("h2", { id: "ledger-h", text: "Ledger" }), summary,
        ledger.records.length === 0 ? h("p", { "class": "muted", text: "No step recorded." }) : ledgerTree(id, ledger.records)));
    });
  }

  // ---------------------------------------------------------------- children
  function resultOf(child) {
    if (child.problem) return h("span", { "class": "problem" }, h("code", { text: child.key }), ": " + child.problem);
    if (!child.result) return "-";
    if (child.result._tag === "Success") return h("code", { text: "ok " + JSON.stringify(child.result.value).slice(0, 80) });
    var e = child.result.error || {};
    return h("span", { "class": "problem", text: (e._tag || "Failure") + ": " + (e.message || "") });
  }
  function stopButton(container, child) {
    if (meta.readOnly || (child.status !== "running" && child.status !== "starting" && child.status !== "in-process")) return null;
    return h("button", { type: "button", "class": "danger", "data-key": "stop-" + child.handleId, "data-testid": "stop", text: "Stop\u2026", onclick: function () {
      confirmAction("Stop child " + child.handleId + "?",
        (child.pid ? "Its process group (pid " + child.pid + ") gets SIGTERM, then SIGKILL after the grace. " : "It runs inside its host: its manifest is removed, so no restarted host re-runs it. ") +
        "The work in progress of step " + (child.stepId || "?") + " is lost, and the child is recorded as stopped.").then(function (ok) {
        if (!ok) return;
        post("/api/children/" + enc(child.handleId) + "/stop").then(function (r) {
          toast(container, r.status === 200 ? "stopped " + child.handleId : r.body.error, r.status !== 200);
        });
      });
    } });
  }
  function childCells(container, c) {
    return [
      h("td", { "class": "mono" }, link(childHref(c.handleId), c.handleId, { "data-key": "h-" + c.handleId })),
      h("td", null, badge(c.shown)),
      h("td", null, c.alive === null ? "-" : badge(c.alive ? "alive" : "dead", c.alive ? "alive" : "not alive")),
      h("td", { "class": "num", text: c.pid === null ? "-" : c.pid }),
      h("td", { "class": "mono", text: c.stepId || "-" }),
      h("td", { "class": "mono" }, c.executionId ? link(executionHref(c.executionId), c.executionId) : "-"),
      h("td", { "class": "mono" }, c.parentExecutionId ? link(executionHref(c.parentExecutionId), c.parentExecutionId) : "-"),
      h("td", { "class": "mono", text: time(c.createdAt) }),
      h("td", { text: span(c.ageMs) }),
      h("td", null, resultOf(c)),
      h("td", null, stopButton(container, c))
    ];
  }
  var childHead = ["Handle", "Status", "Alive", "PID", "Step", "Execution", "Parent", "Started", "Age", "Result", ""];
  function childrenView() {
    clear(main);
    var body = h("div");
    add(main, [h("h1", { text: "Children" }), body]);
    watch(new URLSearchParams({ view: "children" }), function (code, data) {
      clear(body);
      if (code !== 200) { add(body, h("p", { "class": "problem", text: data.error })); return; }
      if (data.children.length === 0) { add(body, h("p", { "class": "muted", text: "No recorded children in " + meta.source + "." })); return; }
      var tbody = h("tbody");
      data.children.forEach(function (c) { add(tbody, h("tr", { "data-handle": c.handleId }, childCells(body, c))); });
      add(body, h("table", { "data-testid": "children" }, h("thead", null, h("tr", null, childHead.map(function (t) { return h("th", { text: t }); }))), tbody));
      add(body, h("p", { "class": "muted", text: "Liveness is the recorded pid with its recorded start time, so a recycled pid never counts." }));
    });
  }
  function childView(id) {
    clear(main);
    var body = h("div");
    add(main, body);
    watch(new URLSearchParams({ view: "child", id: id }), function (code, c) {
      if (code === 404) { notFound(body, "No child " + id + " is recorded in " + meta.source + "."); return; }
      clear(body);
      if (code !== 200) { add(body, h("p", { "class": "problem", text: c.error })); return; }
      add(body, h("h1", null, "Child ", h("span", { "class": "mono", text: id }), " ", h("span", { "data-testid": "status" }, badge(c.shown))));
      add(body, h("div", { "class": "controls" }, stopButton(body, c)));
      add(body, h("section", { "class": "panel" }, fields([
        ["adapter", c.adapter || "-"], ["step", c.stepId || "-"],
        ["execution", c.executionId ? link(executionHref(c.executionId), c.executionId) : "-"],
        ["parent", c.parentExecutionId ? link(executionHref(c.parentExecutionId), c.parentExecutionId) : "-"],
        ["pid", c.pid === null ? "-" : String(c.pid)], ["alive", c.alive === null ? "-" : (c.alive ? "alive" : "not alive")],
        ["started", time(c.createdAt) + " (" + span(c.ageMs) + " ago)"], ["manifest", h("code", { text: c.key })],
        ["result", c.result ? jsonView(c.result) : resultOf(c)]
      ])));
    });
  }

  // ---------------------------------------------------------------- queues
  function spark(values) {
    var w = 160, hgt = 32;
    var ns = "http://www.w3.org/2000/svg";
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("class", "spark"); svg.setAttribute("width", w); svg.setAttribute("height", hgt);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "depth over the last " + values.length + " samples, now " + (values.length ? values[values.length - 1] : 0));
    var max = Math.max.apply(null, values.concat([1]));
    var base = document.createElementNS(ns, "line");
    base.setAttribute("x1", 0); base.setAttribute("x2", w); base.setAttribute("y1", hgt - 1); base.setAttribute("y2", hgt - 1);
    svg.appendChild(base);
    var line = document.createElementNS(ns, "polyline");
    var n = Math.max(values.length - 1, 1);
    line.setAttribute("points", values.map(function (v, i) { return (i / n * (w - 2) + 1).toFixed(1) + "," + (hgt - 2 - v / max * (hgt - 4)).toFixed(1); }).join(" "));
    svg.appendChild(line);
    return svg;
  }
  function queuesView() {
    clear(main);
    var body = h("div");
    add(main, [h("h1", { text: "Queues" }), body]);
    watch(new URLSearchParams({ view: "queues" }), function (code, data) {
      clear(body);
      if (code !== 200) { add(body, h("p", { "class": "problem", text: data.error })); return; }
      if (data.queues.length === 0) { add(body, h("p", { "class": "muted", text: "No durable queues in " + meta.source + "." })); return; }
      var tbody = h("tbody");
      data.queues.forEach(function (q) {
        add(tbody, h("tr", { "data-queue": q.socketId },
          h("td", { "class": "mono", text: q.socketId }), h("td", { text: q.storage }),
          h("td", { "class": "num", text: q.headSeq }), h("td", { "class": "num", text: q.ackedSeq }),
          h("td", { "class": "num", text: q.pendingFrames }), h("td", { "class": "num", text: bytes(q.pendingBytes) }),
          h("td", null, spark(q.history)),
          h("td", null, q.damaged.length === 0 ? "-" : q.damaged.map(function (d) { return h("div", { "class": "problem" }, badge("unreadable"), " through seq " + d.through + ": " + d.message); }))));
      });
      add(body, h("table", { "data-testid": "queues" }, h("thead", null, h("tr", null,
        ["Queue", "Storage", "Head", "Acked", "Depth", "Bytes", "Depth over time", "Damaged"].map(function (t, i) { return h("th", { "class": i >= 2 && i <= 5 ? "num" : null, text: t }); }))), tbody));
    });
  }

  // ---------------------------------------------------------------- routing
  function route(rerender) {
    var path = location.pathname;
    var params = new URLSearchParams(location.search);
    document.querySelectorAll("nav a[data-nav]").forEach(function (a) {
      var on = path === "/" ? a.getAttribute("data-nav") === "executions" : path.indexOf("/" + a.getAttribute("data-nav")) === 0;
      if (on) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    if (rerender === true && stream && stream.lastRender) { stream.lastRender(); return; }
    document.onkeydown = null;
    var m;
    if (path === "/" || path === "/executions") executionsView(params);
    else if ((m = /^\/executions\/([^\/]+)$/.exec(path))) executionView(decodeURIComponent(m[1]));
    else if (path === "/children") childrenView();
    else if ((m = /^\/children\/([^\/]+)$/.exec(path))) childView(decodeURIComponent(m[1]));
    else if (path === "/queues") queuesView();
    else { if (stream) stream.close(); stream = null; setLive(false, ""); notFound(main, "No page at " + path + "."); }
  }

  // Re-renders the current view from its last message (a toggle), without asking the server again.
  var baseWatch = watch;
  watch = function (params, render) {
    baseWatch(params, function (code, body) {
      stream.lastRender = function () { keepFocus(function () { render(code, body); }); };
      render(code, body);
    });
  };

  document.querySelectorAll("nav a[data-nav]").forEach(function (a) {
    a.addEventListener("click", function (e) {
      if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
      e.preventDefault(); go(a.getAttribute("href"));
    });
  });
  window.addEventListener("popstate", function () { route(); });
  fetch("/api/meta", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (m) {
    meta = m;
    document.getElementById("source").textContent = m.source + (m.readOnly ? " (read-only)" : "");
    route();
  });
})();
`
