/* Small progressive enhancements. Every page works without this file. */
(function () {
  "use strict";

  // Draw each <div data-figure="ID"> from the JSON in <script id="ID" type="application/json">.
  function drawFigures(root) {
    if (typeof window.Plotly === "undefined") return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) return;
      var fig = JSON.parse(source.textContent);
      var svgButton = {
        name: "Download plot as SVG",
        icon: window.Plotly.Icons.disk,
        click: function (gd) { window.Plotly.downloadImage(gd, { format: "svg", filename: el.id || "chart" }); }
      };
      // No "share to Plotly Cloud": the app is offline-first and traces must not leave it.
      var config = Object.assign({ responsive: true, displaylogo: false, modeBarButtonsToAdd: [svgButton],
        modeBarButtonsToRemove: ["sendChartToCloud", "sendDataToCloud"],
        toImageButtonOptions: { format: "png", filename: el.id || "chart" } }, fig.config || {});
      window.Plotly.react(el, fig.data || [], fig.layout || {}, config).then(function () {
        el.dispatchEvent(new CustomEvent("figure:drawn", { bubbles: true }));
      });
    });
  }
  window.cgDrawFigures = drawFigures;

  document.addEventListener("DOMContentLoaded", function () { drawFigures(document); });
  document.addEventListener("htmx:afterSettle", function (event) { drawFigures(event.target); });
})();
