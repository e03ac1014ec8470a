// Package importrules holds no code: its test keeps the project's layers
// pointing one way (docs/architecture.md, "Import rules"). One table of
// components (importrules_test.go) places every package of the module and
// says which components each may import; the test lists the module's
// packages with one `go list` call and fails when a package is in no
// component, or imports a package of a component its own may not import.
// It also breaks every rule on purpose (an import added to the real
// graph for each forbidden pair) and checks that each is reported, and
// keeps docs/architecture.md's copy of the table current.
//
// Its second test (nomadfree_test.go) runs `go list -deps -test` over
// every package of the module (without tags and with the e2e tag) and
// fails when any of them, or its tests, links the source-available
// github.com/hashicorp/nomad module; only Nomad's api module is allowed.
// The plugins speak Nomad's plugin protocol through internal/nomadplugin.
package importrules
