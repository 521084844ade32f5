// Package recent keeps what was added last, up to a bound, for the tables
// that remember what has ended (a connection, a token) so that a peer that
// comes back to it can be told why, without growing with every peer that
// never cleans up after itself: the oldest entry goes first once the bound
// is reached.
package recent

import "iter"

// A Map holds at most Limit keys, dropping the oldest added first. Its
// zero value with Limit set is ready; it is not safe for concurrent use.
type Map[K comparable, V any] struct {
	Limit int

	m     map[K]V
	order []K // a ring of the keys as added, the oldest at next once full
	next  int
}

// Add sets k to v. A key not held takes the next place in the ring,
// dropping the oldest key once Limit are held; a key held keeps its place.
// With no Limit, nothing is held.
func (r *Map[K, V]) Add(k K, v V) {
	if r.Limit <= 0 {
		return
	}
	if r.m == nil {
		r.m = make(map[K]V)
	}
	if _, held := r.m[k]; !held {
		if len(r.order) < r.Limit {
			r.order = append(r.order, k)
		} else {
			delete(r.m, r.order[r.next])
			r.order[r.next] = k
			r.next = (r.next + 1) % r.Limit
		}
	}
	r.m[k] = v
}

// Get returns the value of k, and whether k is held.
func (r *Map[K, V]) Get(k K) (V, bool) {
	v, ok := r.m[k]
	return v, ok
}

// Delete drops k. Its place in the ring stays, to be taken in turn, so a
// key added again before that place comes round may go early: it is
// forgotten sooner, never kept past the bound.
func (r *Map[K, V]) Delete(k K) { delete(r.m, k) }

// Len returns how many keys are held.
func (r *Map[K, V]) Len() int { return len(r.m) }

// All yields every key held with its value, in no order.
func (r *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for k, v := range r.m {
			if !yield(k, v) {
				return
			}
		}
	}
}
