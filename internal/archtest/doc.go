// Package archtest holds the import rules of the tree as a test (archtest_test.go): the
// toolsets never import each other, the MCP core imports neither a toolset nor the
// database, and only the data layer and the domain services import the generated
// queries. It has no code of its own.
package archtest
