// Times arrive as <time datetime="...Z" title="... UTC">; show them in the viewer's time zone,
// keeping UTC in the title (shown on hover). Runs on load and after every htmx swap.
(function () {
  function localise(root) {
    root.querySelectorAll("time[datetime]").forEach(function (node) {
      var when = new Date(node.getAttribute("datetime"));
      if (!isNaN(when)) {
        node.textContent = when.toLocaleString(undefined, {
          year: "numeric", month: "2-digit", day: "2-digit",
          hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short",
        });
      }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { localise(document); });
  document.addEventListener("htmx:afterSwap", function (event) { localise(event.target); });
})();
