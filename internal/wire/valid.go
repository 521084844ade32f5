package wire

// Valid reports whether data is one valid JSON value, as encoding/json.Valid
// does (see the validator in scan.go).
func Valid(data []byte) bool {
	return onlySpace(data, checkValue(data, skipSpace(data, 0), 0))
}
