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
      var config = Object.assign({ responsive: true, displaylogo: false,
        toImageButtonOptions: { format: "png", filename: el.dataset.figure } }, fig.config || {});
      window.Plotly.react(el, fig.data || [], fig.layout || {}, config).then(function () {
        el.dispatchEvent(new CustomEvent("figure:drawn", { bubbles: true }));
      });
    });
  }
  window.cgDrawFigures = drawFigures;

  document.addEventListener("DOMContentLoaded", function () { drawFigures(document); });
  document.addEventListener("htmx:afterSettle", function (event) { drawFigures(event.target); });
})();
