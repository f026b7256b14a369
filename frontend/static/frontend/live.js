// Live pages without a reload: every 2 s, fetch this page again and swap in
// the [data-live] sections whose HTML changed; charts update in place with
// Plotly.react, so nothing flickers. "Last updated" says when it last worked.
//
// Times: the server writes them relative ("5 min ago") in <time datetime=…>
// and charts in UTC; here they become the viewer's own zone — the hover title
// of every <time>, and the date axes of every chart.
(function () {
  "use strict";
  const PERIOD_MS = 2000;
  const LOCAL = new Intl.DateTimeFormat(undefined, {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  });
  const CLOCK = new Intl.DateTimeFormat(undefined, {
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23",
  });

  function localTitles(root) {
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      if (el.id === "last-updated") return;
      const at = new Date(el.getAttribute("datetime"));
      if (!isNaN(at.getTime())) el.title = LOCAL.format(at);
    });
  }

  function pad(n, width) { return String(n).padStart(width || 2, "0"); }

  // An ISO time in UTC ("…Z") as plotly's zone-less form in the viewer's zone.
  function toLocal(value) {
    if (typeof value !== "string" || !/^\d{4}-\d\d-\d\dT.*Z$/.test(value)) return value;
    const at = new Date(value);
    if (isNaN(at.getTime())) return value;
    return at.getFullYear() + "-" + pad(at.getMonth() + 1) + "-" + pad(at.getDate()) + " " +
      pad(at.getHours()) + ":" + pad(at.getMinutes()) + ":" + pad(at.getSeconds()) + "." +
      pad(at.getMilliseconds(), 3);
  }

  function localTimes(figure) {
    const layout = figure.layout || {};
    const dateAxes = Object.keys(layout).filter(function (key) {
      return /^xaxis\d*$/.test(key) && layout[key] && layout[key].type === "date";
    });
    if (!dateAxes.length) return figure;
    dateAxes.forEach(function (key) {
      const axis = layout[key];
      if (axis.range) axis.range = axis.range.map(toLocal);
      if (axis.title && axis.title.text) axis.title.text = axis.title.text.replace("(UTC)", "(your time)");
      if (axis.hoverformat) axis.hoverformat = axis.hoverformat.replace(" UTC", "");
    });
    (figure.data || []).forEach(function (trace) {
      const axisKey = "xaxis" + (trace.xaxis ? trace.xaxis.slice(1) : "");
      if (dateAxes.indexOf(axisKey) < 0) return;
      if (Array.isArray(trace.x) && trace.orientation !== "h") trace.x = trace.x.map(toLocal);
      if (Array.isArray(trace.base)) trace.base = trace.base.map(toLocal);
      if (Array.isArray(trace.x) && trace.orientation === "h" && !trace.base) trace.x = trace.x.map(toLocal);
    });
    return figure;
  }

  function drawCharts(root) {
    localTitles(root);
    if (!window.Plotly) return;
    root.querySelectorAll("[data-figure]").forEach(function (el) {
      const figure = localTimes(JSON.parse(el.getAttribute("data-figure")));
      window.Plotly.react(el, figure.data, figure.layout, {
        displaylogo: false, responsive: true, modeBarButtonsToRemove: ["sendDataToCloud"],
      });
    });
  }

  function stamp(ok) {
    const el = document.getElementById("last-updated");
    if (!el) return;
    const now = new Date();
    el.textContent = ok ? "updated " + CLOCK.format(now) : "update failed; retrying";
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
