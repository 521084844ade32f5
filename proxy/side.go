package proxy

// A Side is one of a proxy's two peers.
type Side int

const (
	// Predecessor is the client side: the editor, or the proxy before this
	// one. Its messages reach the proxy plain.
	Predecessor Side = iota
	// Successor is the agent side: the agent, or the proxy after this one.
	// Its messages reach the proxy wrapped in proxy/successor.
	Successor
)

// other returns the side a message from s is forwarded to.
func (s Side) other() Side {
	if s == Predecessor {
		return Successor
	}
	return Predecessor
}

func (s Side) String() string {
	if s == Successor {
		return "successor"
	}
	return "predecessor"
}
