/* Drag and drop onto the upload form's file input. The plain input works without this. */
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-dropzone]").forEach(function (zone) {
      var input = zone.querySelector("input[type=file]");
      var list = zone.querySelector(".chosen-files");
      function show() {
        list.innerHTML = "";
        Array.prototype.forEach.call(input.files, function (file) {
          var item = document.createElement("li");
          item.textContent = file.name + " (" + Math.max(1, Math.round(file.size / 1024)) + " KB)";
          list.appendChild(item);
        });
      }
      input.addEventListener("change", show);
      ["dragenter", "dragover"].forEach(function (name) {
        zone.addEventListener(name, function (event) { event.preventDefault(); zone.classList.add("dragging"); });
      });
      ["dragleave", "drop"].forEach(function (name) {
        zone.addEventListener(name, function () { zone.classList.remove("dragging"); });
      });
      zone.addEventListener("drop", function (event) {
        event.preventDefault();
        var merged = new DataTransfer();
        Array.prototype.forEach.call(input.files, function (f) { merged.items.add(f); });
        Array.prototype.forEach.call(event.dataTransfer.files, function (f) { merged.items.add(f); });
        input.files = merged.files;
        show();
      });
    });
  });
})();
