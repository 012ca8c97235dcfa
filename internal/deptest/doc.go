// Package deptest holds the test that locks the import graph: which
// packages may link which (see deptest_test.go). It has no code of its own.
package deptest
