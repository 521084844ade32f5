// Package transcriptrecorder holds the transcript-recorder example proxy,
// which is a Node program (transcript-recorder.mjs); the Go files are only
// its test, which runs it in a real chain. See README.md.
package transcriptrecorder
