// Package blackhole is a TCP relay for tests that can lose its network:
// told to, it stops forwarding in both directions without closing either
// socket, which is what a pulled cable or a closed laptop looks like to
// both ends (no FIN, no RST, no answer).
package blackhole

import (
	"io"
	"net"
	"sync"
)

// A Relay forwards each connection made to Addr to its target.
type Relay struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	lost  chan struct{} // closed by Blackhole
	once  sync.Once
	done  chan struct{} // closed by Close
	wg    sync.WaitGroup
	bytes int64
}

// Listen starts a relay on a loopback port to target.
func Listen(target string) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, target: target, lost: make(chan struct{}), done: make(chan struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is the relay's HOST:PORT.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Forwarded returns the bytes forwarded so far, both ways.
func (r *Relay) Forwarded() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bytes
}

// Blackhole stops all forwarding, for good; the sockets stay open until
// Close.
func (r *Relay) Blackhole() { r.once.Do(func() { close(r.lost) }) }

// Close closes the listener and every socket, and waits for the relay's
// goroutines.
func (r *Relay) Close() {
	r.ln.Close()
	r.mu.Lock()
	select {
	case <-r.done:
	default:
		close(r.done)
	}
	for _, c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", r.target)
		if err != nil {
			in.Close()
			continue
		}
		r.mu.Lock()
		select {
		case <-r.done:
			r.mu.Unlock()
			in.Close()
			out.Close()
			return
		default:
		}
		r.conns = append(r.conns, in, out)
		r.wg.Add(2)
		r.mu.Unlock()
		go r.pipe(out, in)
		go r.pipe(in, out)
	}
}

// pipe copies src to dst until either fails or the network is lost; then
// it holds both open until Close, as a lost network does.
func (r *Relay) pipe(dst, src net.Conn) {
	defer r.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-r.lost:
			<-r.done
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
			r.mu.Lock()
			r.bytes += int64(n)
			r.mu.Unlock()
		}
		if err != nil {
			if err == io.EOF {
				// Pass a clean end on, as TCP would.
				if tc, ok := dst.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
			}
			return
		}
	}
}
