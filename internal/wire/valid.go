package wire

// Valid reports whether data is one valid JSON value, as encoding/json.Valid
// does (see validator).
func Valid(data []byte) bool {
	v := validator{data: data}
	return v.value() && v.end()
}

// eachValidMember validates data as Valid does and, when it is an object,
// calls fn with each member's name and value as raw JSON, slices of data,
// in order: one pass where Valid and then EachField would make two. It
// reports whether data is valid, and whether it is an object. fn may be
// called before data turns out to be invalid.
func eachValidMember(data []byte, fn func(key, val []byte)) (valid, object bool) {
	v := validator{data: data}
	v.skipSpace()
	if v.pos >= len(data) || data[v.pos] != '{' {
		return v.value() && v.end(), false
	}
	if !v.object(fn) || !v.end() {
		return false, false
	}
	return true, true
}
