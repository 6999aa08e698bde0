/* Specifications pages: remove editor rows in place, suggest item keys from their text, and keep
   the approve button disabled until every resolved question is acknowledged. The server checks
   everything again; without this file the same buttons post the form instead. */
(function () {
  "use strict";

  // Remove an item, alternative, verification or discrepancy row without reloading.
  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-remove-row]");
    if (!button) return;
    var row = button.closest("[data-row]");
    if (!row) return;
    event.preventDefault();
    var next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    var focusable = next && next.querySelector("textarea, input, select");
    if (focusable) focusable.focus();
  });

  // Suggest a key while the text is typed, unless the key was written by hand.
  var timers = new WeakMap();
  function suggest(keyInput, text) {
    var form = keyInput.closest("[data-suggest-url]");
    if (!form) return;
    var taken = Array.prototype.map.call(form.querySelectorAll("[data-key]"), function (input) {
      return input === keyInput ? "" : input.value.trim();
    }).filter(Boolean);
    var url = form.dataset.suggestUrl + "?text=" + encodeURIComponent(text) + "&taken=" + encodeURIComponent(taken.join(","));
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (data) {
        if (!data || !(keyInput.value === "" || keyInput.dataset.suggested === "1")) return;
        keyInput.value = text.trim() ? data.key : "";
        keyInput.dataset.suggested = "1";
      });
  }
  document.addEventListener("input", function (event) {
    var target = event.target;
    if (target.matches("[data-key]")) {
      target.dataset.suggested = target.value === "" ? "1" : "";
      return;
    }
    if (!target.matches("[data-key-source]")) return;
    var keyInput = target.closest("[data-item]").querySelector("[data-key]");
    if (!keyInput || !(keyInput.value === "" || keyInput.dataset.suggested === "1")) return;
    clearTimeout(timers.get(keyInput));
    timers.set(keyInput, setTimeout(function () { suggest(keyInput, target.value); }, 250));
  });

  // A new open question starts unresolved.
  document.addEventListener("change", function (event) {
    if (!event.target.matches("[data-kind]") || event.target.value !== "open_question") return;
    var status = event.target.closest("[data-item]").querySelector('select[name$="-status"]');
    if (status) status.value = "unresolved";
  });

  // After htmx adds a row, put the cursor in it.
  // (after settling, and a tick later: htmx restores focus to the swapped-in button first)
  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    if (!target || !target.id || target.matches("button")) return;
    var rows = target.querySelectorAll(":scope > [data-row]");
    var last = rows[rows.length - 1];
    var field = last && (last.querySelector("[data-key-source]") || last.querySelector("textarea, input[type=text]"));
    if (field) setTimeout(function () { field.focus(); }, 0);
  });

  // Approve stays disabled until every resolved open question is acknowledged.
  function gate(form) {
    var boxes = document.querySelectorAll('input[data-ack][form="' + form.id + '"]');
    var button = form.querySelector("[data-approve]");
    var hint = form.querySelector("[data-ack-hint]");
    if (!button || !boxes.length) return;
    var ticked = Array.prototype.filter.call(boxes, function (box) { return box.checked; }).length;
    button.disabled = ticked < boxes.length;
    if (hint) {
      hint.textContent = ticked < boxes.length
        ? "Acknowledged " + ticked + " of " + boxes.length + " items; acknowledge all to approve."
        : "All resolved questions acknowledged.";
    }
  }
  function gateAll() { document.querySelectorAll("form[data-ack-gate]").forEach(gate); }
  document.addEventListener("change", function (event) {
    if (!event.target.matches("input[data-ack]")) return;
    var form = document.getElementById(event.target.getAttribute("form"));
    if (form) gate(form);
  });
  document.addEventListener("DOMContentLoaded", gateAll);

  // A verification usually ran against the handoff commit: offer it when the field is empty.
  document.addEventListener("focusin", function (event) {
    var input = event.target;
    if (!input.matches("[data-commit-default]") || input.value) return;
    var head = document.getElementById("id_commit");
    if (head && head.value) input.value = head.value.trim();
  });
})();
