// Package startbench holds no code: its test measures how long a task
// takes to start through the driver's supervisor (driver/runner) against
// Nomad's executor, which ran tasks before it (issue 32), side by side in
// one run. It links Nomad's executor, source-available code, into its test
// binary only; it goes once the executor is out of go.mod.
package startbench
