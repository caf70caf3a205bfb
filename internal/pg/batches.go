package pg

import "context"

// OperatorBatches runs a bounded clean-up as the operator, one transaction per batch, so
// that no transaction holds many rows' locks: fn deletes (or otherwise settles) at most
// batch rows and says how many; the loop ends after a batch of fewer than batch rows, or
// at the first error. It returns the rows of every batch that committed.
func (d *DB) OperatorBatches(ctx context.Context, batch int64, fn func(tx *Tx) (int64, error)) (int64, error) {
	var total int64
	for {
		var n int64
		err := d.Operator(ctx, func(tx *Tx) (err error) {
			n, err = fn(tx)
			return err
		})
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
}
