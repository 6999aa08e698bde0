/* Small progressive enhancements. Every page works without this file. */
(function () {
  "use strict";

  // plotly.js sets a few SVG styles with setAttribute("style", …) (tick-label superscripts,
  // heatmap pixels), which the Content-Security-Policy blocks as inline style. The same
  // declarations set through CSSOM are allowed, so scripts' SVG style attributes go there;
  // a style="…" in markup stays blocked.
  var setAttribute = Element.prototype.setAttribute;
  SVGElement.prototype.setAttribute = function (name, value) {
    if (String(name).toLowerCase() === "style") {
      this.style.cssText = String(value);
      return;
    }
    setAttribute.call(this, name, value);
  };

  // Draw each <div data-figure="ID"> from the JSON in <script id="ID" type="application/json">.
  function drawFigures(root) {
    if (typeof window.Plotly === "undefined") return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) return;
      var fig = JSON.parse(source.textContent);
      // The box takes the figure's own height: with `responsive`, Plotly redraws to fit its
      // box on every resize, so a box shorter than the figure would cut the drawing off, and
      // one taller (the CSS minimum) would stretch it.
      var height = (fig.layout || {}).height;
      if (height) {
        el.style.height = height + "px";
        el.style.minHeight = "0";
      }
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

  // htmx does not swap 4xx/5xx answers, so without this a failed request looks like nothing
  // happened. Show the server's own message (an element marked data-error-message, else the
  // page's heading and first paragraph, or a form's errors), or a plain one for the status.
  var STATUS_MESSAGES = {
    0: "The server could not be reached. Check your connection and try again.",
    400: "Some of what you entered is not valid. Check it and try again.",
    401: "You are signed out. Reload the page to sign in again.",
    403: "You are not allowed to do this.",
    404: "This no longer exists, or it belongs to a workspace you are not a member of.",
    413: "That is too large to send.",
    429: "Too many requests. Wait a moment and try again."
  };

  function messageFrom(xhr) {
    var text = "";
    var type = (xhr && xhr.getResponseHeader && xhr.getResponseHeader("Content-Type")) || "";
    if (xhr && xhr.responseText && type.indexOf("text/html") === 0) {
      var doc = new DOMParser().parseFromString(xhr.responseText, "text/html");
      var marked = doc.querySelector("[data-error-message]") || doc.querySelector(".form-errors, .errorlist");
      var heading = doc.querySelector("main h1, h1");
      var detail = heading && heading.nextElementSibling;
      if (marked) text = marked.textContent;
      else if (heading) text = heading.textContent + (detail ? ": " + detail.textContent : "");
    }
    text = text.replace(/\s+/g, " ").trim();
    if (text) return text;
    var status = xhr ? xhr.status : 0;
    return STATUS_MESSAGES[status] ||
      "Something went wrong (HTTP " + status + "). Try again; if it persists tell your workspace admin.";
  }

  function showRequestError(text) {
    var box = document.getElementById("request-error");
    if (!box) return;
    box.querySelector(".request-error-text").textContent = text;
    box.hidden = false;
  }

  document.addEventListener("htmx:responseError", function (event) {
    showRequestError(messageFrom(event.detail.xhr));
  });
  document.addEventListener("htmx:sendError", function () {
    showRequestError(STATUS_MESSAGES[0]);
  });
  document.addEventListener("click", function (event) {
    if (!event.target.closest("[data-dismiss-request-error]")) return;
    document.getElementById("request-error").hidden = true;
  });

  // <form data-confirm="Question?"> asks before it is sent (an inline onsubmit would be
  // blocked by the Content-Security-Policy). Without JavaScript the form is sent as it is.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (form.matches && form.matches("form[data-confirm]") && !window.confirm(form.dataset.confirm)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // A polling notice marked data-reload-when-done reloads the whole page once the server's
  // answer no longer holds it: the work is done, and the page's figures need a full load.
  document.addEventListener("htmx:beforeSwap", function (event) {
    var source = event.detail.requestConfig && event.detail.requestConfig.elt;
    if (!source || !source.hasAttribute || !source.hasAttribute("data-reload-when-done")) return;
    if (!event.detail.xhr || event.detail.xhr.status !== 200) return;
    var answer = new DOMParser().parseFromString(event.detail.serverResponse, "text/html");
    if (answer.querySelector("[data-reload-when-done]")) return;
    event.detail.shouldSwap = false;
    window.location.reload();
  });

  // Proportions from data-flex="N" (a style="flex: N" would be blocked by the
  // Content-Security-Policy); without JavaScript the parts share the width equally.
  function applyFlex(root) {
    (root || document).querySelectorAll("[data-flex]").forEach(function (el) {
      el.style.flex = el.dataset.flex;
    });
  }
  document.addEventListener("DOMContentLoaded", function () { applyFlex(document); });
  document.addEventListener("htmx:afterSettle", function (event) { applyFlex(event.target); });
})();
