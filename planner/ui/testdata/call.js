// Runs one of the dashboard's functions (app.js) in Node on a value read
// from stdin as JSON (a job record, a list of nodes: what the API sends),
// and prints what it returns as JSON.
//
//   node call.js <app.js> <function> < value.json
"use strict";
const fs = require("fs");
const vm = require("vm");
const [appPath, fn] = process.argv.slice(2);

globalThis.document = { querySelector: () => null, addEventListener() {} };
globalThis.window = globalThis;
globalThis.addEventListener = () => {};
globalThis.sessionStorage = { getItem: () => null, setItem() {}, removeItem() {} };
vm.runInThisContext(fs.readFileSync(appPath, "utf8"), { filename: appPath });
const value = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(globalThis[fn](value)));
