package bench

import (
	"context"
	"errors"
	"io"
)

const (
	maxNodes   = 16
	maxTenants = 64
)

func runNodes(ctx context.Context, env *benchEnv, c Config, o benchOptions, stdout io.Writer) error {
	return errors.New("todo")
}
