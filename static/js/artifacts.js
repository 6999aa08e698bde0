/* Artifacts: copy buttons (shown only when the clipboard is available). */
(function () {
  "use strict";
  function wire(root) {
    if (!navigator.clipboard) return;
    (root || document).querySelectorAll("[data-copy]").forEach(function (button) {
      button.hidden = false;
      if (button.dataset.wired) return;
      button.dataset.wired = "1";
      button.addEventListener("click", function () {
        var source = document.querySelector(button.dataset.copy);
        if (!source) return;
        navigator.clipboard.writeText(source.textContent.trim()).then(function () {
          var label = button.textContent;
          button.textContent = "Copied";
          setTimeout(function () { button.textContent = label; }, 1500);
        });
      });
    });
  }
  document.addEventListener("DOMContentLoaded", function () { wire(document); });
  document.addEventListener("htmx:afterSettle", function (event) { wire(event.target); });
})();
