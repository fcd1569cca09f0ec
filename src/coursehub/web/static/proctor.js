// The proctor's table: reload it every 30 s to show the current time left, saves and
// submissions, unless a proctor is typing in one of its forms (nothing typed is lost).
(function () {
  "use strict";
  var table = document.getElementById("sittings");
  if (!table) { return; }
  var seconds = Number(table.dataset.refreshS || "30");
  function typing() {
    var active = document.activeElement;
    if (active && active.form) { return true; }
    var fields = document.querySelectorAll("form input[type='text'], form input[type='number']");
    // a form that shows saved values (data-shows-saved: the exam clock's) holds the page only
    // once one of them is changed
    return Array.prototype.some.call(fields, function (f) {
      var saved = f.form && f.form.hasAttribute("data-shows-saved") ? f.defaultValue : "";
      return f.value !== saved;
    });
  }
  window.setInterval(function () {
    if (!typing()) { window.location.reload(); }
  }, seconds * 1000);
})();
