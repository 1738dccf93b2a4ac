// Small progressive enhancements; every page works without them.
(function () {
  // No inline handlers (the Content-Security-Policy forbids them): behaviour comes from data-*.
  document.querySelectorAll("select[data-autosubmit]").forEach(function (el) {
    el.addEventListener("change", function () { el.form.submit(); });
  });
  document.querySelectorAll("form[data-confirm]").forEach(function (f) {
    f.addEventListener("submit", function (ev) {
      if (!window.confirm(f.getAttribute("data-confirm"))) { ev.preventDefault(); ev.stopImmediatePropagation(); }
    });
  });
  // Partial refresh: elements with data-poll="URL" replace their inner HTML every few seconds
  // until the server answers with data-done="true" (HTMX-style, without the dependency).
  document.querySelectorAll("[data-poll]").forEach(function (el) {
    var url = el.getAttribute("data-poll");
    var every = parseInt(el.getAttribute("data-poll-ms") || "1500", 10);
    function tick() {
      fetch(url, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
        .then(function (r) { return r.text(); })
        .then(function (html) {
          el.innerHTML = html;
          var done = el.querySelector("[data-done='true']");
          if (done) { if (el.hasAttribute("data-reload-when-done")) { window.location.reload(); } return; }
          setTimeout(tick, every);
        })
        .catch(function () { setTimeout(tick, every * 2); });
    }
    setTimeout(tick, every);
  });
  // Forms marked data-async post with fetch and say what happened beside the button
  // ([data-feedback], a live region); data-refresh="#id" then polls that element's
  // data-refresh-url every second (up to a minute) until its first child's data-newest changes.
  document.querySelectorAll("form[data-async]").forEach(function (f) {
    var out = f.querySelector("[data-feedback]");
    var say = function (text, bad) { if (out) { out.textContent = text; out.classList.toggle("bad-text", !!bad); } };
    var buttons = function (on) { f.querySelectorAll("button[type=submit]").forEach(function (b) { b.disabled = !on; }); };
    f.addEventListener("submit", function (ev) {
      ev.preventDefault();
      ev.stopImmediatePropagation();
      buttons(false);
      say("Sending…");
      fetch(f.action, { method: "POST", body: new FormData(f), credentials: "same-origin",
                        headers: { "X-Requested-With": "fetch" } })
        .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
        .then(function (res) {
          say(res.body.message || res.body.detail || (res.ok ? "Done." : "Refused."), !res.ok);
          var target = document.querySelector(f.getAttribute("data-refresh") || "");
          if (!res.ok || !target || res.body.current) { buttons(true); return; }
          var url = target.getAttribute("data-refresh-url");
          var first = target.firstElementChild;
          var before = first ? first.getAttribute("data-newest") : null;
          var tries = 0;
          var poll = function () {
            tries += 1;
            fetch(url, { headers: { "X-Requested-With": "fetch" }, credentials: "same-origin" })
              .then(function (r) { return r.text(); })
              .then(function (html) {
                var box = document.createElement("div");
                box.innerHTML = html;
                var now = box.firstElementChild ? box.firstElementChild.getAttribute("data-newest") : null;
                if (now !== before) { target.innerHTML = html; say("Signed: the list below now shows it."); buttons(true); return; }
                if (tries >= 60) { say("Not signed yet: the housekeeper may be busy or stopped; it will appear here on a later visit.", true); buttons(true); return; }
                setTimeout(poll, 1000);
              })
              .catch(function () { if (tries < 60) { setTimeout(poll, 2000); } });
          };
          setTimeout(poll, 500);
        })
        .catch(function () { say("Could not reach the server; try again.", true); buttons(true); });
    });
  });
  // Forms marked data-once disable their submit buttons after the first submit (no double posts).
  document.querySelectorAll("form[data-once]").forEach(function (f) {
    f.addEventListener("submit", function () {
      f.querySelectorAll("button[type=submit]").forEach(function (b) { setTimeout(function () { b.disabled = true; }, 0); });
    });
  });
  // Drag-and-drop file inputs.
  document.querySelectorAll(".dropzone").forEach(function (zone) {
    var input = zone.querySelector("input[type=file]");
    var label = zone.querySelector(".dropzone-file");
    function show() { if (label && input.files.length) { label.textContent = input.files[0].name + " (" + Math.ceil(input.files[0].size / 1024) + " KiB)"; zone.classList.add("has-file"); } }
    input.addEventListener("change", show);
    ["dragenter", "dragover"].forEach(function (e) { zone.addEventListener(e, function (ev) { ev.preventDefault(); zone.classList.add("over"); }); });
    ["dragleave", "drop"].forEach(function (e) { zone.addEventListener(e, function (ev) { ev.preventDefault(); zone.classList.remove("over"); }); });
    zone.addEventListener("drop", function (ev) { input.files = ev.dataTransfer.files; show(); });
  });
  // Expandable rows: a [data-toggle-next] button shows or hides the next table row.
  document.querySelectorAll("[data-toggle-next]").forEach(function (b) {
    b.addEventListener("click", function () {
      var row = b.closest("tr").nextElementSibling;
      if (!row) { return; }
      row.hidden = !row.hidden;
      b.setAttribute("aria-expanded", String(!row.hidden));
      b.textContent = b.textContent.replace(/^[▸▾]/, row.hidden ? "▸" : "▾");
    });
  });
  // "all" / "none" for a group of checkboxes.
  document.querySelectorAll("[data-check-all],[data-check-none]").forEach(function (b) {
    var name = b.getAttribute("data-check-all") || b.getAttribute("data-check-none");
    var on = b.hasAttribute("data-check-all");
    b.addEventListener("click", function () {
      document.querySelectorAll("input[type=checkbox][name='" + name + "']").forEach(function (c) { c.checked = on; });
    });
  });
  // Audit form: show the settings of the chosen agent connector only.
  var connector = document.querySelector("select[name=connector]");
  if (connector) {
    var sync = function () {
      document.querySelectorAll(".connector-opts").forEach(function (el) {
        el.classList.toggle("shown", el.getAttribute("data-connector") === connector.value);
      });
    };
    connector.addEventListener("change", sync);
    sync();
  }
  // Review queue: j/k move, x select, a approve, r refute, ? help, Esc leaves a field.
  var list = document.getElementById("review-list");
  var help = document.getElementById("help");
  function items() { return Array.prototype.slice.call(document.querySelectorAll(".review-item")); }
  function current() { return document.querySelector(".review-item.current") || items()[0]; }
  function move(delta) {
    var all = items(), cur = current(), i = all.indexOf(cur);
    if (!all.length) { return; }
    var next = all[Math.max(0, Math.min(all.length - 1, i + delta))];
    if (cur) { cur.classList.remove("current"); }
    next.classList.add("current");
    next.scrollIntoView({ block: "nearest" });
  }
  function countSelected() {
    var n = document.querySelectorAll(".review-item input[type=checkbox]:checked").length;
    var el = document.getElementById("selected-count");
    if (el) { el.textContent = String(n); }
    items().forEach(function (it) { var c = it.querySelector("input[type=checkbox]"); it.classList.toggle("checked", !!(c && c.checked)); });
  }
  function decide(kind) {
    var cur = current();
    if (!cur) { return; }
    var form = cur.querySelector("form.decide");
    if (!form) { return; }
    var reason = form.querySelector("input[name=reason]");
    form.setAttribute("data-pending", kind);
    if (!reason.value.trim()) {
      reason.classList.add("need");
      reason.placeholder = "Reason to " + kind + " (required), then Enter";
      reason.focus();
      return;
    }
    form.querySelector("button[value=" + kind + "]").click();
  }
  if (list) {
    list.addEventListener("change", countSelected);
    list.addEventListener("click", function (ev) {
      var it = ev.target.closest(".review-item");
      if (it && it !== current()) { var cur = current(); if (cur) { cur.classList.remove("current"); } it.classList.add("current"); }
    });
    list.querySelectorAll("form.decide input[name=reason]").forEach(function (input) {
      input.addEventListener("keydown", function (ev) {
        var form = input.form;
        if (ev.key === "Enter") {
          ev.preventDefault();
          if (!input.value.trim()) { input.classList.add("need"); return; }
          form.querySelector("button[value=" + (form.getAttribute("data-pending") || "approve") + "]").click();
        } else if (ev.key === "Escape") { input.blur(); }
      });
      input.addEventListener("input", function () { input.classList.remove("need"); });
    });
    // An empty reason is refused by the server too; say so here without a round trip.
    list.querySelectorAll("form.decide").forEach(function (form) {
      form.addEventListener("submit", function (ev) {
        var reason = form.querySelector("input[name=reason]");
        if (!reason.value.trim()) { ev.preventDefault(); ev.stopImmediatePropagation(); reason.classList.add("need"); reason.focus(); }
      }, true);
    });
    countSelected();
  }
  function toggleHelp(open) { if (help) { help.classList.toggle("open", open === undefined ? !help.classList.contains("open") : open); } }
  if (help) {
    help.addEventListener("click", function (ev) { if (ev.target === help || ev.target.hasAttribute("data-close-help")) { toggleHelp(false); } });
  }
  document.addEventListener("keydown", function (ev) {
    var tag = (ev.target.tagName || "").toLowerCase();
    if (ev.key === "Escape") { toggleHelp(false); return; }
    if (tag === "input" || tag === "textarea" || tag === "select" || ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    if (ev.key === "?" && help) { ev.preventDefault(); toggleHelp(); return; }
    if (!list) { return; }
    if (ev.key === "j") { move(1); } else if (ev.key === "k") { move(-1); }
    else if (ev.key === "x") { var c = current() && current().querySelector("input[type=checkbox]"); if (c) { c.checked = !c.checked; countSelected(); } }
    else if (ev.key === "a") { ev.preventDefault(); decide("approve"); }
    else if (ev.key === "r") { ev.preventDefault(); decide("refute"); }
  });
})();
