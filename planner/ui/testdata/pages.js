// Runs the dashboard's page readers (app.js's apiPage, apiAll and
// shownOf) in Node against a planner, and prints what they got as JSON:
// every node, the newest 2 jobs with the total and whether a next page is
// said, every running job, the heading's count, and the stale note.
//
//   node pages.js <app.js> <planner URL> <token>
"use strict";
const fs = require("fs");
const vm = require("vm");
const [appPath, base, token] = process.argv.slice(2);

globalThis.document = { querySelector: () => null, addEventListener() {} };
globalThis.window = globalThis;
globalThis.addEventListener = () => {};
globalThis.sessionStorage = { getItem: () => token || null, setItem() {}, removeItem() {} };
const realFetch = globalThis.fetch;
const asked = [];
globalThis.fetch = (path, opts) => { asked.push(path); return realFetch(base + path, opts); };

vm.runInThisContext(fs.readFileSync(appPath, "utf8"), { filename: appPath });

(async () => {
  const nodes = await globalThis.apiAll("/v1/nodes");
  const newest = await globalThis.apiPage("/v1/jobs?reverse=true&per_page=2");
  const running = await globalThis.apiAll("/v1/jobs?state=running");
  process.stdout.write(JSON.stringify({
    nodes: nodes.items.map(n => n.id), newest: newest.items.map(j => j.id), total: newest.total, more: newest.next !== "",
    running: running.items.map(j => j.id), heading: globalThis.shownOf(newest, "newest"), asked: asked,
    stale: globalThis.staleNote([newest]), runningStale: globalThis.staleNote([running]),
  }));
})().catch(e => { process.stderr.write(String(e.stack || e) + "\n"); process.exit(1); });
