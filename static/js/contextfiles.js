/* Context files: keep the ledger usable from the keyboard. Every page works without this file. */
(function () {
  "use strict";
  // After an inline edit form opens, put the cursor in its first field; Escape cancels.
  document.addEventListener("htmx:load", function (event) {
    var row = event.detail.elt;
    if (!row || !row.classList || !row.classList.contains("cf-editing")) return;
    var first = row.querySelector("select, input:not([type=hidden]), textarea");
    if (first) first.focus();
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var row = event.target.closest && event.target.closest(".cf-editing");
    if (!row) return;
    var cancel = row.querySelector("a[hx-get]");
    if (cancel) cancel.click();
  });
})();
