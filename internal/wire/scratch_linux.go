package wire

import "golang.org/x/sys/unix"

// residentScratch is how much of a scratch region stays backed by memory
// after a long line, so that lines up to a MiB cost no page faults (which
// cost more than the copy on a VM). A line longer than hugeLine costs
// faults anyway, and keeps nothing resident.
const (
	residentScratch = 1 << 20
	hugeLine        = 4 << 20
)

// resident is how much of the region to keep after a line of n bytes.
func resident(n int) int {
	if n > hugeLine {
		return 0
	}
	return residentScratch
}

// mapScratch reserves n bytes of address space outside the Go heap, with
// no memory behind it until a page is touched; nil if it cannot.
func mapScratch(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON|unix.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return b
}

// copyOut copies line, which a long read left at the start of region, to
// the heap. It gives back the memory behind region past residentScratch as
// it goes, so that the line is not held twice over. region may be nil when
// the line is on the heap already.
func copyOut(region, line []byte) []byte {
	out := make([]byte, len(line))
	keep := resident(len(line))
	for off := 0; off < len(line); off += residentScratch {
		end := min(off+residentScratch, len(line))
		copy(out[off:end], line[off:end])
		if region != nil && off >= keep {
			_ = unix.Madvise(region[off:end], unix.MADV_DONTNEED) // off is page-aligned
		}
	}
	return out
}

// keepScratch gives back the memory behind the first used bytes of region,
// which a line used, past what stays resident.
func keepScratch(region []byte, used int) []byte {
	if keep := resident(used); region != nil && used > keep {
		_ = unix.Madvise(region[keep:used], unix.MADV_DONTNEED)
	}
	return region
}

// unmapScratch unmaps region and returns nil. Nothing sliced from region
// may be used after.
func unmapScratch(region []byte) []byte {
	if region != nil {
		_ = unix.Munmap(region)
	}
	return nil
}
