package pg

import "context"

// ReadOne runs a read of one statement in the tenant's transaction: the statement carries
// the COMMIT (Tx.CommitWithNext), so the read costs one round trip. A failure is
// classified as op (Classify); what read returned is returned with it.
func ReadOne[T any](ctx context.Context, d *DB, t Tenant, op string, read func(tx *Tx) (T, error)) (T, error) {
	var out T
	err := d.InTenant(ctx, t, func(tx *Tx) (err error) {
		tx.CommitWithNext(ctx)
		out, err = read(tx)
		return err
	})
	if err != nil {
		return out, Classify(op, err)
	}
	return out, nil
}
