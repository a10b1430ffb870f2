// Plotly.js's core (scatter, hover, colour bars, the toolbar) and the heatmap trace:
// all the explorer's pages draw (explorer/render/chart/).
var Plotly = require('plotly.js/lib/core');
Plotly.register([require('plotly.js/lib/heatmap')]);
module.exports = Plotly;
