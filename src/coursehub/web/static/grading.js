// The course's assignments page: while an autograde runs, poll its progress
// (graded / total, time left, failures) and reload the page once it is over.
(function () {
  "use strict";
  var boxes = document.querySelectorAll(".autograde-progress[data-running='yes']");
  boxes.forEach(function (box) {
    var timer = window.setInterval(function () {
      fetch(box.dataset.url, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.json() : null; })
        .then(function (p) {
          if (!p) { return; }
          if (!p.is_running) { window.clearInterval(timer); window.location.reload(); return; }
          var left = p.estimated_s_left === null ? "estimating the time left"
            : "about " + Math.ceil(p.estimated_s_left) + " s left";
          var text = "Autograde " + p.state + ": " + p.graded + " / " + p.total + " graded, " + left + ".";
          var failures = p.failures.map(function (f) {
            return f.student_id + ": " + f.status + ": " + f.message;
          });
          box.textContent = "";
          var line = document.createElement("p");
          line.textContent = text;
          box.appendChild(line);
          if (failures.length) {
            var list = document.createElement("ul");
            failures.forEach(function (f) {
              var item = document.createElement("li");
              item.textContent = f;
              list.appendChild(item);
            });
            box.appendChild(list);
          }
        })
        .catch(function () { /* keep the last state shown */ });
    }, 2000);
  });
})();
