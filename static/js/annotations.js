/* Trace viewer: keyboard (j/k/d/e), the context strip synchronised with the step list, and
   marking from the current step. Without this file every link and form still works. */
(function () {
  "use strict";

  var current = null; // call index of the current step
  var pending = null; // what to select once a newly loaded window has settled

  function root() { return document.querySelector("[data-viewer]"); }
  function region() { return document.getElementById("steps"); }
  function stepEls() { return Array.prototype.slice.call(document.querySelectorAll("#steps li.step")); }
  function stepFor(call) { return document.getElementById("step-" + call); }

  function announce(text) {
    var status = document.getElementById("step-status");
    if (status) status.textContent = text;
  }

  function strip() {
    var el = document.getElementById("strip");
    return el && el.layout && window.Plotly ? el : null;
  }

  function setShape(name, shape) {
    var el = strip();
    if (!el) return;
    var shapes = (el.layout.shapes || []).filter(function (s) { return s.name !== name; });
    if (shape) { shape.name = name; shapes.push(shape); }
    window.Plotly.relayout(el, { shapes: shapes });
  }

  function highlight(call) {
    setShape("current", call === null ? null : {
      type: "line", xref: "x", yref: "paper", x0: call, x1: call, y0: 0, y1: 1,
      line: { color: "#c2410c", width: 2 }
    });
  }

  function shadeWindow() {
    var r = region();
    if (!r || r.dataset.firstCall === undefined) return;
    setShape("window", {
      type: "rect", xref: "x", yref: "paper", layer: "below",
      x0: Number(r.dataset.firstCall) - 0.5, x1: Number(r.dataset.lastCall) + 0.5, y0: 0, y1: 1,
      fillcolor: "rgba(31,95,191,0.08)", line: { width: 0 }
    });
  }

  function setCurrent(el, options) {
    options = options || {};
    stepEls().forEach(function (s) {
      s.classList.remove("is-current");
      s.removeAttribute("aria-current");
    });
    el.classList.add("is-current");
    el.setAttribute("aria-current", "step");
    current = Number(el.dataset.call);
    if (options.scroll !== false) el.scrollIntoView({ block: "start", behavior: options.smooth ? "smooth" : "auto" });
    if (options.focus !== false) el.focus({ preventScroll: true });
    var heading = el.querySelector("h3");
    announce((heading ? heading.textContent.replace(/\s+/g, " ").trim() : "Call " + current) + " selected");
    highlight(current);
    follow(current);
    if (window.history && window.history.replaceState) {
      // A reload (or a shared link) opens the window holding this step, with the step selected.
      var params = new URLSearchParams(window.location.search);
      params.delete("page");
      params.set("at", String(current));
      window.history.replaceState(window.history.state, "", window.location.pathname + "?" + params.toString() + "#step-" + current);
    }
  }

  function load(url) {
    return window.htmx.ajax("GET", url, { target: "#steps", swap: "outerHTML" });
  }

  function withQuery(params) {
    var r = root();
    var query = r ? r.dataset.query : "";
    return r.dataset.stepsUrl + "?" + params + (query ? "&" + query : "");
  }

  function goToCall(call) {
    var el = stepFor(call);
    if (el) { setCurrent(el, { smooth: true }); return; }
    pending = { call: call };
    load(withQuery("at=" + encodeURIComponent(call)));
  }

  function resolvePending() {
    if (!pending) return;
    var steps = stepEls();
    var el = null;
    if (pending.call !== undefined) el = stepFor(pending.call) || steps[0];
    else el = pending.edge === "last" ? steps[steps.length - 1] : steps[0];
    pending = null;
    if (el) setCurrent(el);
  }

  function move(delta) {
    var steps = stepEls();
    if (!steps.length) return;
    var index = steps.findIndex(function (s) { return Number(s.dataset.call) === current; });
    if (index === -1) { setCurrent(steps[delta > 0 ? 0 : steps.length - 1]); return; }
    var next = index + delta;
    if (next >= 0 && next < steps.length) { setCurrent(steps[next]); return; }
    var link = region().querySelector(delta > 0 ? "a[data-nav=next]" : "a[data-nav=prev]");
    if (!link) { announce(delta > 0 ? "Last step" : "First step"); return; }
    pending = { edge: delta > 0 ? "first" : "last" };
    load(link.getAttribute("hx-get"));
  }

  function markForm() { return document.getElementById("mark-form"); }

  // The form's step follows the step you are looking at (selected, or else the first one
  // scrolled into view) until its value is chosen: typed, kept from your mark, or sent back
  // with errors (data-pinned).
  function follow(call) {
    var form = markForm();
    var input = form && form.querySelector("[data-mark-call]");
    if (input && !input.hasAttribute("data-pinned")) input.value = call;
  }

  function topStep() {
    var wrap = document.getElementById("strip-wrap");
    var edge = wrap ? wrap.getBoundingClientRect().bottom : 0;
    var steps = stepEls();
    for (var i = 0; i < steps.length; i++) {
      // A step showing no more than a sliver below the strip is not the one being read.
      if (steps[i].getBoundingClientRect().bottom > edge + 48) return steps[i];
    }
    return null;
  }

  var scrollQueued = false;
  window.addEventListener("scroll", function () {
    if (!root() || current !== null || scrollQueued) return;
    scrollQueued = true;
    window.requestAnimationFrame(function () {
      scrollQueued = false;
      var el = current === null ? topStep() : null;
      if (el) follow(Number(el.dataset.call));
    });
  }, { passive: true });

  document.addEventListener("input", function (event) {
    if (event.target.matches && event.target.matches("[data-mark-call]")) event.target.setAttribute("data-pinned", "");
  });

  function openMark(call) {
    var form = markForm();
    if (!form) return false;
    var input = form.querySelector("[data-mark-call]");
    input.value = call;
    var panel = document.getElementById("mark-panel");
    if (panel) panel.scrollIntoView({ block: "start", behavior: "smooth" });
    var radio = form.querySelector("input[name=failure_class]:checked") || form.querySelector("input[name=failure_class]");
    (radio || input).focus({ preventScroll: true });
    announce("Marking call " + call + ": choose what went wrong, your confidence, then save.");
    return true;
  }

  function toggleEvidence(call) {
    var form = markForm();
    if (!form) return;
    var input = form.querySelector("[data-mark-evidence]");
    var values = input.value.split(/[\s,;]+/).filter(Boolean).map(function (v) { return v.replace(/^#/, ""); });
    var key = String(call);
    var at = values.indexOf(key);
    if (at === -1) values.push(key); else values.splice(at, 1);
    values.sort(function (a, b) { return Number(a) - Number(b); });
    input.value = values.join(", ");
    announce(at === -1 ? "Call " + call + " added as evidence" : "Call " + call + " removed from the evidence");
  }

  function typing(target) {
    if (!target) return false;
    var tag = target.tagName;
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || target.isContentEditable;
  }

  document.addEventListener("keydown", function (event) {
    if (!root() || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "Escape" && typing(event.target) && current !== null) {
      var back = stepFor(current);
      if (back) { back.focus(); return; }
    }
    if (typing(event.target)) return;
    if (event.key === "j") { event.preventDefault(); move(1); }
    else if (event.key === "k") { event.preventDefault(); move(-1); }
    else if (event.key === "d") {
      if (current === null) { var first = stepEls()[0]; if (first) setCurrent(first, { scroll: false }); }
      if (current !== null && openMark(current)) event.preventDefault();
    } else if (event.key === "e" && current !== null) { event.preventDefault(); toggleEvidence(current); }
  });

  document.addEventListener("click", function (event) {
    if (!root()) return;
    var mark = event.target.closest("a[data-mark]");
    if (mark && markForm()) {
      event.preventDefault();
      var step = mark.closest("li.step");
      if (step) setCurrent(step, { scroll: false });
      openMark(Number(mark.dataset.mark));
      return;
    }
    var step = event.target.closest("li.step");
    if (step && !event.target.closest("a, button, summary, input")) setCurrent(step, { scroll: false, focus: false });
  });

  document.addEventListener("figure:drawn", function (event) {
    var el = event.target;
    if (el.id !== "strip" || el.dataset.bound) return;
    el.dataset.bound = "1";
    el.on("plotly_click", function (data) {
      if (!data.points || !data.points.length) return;
      goToCall(Math.round(data.points[0].x));
    });
    shadeWindow();
    if (current !== null) highlight(current);
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (!root() || !region()) return;
    shadeWindow();
    if (pending) { resolvePending(); return; }
    var again = current !== null ? stepFor(current) : null;
    if (again) again.classList.add("is-current");
  });

  document.addEventListener("DOMContentLoaded", function () {
    if (!root()) return;
    var errors = document.getElementById("mark-errors");
    if (errors) {
      // A refused mark: back at the step it was for, with its problems read out first.
      var input = document.querySelector("[data-mark-call]");
      var marked = input ? stepFor(input.value) : null;
      if (marked) setCurrent(marked, { focus: false });
      var settle = function () {
        // After the browser has moved to the URL's fragment (which would take the focus).
        errors.focus({ preventScroll: true });
        errors.scrollIntoView({ block: "nearest" });
      };
      if (document.readyState === "complete") settle();
      else window.addEventListener("load", function () { window.requestAnimationFrame(settle); });
      return;
    }
    var match = /^#step-(\d+)$/.exec(window.location.hash);
    var el = match ? stepFor(match[1]) : null;
    if (el) setCurrent(el);
  });
})();
