// Small progressive enhancements; every page works without them.
(function () {
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
    function show() { if (label && input.files.length) { label.textContent = input.files[0].name + " (" + Math.ceil(input.files[0].size / 1024) + " KiB)"; } }
    input.addEventListener("change", show);
    ["dragenter", "dragover"].forEach(function (e) { zone.addEventListener(e, function (ev) { ev.preventDefault(); zone.classList.add("over"); }); });
    ["dragleave", "drop"].forEach(function (e) { zone.addEventListener(e, function (ev) { ev.preventDefault(); zone.classList.remove("over"); }); });
    zone.addEventListener("drop", function (ev) { input.files = ev.dataTransfer.files; show(); });
  });
})();
