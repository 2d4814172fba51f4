// Niceties only: every action works without this file (forms post to the server).
// Served from /ui/static so the Content-Security-Policy can forbid inline script.
(function () {
  "use strict";

  function ready(fn) {
    if (document.readyState !== "loading") fn();
    else document.addEventListener("DOMContentLoaded", fn);
  }

  ready(function () {
    // "Select all" for the review queue's bulk form.
    document.querySelectorAll("[data-select-all]").forEach(function (box) {
      var label = box.closest("label");
      if (label) label.hidden = false;
      var name = box.getAttribute("data-select-all");
      var form = box.form ? box.form.id : "";
      box.addEventListener("change", function () {
        document.querySelectorAll('input[type="checkbox"][name="' + name + '"][form="' + form + '"]').forEach(function (item) {
          item.checked = box.checked;
        });
      });
    });

    // Copy a new token's secret.
    document.querySelectorAll("[data-copy]").forEach(function (button) {
      var input = document.getElementById(button.getAttribute("data-copy"));
      if (!input) return;
      button.hidden = false;
      button.addEventListener("click", function () {
        input.select();
        if (navigator.clipboard) {
          navigator.clipboard.writeText(input.value).then(function () { button.textContent = "Copied"; });
        }
      });
    });

    // Ask before irreversible-looking actions.
    document.querySelectorAll("button[data-confirm]").forEach(function (button) {
      button.addEventListener("click", function (event) {
        if (!window.confirm(button.getAttribute("data-confirm"))) event.preventDefault();
      });
    });

    // A freshly created token: move focus to it so keyboard and screen-reader users find it.
    var created = document.getElementById("created-h");
    if (created) created.focus();
  });
})();
