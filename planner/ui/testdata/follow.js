// Runs the dashboard's event stream follower (app.js's follow) in Node
// against a planner, with just enough of a page around it, and prints
// the live pill and the reason beside it as JSON the first time the page
// goes into the state asked for ("live" or "offline"); then exits.
//
//   node follow.js <app.js> <planner URL> <token or ""> <live|offline>
"use strict";
const fs = require("fs");
const vm = require("vm");
const [appPath, base, token, want] = process.argv.slice(2);

const elements = {};
function element(sel) {
  if (!elements[sel]) elements[sel] = { textContent: "", title: "", className: "", hidden: false, value: "", addEventListener() {} };
  return elements[sel];
}
globalThis.document = { querySelector: element, addEventListener() {} };
globalThis.window = globalThis;
globalThis.addEventListener = () => {};
globalThis.location = { hash: "" };
globalThis.sessionStorage = { getItem: () => token || null, setItem() {}, removeItem() {} };
const realFetch = globalThis.fetch;
globalThis.fetch = (path, opts) => realFetch(base + path, opts);

vm.runInThisContext(fs.readFileSync(appPath, "utf8"), { filename: appPath });

const setLive = globalThis.setLive;
globalThis.setLive = (on, why) => {
  setLive(on, why);
  if ((on ? "live" : "offline") !== want) return;
  const live = element("#live"), reason = element("#live-reason");
  process.stdout.write(JSON.stringify({ live: live.textContent, title: live.title, reason: reason.textContent, hidden: reason.hidden }));
  process.exit(0);
};
setTimeout(() => { process.stderr.write("the page never went " + want + "\n"); process.exit(2); }, 20000);
globalThis.follow();
