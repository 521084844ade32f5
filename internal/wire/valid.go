package wire

// Valid reports whether data is one valid JSON value, as encoding/json.Valid
// does (see the validator in scan.go).
func Valid(data []byte) bool {
	return onlySpace(data, checkValue(data, skipSpace(data, 0), 0))
}

// eachValidMember validates data as Valid does and, when it is an object,
// calls fn with each member's name and value as raw JSON, slices of data,
// in order: one pass where Valid and then EachField would make two. It
// reports whether data is valid, and whether it is an object. fn may be
// called before data turns out to be invalid.
func eachValidMember(data []byte, fn func(key, val []byte)) (valid, isObject bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return onlySpace(data, checkValue(data, i, 0)), false
	}
	if !onlySpace(data, checkObject(data, i, 0, fn)) {
		return false, false
	}
	return true, true
}
