package bench

import (
	"context"
	"errors"
)

// cleanerThroughput is filled in once policies exposes its cleaner.
func cleanerThroughput(ctx context.Context, r *runner) ([]Row, error) {
	return nil, errors.New("policies cleaner not available yet")
}
