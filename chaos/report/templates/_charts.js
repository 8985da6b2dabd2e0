(function () {
  "use strict";
  var holder = document.getElementById("chaos-figures");
  var figures = JSON.parse(holder.textContent || "{}");
  var config = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ["toImage", "sendDataToCloud"]};
  var drawn = [];
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
