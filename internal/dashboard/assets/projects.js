// The project pages' live parts (no framework, no build): a thread view follows its
// messages, who read them, its status and who is composing; the activity feed adds new
// events. Both over Server-Sent Events; without the script a reload shows the same.
"use strict";
(function () {
  var status = document.getElementById("live-status");
  function say(text) { if (status) { status.textContent = text; } }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined) { e.textContent = text; } // text only: nothing is parsed as markup
    return e;
  }
  function when(iso, tz) {
    try {
      // As the server writes times: 2026-06-11 17:00 and the zone, in the viewer's timezone.
      return new Intl.DateTimeFormat("sv-SE", { year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
        hourCycle: "h23", timeZone: tz || "UTC", timeZoneName: "short" }).format(new Date(iso));
    } catch (e) { return iso; }
  }
  function live(list, handlers) {
    if (!list || !window.EventSource) { return; }
    var es = new EventSource(list.getAttribute("data-events"));
    var gap = ""; // said once the stream skipped events, until a reload
    es.addEventListener("open", function () { say("Live: changes appear here." + gap); });
    es.addEventListener("gap", function () {
      gap = " Some events that happened while the page was away are not shown: reload the page to see them.";
      say("Live: changes appear here." + gap);
    });
    es.addEventListener("gone", function () { es.close(); say("This page is no longer available to you. Reload it."); });
    es.addEventListener("error", function () { say("Reconnecting…"); });
    Object.keys(handlers).forEach(function (k) {
      es.addEventListener(k, function (e) { handlers[k](JSON.parse(e.data)); });
    });
  }
  function find(list, id) {
    var items = list.querySelectorAll("li[data-id]");
    for (var i = 0; i < items.length; i++) { if (items[i].getAttribute("data-id") === id) { return items[i]; } }
    return null;
  }
  function noneYet() { var e = document.getElementById("no-messages"); if (e) { e.remove(); } }

  var thread = document.getElementById("thread-messages");
  var feed = document.getElementById("activity");
  var tz = (thread || feed || document.body).getAttribute("data-tz") || "UTC";
  function reads(m) {
    var p = el("p", "reads meta");
    if (!m.reads || !m.reads.length) { p.textContent = "no recipients"; return p; }
    m.reads.forEach(function (r, i) {
      if (i) { p.appendChild(document.createTextNode(", ")); }
      var s = el("span", "", r.part + ": " + (r.readAt ? "read " + when(r.readAt, tz) : "unread"));
      s.setAttribute("data-part", r.part);
      p.appendChild(s);
    });
    return p;
  }
  live(thread, {
    thread: function (t) {
      var badge = document.getElementById("thread-status");
      if (badge && badge.textContent !== t.status) {
        badge.textContent = t.status;
        badge.className = "badge state-" + t.status;
        var form = document.getElementById("cancel-thread");
        if (form && t.status !== "open") { form.closest("section").remove(); }
      }
      var c = t.composing || [];
      document.getElementById("composing").textContent = c.length ? c.join(", ") + (c.length === 1 ? " is" : " are") + " composing…" : "";
      (t.messages || []).forEach(function (m) {
        var li = find(thread, m.id);
        if (li) {
          var old = li.querySelector("p.reads");
          if (old) { old.replaceWith(reads(m)); }
          return;
        }
        li = el("li");
        li.setAttribute("data-id", m.id);
        li.appendChild(el("span", "from", m.from));
        var time = el("time", "", " " + when(m.createdAt, tz));
        time.setAttribute("datetime", m.createdAt);
        li.appendChild(time);
        if (m.urgent) { li.appendChild(el("span", "badge amber", "urgent")); }
        if (m.needsHuman) { li.appendChild(el("span", "badge amber", "needs a person")); }
        li.appendChild(el("p", "", m.body));
        li.appendChild(reads(m));
        thread.appendChild(li);
        noneYet();
      });
    }
  });

  live(feed, {
    activity: function (a) {
      if (find(feed, a.id)) { return; }
      var li = el("li");
      li.setAttribute("data-id", a.id);
      li.appendChild(el("span", "from", a.type));
      li.appendChild(document.createTextNode(" · " + (a.part ? a.part + " [" + a.org + "]" : "a person") + " "));
      var time = el("time", "", when(a.at, tz));
      time.setAttribute("datetime", a.at);
      li.appendChild(time);
      if (a.detail) { var p = el("p"); p.appendChild(el("code", "", a.detail)); li.appendChild(p); }
      if (a.usage) { var u = el("p", "meta", "usage "); u.appendChild(el("code", "", a.usage)); li.appendChild(u); }
      // Newest first, placed by id (ids sort by time): an event that committed late
      // goes below the newer ones already shown.
      var items = feed.querySelectorAll("li[data-id]"), before = items.length ? null : feed.firstChild;
      for (var i = 0; i < items.length; i++) {
        if (items[i].getAttribute("data-id") < a.id) { before = items[i]; break; }
      }
      feed.insertBefore(li, before);
      noneYet();
    }
  });
})();
