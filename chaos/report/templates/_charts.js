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
  Object.keys(figures).forEach(function (id) {
    var el = document.getElementById(id);
    if (!el) { return; }
    drawn.push(Plotly.newPlot(el, figures[id].data, figures[id].layout, config).then(function () { return el; }));
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
