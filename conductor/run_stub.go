package conductor

import (
	"context"
	"errors"
	"io"
)

// Run serves one client on in/out until the client closes in, ctx is done, or
// the chain fails; it always stops every component before returning. A nil
// error means a clean end.
func Run(ctx context.Context, cfg Config, in io.Reader, out io.Writer) error {
	return errors.New("not implemented")
}
