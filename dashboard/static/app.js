// Switchboard dashboard: a few enhancements over pages that work without
// it. It refreshes the parts of a page marked data-refresh="URL" (a
// campaign's progress, a webhook's delivery log) while they hold an element
// marked data-live; shows times (<time datetime>) in the browser's own
// zone, where the server writes UTC; and shows the copy buttons of secrets
// shown once.
(function () {
  "use strict";
  var every = 1500;
  var fmt = null;
  try {
    fmt = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric",
      hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
  } catch (e) { /* an old browser: times stay in UTC */ }

  function localTimes(root) {
    if (!fmt) return;
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      if (t.hasAttribute("data-utc")) return;
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) return;
      t.setAttribute("data-utc", t.textContent);
      t.title = t.textContent;
      t.textContent = fmt.format(d);
    });
  }

  function refresh(el) {
    if (!el.querySelector("[data-live]")) return;
    setTimeout(function () {
      fetch(el.getAttribute("data-refresh"), { credentials: "same-origin", headers: { Accept: "text/html" } })
        .then(function (res) {
          if (res.status === 401) return null; // signed out: stop
          if (!res.ok) throw new Error(res.status);
          return res.text();
        })
        .then(function (html) {
          if (html === null) return;
          // Keep the request and response bodies a reader opened.
          var open = {};
          el.querySelectorAll("details[open]").forEach(function (d, i) { open[detailsKey(d, i)] = true; });
          el.innerHTML = html;
          el.querySelectorAll("details").forEach(function (d, i) { if (open[detailsKey(d, i)]) d.open = true; });
          localTimes(el);
          refresh(el);
        })
        .catch(function () { refresh(el); });
    }, every);
  }

  function detailsKey(d, i) {
    var a = d.closest("[id]");
    return (a ? a.id : "") + "/" + d.className + "/" + i;
  }

  function copyButtons() {
    document.querySelectorAll("button[data-copy]").forEach(function (b) {
      var input = document.getElementById(b.getAttribute("data-copy"));
      if (!input) return;
      b.hidden = false;
      b.addEventListener("click", function () {
        var done = function () { b.textContent = "Copied"; setTimeout(function () { b.textContent = "Copy"; }, 2000); };
        if (navigator.clipboard && navigator.clipboard.writeText) {
          navigator.clipboard.writeText(input.value).then(done, function () { input.select(); });
        } else {
          input.select();
          try { if (document.execCommand("copy")) done(); } catch (e) { /* the text stays selected */ }
        }
      });
    });
  }

  localTimes(document);
  copyButtons();
  document.querySelectorAll("[data-refresh]").forEach(refresh);
})();
