// Package deptest holds the tests that lock the module's shape: which
// packages may link which (deptest_test.go), and the hub's size and error
// discipline (layout_test.go). It has no code of its own.
package deptest
