// Switchboard dashboard: refreshes the parts of a page marked
// data-refresh="URL" (a campaign's progress, a webhook's delivery log) while
// they hold an element marked data-live. The pages work without it.
(function () {
  "use strict";
  var every = 1500;
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
          el.innerHTML = html;
          refresh(el);
        })
        .catch(function () { refresh(el); });
    }, every);
  }
  document.querySelectorAll("[data-refresh]").forEach(refresh);
})();
