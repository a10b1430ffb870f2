#!/bin/sh
# `make plotly-bundle`: builds static/plotly/plotly-heatmap.min.js, Plotly.js's core
# and its heatmap trace (entry.js), from the npm packages pinned in package-lock.json,
# as plotly.js's own bundles are built (esbuild, an IIFE that sets window.Plotly,
# target es2016), and records its version, bytes and sha256 in plotly-heatmap.json.
# The same lock gives the same file: the sha256 recorded must not change on a rebuild.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "$here/../../static/plotly" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$here/package.json" "$here/package-lock.json" "$here/entry.js" "$work/"
cd "$work"
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
version=$(node -p "require('plotly.js/package.json').version")
npx --no-install esbuild entry.js --bundle --minify --format=iife --global-name=Plotly \
  --target=es2016 --define:global=window --define:define.amd=false --loader:.css=empty \
  --legal-comments=eof --log-level=warning --outfile=bundle.js \
  --banner:js="/**
* plotly.js (heatmap - minified) v$version
* Plotly.js's core and heatmap trace, built by deploy/plotly/build.sh
* Copyright 2012-2026, Plotly, Inc.
* All rights reserved.
* Licensed under the MIT license
*/"
cp bundle.js "$out/plotly-heatmap.min.js"
cp node_modules/plotly.js/LICENSE "$out/LICENSE"
node - "$out" <<'JS'
const fs = require("fs"), crypto = require("crypto"), path = require("path");
const out = process.argv[2];
const lock = require("./package-lock.json").packages;
const data = fs.readFileSync(path.join(out, "plotly-heatmap.min.js"));
const record = {
  about: "Plotly.js's core (scatter, hover, colour bars, the toolbar) and its heatmap trace, the only traces the app's pages draw (explorer/ui/component.py), built by deploy/plotly/build.sh (`make plotly-bundle`) from the npm packages its package-lock.json pins. Its version must equal the plotly.js that the installed plotly.py ships (tests/render/test_chart_js.py); the HTML report and notebooks keep plotly.py's own full bundle. To update: set plotly.js's version in deploy/plotly/package.json, `npm install --package-lock-only --ignore-scripts` there, then `make plotly-bundle`.",
  file: "plotly-heatmap.min.js",
  package: "plotly.js",
  version: lock["node_modules/plotly.js"].version,
  tarball: lock["node_modules/plotly.js"].resolved,
  integrity: lock["node_modules/plotly.js"].integrity,
  built_with: `esbuild ${lock["node_modules/esbuild"].version}`,
  bytes: data.length,
  sha256: crypto.createHash("sha256").update(data).digest("hex"),
  license: "MIT (LICENSE beside it)",
};
fs.writeFileSync(path.join(out, "plotly-heatmap.json"), JSON.stringify(record, null, 2) + "\n");
console.log(`${record.file}: plotly.js ${record.version}, ${record.bytes} bytes, sha256 ${record.sha256}`);
JS
