// The live panel: one row per server-sent event, newest first. Text only (textContent).
// On the overview, a model call also refreshes the cards, charts and tables: the server
// renders them again (`data-figures`, JSON of {element id: HTML}) and they are swapped in.
(function () {
  "use strict";
  var rows = document.getElementById("live-rows");
  var status = document.getElementById("live-status");
  if (!rows || !window.EventSource) { return; }
  var first = true;
  var onlySession = rows.dataset.session ? Number(rows.dataset.session) : null;
  // times in the dashboard's zone (named once, in the header), as on every page
  var clock = null;
  try {
    clock = new Intl.DateTimeFormat("en-GB", { timeZone: rows.dataset.zone || "UTC",
      hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
  } catch (e) { clock = null; }
  function at(ts) {
    var when = ts ? new Date(ts) : new Date();
    if (clock && !isNaN(when.getTime())) { return clock.format(when); }
    return (ts || when.toISOString()).slice(11, 19);
  }
  function cell(text, left) {
    var td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "-" : String(text);
    if (left) { td.className = "l"; }
    return td;
  }
  function add(kind, data, recent) {
    if (onlySession !== null && data.session !== onlySession) { return; }
    if (first) { rows.textContent = ""; first = false; }
    var tr = document.createElement("tr");
    tr.className = "live-" + kind;
    tr.dataset.kind = kind;
    if (recent) { tr.dataset.recent = "1"; }
    var detail = kind === "trim"
      ? data.reason + ": dropped " + data.dropped_turns + " turns, " + data.tokens_before + " → " + data.tokens_after + " tokens"
      : kind === "error" ? data.error
      : kind === "compaction" ? "summary call, " + (data.model || "")
      : (data.model || "") + (data.fallback_from ? " (fallback for " + data.fallback_from + ")" : "")
        + (data.tool_calls ? ", " + data.tool_calls + " tool calls" : "")
        + (data.cache_write_tokens ? ", " + data.cache_write_tokens + " cache writes" : "")
        + (data.input_truncated_by_provider ? ", truncated by the provider (num_ctx)" : "");
    [cell(at(data.ts), true), cell(kind, true), cell(data.chat, true),
     cell(data.input_tokens), cell(data.cached_tokens), cell(data.output_tokens),
     cell(data.latency_ms === undefined ? null : data.latency_ms + " ms"), cell(detail, true)
    ].forEach(function (td) { tr.appendChild(td); });
    if (data.call_id && /^\d{8}-[0-9a-f]{12}$/.test(data.call_id)) {
      var link = document.createElement("a");
      link.href = "/calls/" + data.call_id;
      link.textContent = "trace";
      var last = tr.lastChild;
      last.appendChild(document.createTextNode(" "));
      last.appendChild(link);
    }
    rows.insertBefore(tr, rows.firstChild);
    while (rows.children.length > 50) { rows.removeChild(rows.lastChild); }
  }
  // the last calls before the page was opened (`recent_events`), oldest first
  if (rows.dataset.recent) {
    try {
      JSON.parse(rows.dataset.recent).forEach(function (e) { add(e.kind, e.data, true); });
    } catch (e) { /* the feed still fills the panel */ }
  }
  var live = document.getElementById("live");
  var figures = live ? live.dataset.figures : null;
  var soon = null, settle = null, busy = false, again = false;
  function swap(parts) {
    var parser = new DOMParser();
    Object.keys(parts).forEach(function (id) {
      var old = document.getElementById(id);
      var fresh = parser.parseFromString(parts[id], "text/html").getElementById(id);
      if (old && fresh) { old.replaceWith(document.importNode(fresh, true)); }
    });
  }
  function refresh() {
    soon = null;
    if (busy) { again = true; return; }
    busy = true;
    fetch(figures, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
      .then(function (body) { swap(body.parts); })
      .catch(function () { /* the next event tries again */ })
      .then(function () { busy = false; if (again) { again = false; follow(); } });
  }
  function follow() {
    if (!figures) { return; }
    if (soon === null) { soon = setTimeout(refresh, 500); }
    // inside `tgbot run` the event can come before its ledger line is written: look again
    clearTimeout(settle);
    settle = setTimeout(refresh, 3000);
  }
  var source = new EventSource("/events");
  function connected() { status.textContent = "connected"; status.className = "status on"; }
  source.onopen = connected;
  source.onerror = function (event) {
    // a server-sent `event: error` (a failed call) arrives here too, with its data
    if (event && event.data !== undefined) { return; }
    status.textContent = "reconnecting…"; status.className = "status off";
  };
  ["model_call", "compaction", "trim", "error"].forEach(function (kind) {
    source.addEventListener(kind, function (event) {
      add(kind, JSON.parse(event.data));
      if (kind !== "trim") { follow(); }
    });
  });
}());
