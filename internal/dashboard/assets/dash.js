// The dashboard's one script (no framework, no build): a form posts once, a room's
// conversation stays live over Server-Sent Events, and the composer posts without
// reloading. Without it every page still works (forms post and redirect; a reload shows
// new messages).
"use strict";
// A form posts once: a second click while the first post is on its way (a double-click
// on Create) made a second saved reply or a second invitation link. A post that leaves
// the page where it was (a download, a dropped connection) frees its form after 10 s,
// and so does coming back to the page with the browser's Back button.
(function () {
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (e.defaultPrevented || (f.getAttribute("method") || "").toLowerCase() !== "post") { return; }
    if (f.hasAttribute("data-sent")) { e.preventDefault(); return; }
    f.setAttribute("data-sent", "");
    setTimeout(function () { f.removeAttribute("data-sent"); }, 10000);
  });
  window.addEventListener("pageshow", function (e) {
    if (!e.persisted) { return; }
    var sent = document.querySelectorAll("form[data-sent]");
    for (var i = 0; i < sent.length; i++) { sent[i].removeAttribute("data-sent"); }
  });
})();
(function () {
  var list = document.getElementById("messages");
  if (!list || !window.EventSource) { return; }
  var status = document.getElementById("live-status");
  function say(text) { if (status) { status.textContent = text; } }
  function has(id) {
    var items = list.querySelectorAll("li[data-id]");
    for (var i = 0; i < items.length; i++) { if (items[i].getAttribute("data-id") === id) { return true; } }
    return false;
  }
  function add(m) {
    if (has(m.id)) { return; }
    var li = document.createElement("li");
    li.setAttribute("data-id", m.id);
    var from = document.createElement("span");
    from.className = "from";
    from.textContent = m.from;
    var time = document.createElement("time");
    time.setAttribute("datetime", m.timestamp);
    time.textContent = " " + m.timestamp.replace("T", " ").replace("Z", " UTC");
    var p = document.createElement("p");
    p.textContent = m.content; // text only: a message is never parsed as markup
    li.appendChild(from); li.appendChild(time); li.appendChild(p);
    list.appendChild(li);
    var empty = document.getElementById("no-messages");
    if (empty) { empty.remove(); }
  }
  var es = new EventSource(list.getAttribute("data-events"));
  var gap = ""; // said once the stream skipped messages, until a reload
  es.addEventListener("open", function () { say("Live: new messages appear here." + gap); });
  es.addEventListener("message", function (e) { add(JSON.parse(e.data)); });
  es.addEventListener("gap", function () {
    gap = " Some messages that arrived while the page was away are not shown: reload the page to see them.";
    say("Live: new messages appear here." + gap);
  });
  es.addEventListener("gone", function () { es.close(); say("This room is no longer available to you. Reload the page."); });
  es.addEventListener("error", function () { say("Reconnecting…"); });

  var form = document.getElementById("composer");
  if (!form || !window.fetch) { return; }
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    var box = form.querySelector("textarea");
    var err = document.getElementById("composer-error");
    fetch(form.action, { method: "POST", body: new URLSearchParams(new FormData(form)), credentials: "same-origin",
      headers: { "X-Requested-With": "fetch" } })
      .then(function (r) {
        if (r.status === 204) { box.value = ""; err.textContent = ""; box.focus(); return; }
        return r.text().then(function (t) { err.textContent = t || "The message was not posted."; });
      })
      .catch(function () { err.textContent = "The message was not posted: the server could not be reached."; });
  });
})();
