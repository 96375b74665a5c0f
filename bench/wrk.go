package bench

import (
	"context"
	"errors"
	"io"
)

func runWrk(ctx context.Context, env *benchEnv, sc *benchScenario, o benchOptions, stdout io.Writer) error {
	return errors.New("todo")
}
