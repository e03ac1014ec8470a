package planner

// The package's own test helpers, for its external tests
// (admission_sim_test.go, which imports the simulator, which imports
// this package).
var (
	NewTestPlanner = newPlanner
	ParseTestSpec  = parseSpec
	TestNode       = node
)
