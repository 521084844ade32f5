package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// openOutput opens path to write (O_WRONLY|O_CREATE, and flag) without
// waiting for a reader if it is a FIFO: that open would otherwise wait,
// before the chain starts and with signals caught, so that nothing, not
// even SIGTERM, would end it. A FIFO nothing reads fails at once, saying
// so. The file is then put back in blocking mode (Fd): a FIFO read slowly,
// where Go does not poll it (macOS), must make its writer wait, not fail
// with EAGAIN.
func openOutput(path string, flag int, perm os.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|flag|syscall.O_NONBLOCK, perm)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%w: a FIFO that nothing reads; start its reader first", err)
	}
	if err != nil {
		return nil, err
	}
	f.Fd()
	return f, nil
}
