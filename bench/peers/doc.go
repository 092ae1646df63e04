// Package peers compares topicfs's engine with other stores in the same
// run (see README.md). It is a module of its own so that the main module
// does not depend on what it compares against.
package peers
