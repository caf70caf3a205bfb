package pg

import (
	"context"
	"fmt"
)

// OperatorBatches runs a bounded clean-up as the operator, one transaction per batch, so
// that no transaction holds many rows' locks: fn deletes (or otherwise settles) at most
// batch rows and says how many; the loop ends after a batch of fewer than batch rows, or
// at the first error, wrapped as op's. It returns the rows of every batch that committed.
func (d *DB) OperatorBatches(ctx context.Context, op string, batch int64, fn func(tx *Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := d.Operator(ctx, func(tx *Tx) (err error) {
			n, err = fn(tx)
			return err
		})
		total += n
		if err != nil {
			return total, fmt.Errorf("%s: %w", op, err)
		}
		if n < batch {
			return total, nil
		}
	}
}
