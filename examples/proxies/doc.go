// Package proxies is a set of small, working ACP proxies to copy from, one
// per directory, each in a different language: context-injector (Go, on the
// project's proxy library), permission-policy (Python) and
// transcript-recorder (Node). See README.md. This package's test runs all
// three in one chain, as the README's chain file does.
package proxies
