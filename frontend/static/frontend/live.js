// Live pages without a reload: every 2 s, fetch this page again and swap in
// the [data-live] sections whose HTML changed; charts update in place with
// Plotly.react, so nothing flickers. "Last updated" says when it last worked.
(function () {
  "use strict";
  const PERIOD_MS = 2000;

  function drawCharts(root) {
    if (!window.Plotly) return;
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      const figure = JSON.parse(el.getAttribute("data-figure"));
      window.Plotly.react(el, figure.data, figure.layout, {
        displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"],
      });
    });
  }

  function stamp(ok) {
    const el = document.getElementById("last-updated");
    if (!el) return;
    const now = new Date();
    el.textContent = ok ? "updated " + now.toLocaleTimeString() : "update failed; retrying";
    el.setAttribute("datetime", now.toISOString());
    el.classList.toggle("stale", !ok);
  }

  async function refresh() {
    try {
      const response = await fetch(window.location.href, {
        headers: { "X-Berth-Live": "1" }, credentials: "same-origin", cache: "no-store",
      });
      if (!response.ok) { stamp(false); return; }
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      document.querySelectorAll("[data-live]").forEach(function (old) {
        const next = fresh.getElementById(old.id);
        if (next && next.innerHTML !== old.innerHTML) {
          const open = Array.from(old.querySelectorAll("details[open]")).map((d) => d.id);
          old.innerHTML = next.innerHTML;
          open.forEach(function (id) { const d = id && document.getElementById(id); if (d) d.open = true; });
          drawCharts(old);
        }
      });
      stamp(true);
    } catch (error) {
      stamp(false);
    }
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawCharts(document);
    stamp(true);
    if (document.body.hasAttribute("data-live-page")) {
      window.setInterval(function () { if (!document.hidden) refresh(); }, PERIOD_MS);
    }
  });
})();
