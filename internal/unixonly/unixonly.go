//go:build unix

// Package unixonly is empty, and exists on Unix systems only: a package
// that needs a Unix system imports it from a file built elsewhere, so that
// building it elsewhere stops at once with "build constraints exclude all
// Go files in .../internal/unixonly" rather than at whatever Unix call
// happens to be compiled first.
package unixonly
