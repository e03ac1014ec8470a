// Runs the dashboard's modelFacts (app.js) in Node on a job record read
// from stdin, and prints the facts as JSON.
//
//   node models.js <app.js> < job.json
"use strict";
const fs = require("fs");
const vm = require("vm");
const [appPath] = process.argv.slice(2);

globalThis.document = { querySelector: () => null, addEventListener() {} };
globalThis.window = globalThis;
globalThis.addEventListener = () => {};
globalThis.sessionStorage = { getItem: () => null, setItem() {}, removeItem() {} };
vm.runInThisContext(fs.readFileSync(appPath, "utf8"), { filename: appPath });
const job = JSON.parse(fs.readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(globalThis.modelFacts(job)));
