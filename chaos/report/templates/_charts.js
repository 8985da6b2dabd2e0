(function () {
  "use strict";
  var holder = document.getElementById("chaos-figures");
  var figures = JSON.parse(holder.textContent || "{}");
  var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ["toImage", "sendDataToCloud"]};
  var drawn = [];
  if (typeof Plotly === "undefined" && Object.keys(figures).length > 0) {
    // the tree's assets/ copy is missing (a page copied alone): say so on the page, not only in the console
    var notice = document.getElementById("charts-missing");
    if (notice) { notice.hidden = false; }
    document.body.setAttribute("data-charts-error", "plotly.js did not load");
    document.body.setAttribute("data-charts-rendered", "0");
    console.error("chaos report: plotly.js did not load; the charts are not drawn");
    return;
  }
  // The window lane's labels are packed into rows for a ~1000 px plot; on a narrower one, a label that would
  // touch an earlier one in its row is hidden (its window still names itself on hover).
  function unclutter(el) {
    var kept = [];
    el.querySelectorAll("g.annotation").forEach(function (note) {
      note.style.display = "";
      var box = note.getBoundingClientRect();
      var clash = kept.some(function (k) {
        return box.left < k.right && k.left < box.right && box.top < k.bottom && k.top < box.bottom;
      });
      if (clash) { note.style.display = "none"; } else { kept.push(box); }
    });
  }
  Object.keys(figures).forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    drawn.push(Plotly.newPlot(el, figures[id].data, figures[id].layout, config).then(function () {
      unclutter(el);
      el.on("plotly_afterplot", function () { unclutter(el); });
      return el;
    }));
  });
  Promise.all(drawn).then(function (els) {
    document.body.setAttribute("data-charts-rendered", String(els.length));
  });
  function resizeAll() {
    Object.keys(figures).forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { Plotly.Plots.resize(el); }
    });
  }
  window.addEventListener("beforeprint", resizeAll);
  window.addEventListener("afterprint", resizeAll);
})();
