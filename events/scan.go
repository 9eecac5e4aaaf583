package events

import "context"

// Scan calls fn for every stored event after position after that matches
// f, in position order, until the end of the store (as it is while Scan
// reads it), in batches of 4,096. It stops at fn's first error.
func Scan(ctx context.Context, st Store, after uint64, f Filter, fn func(Event) error) error {
	for {
		batch, err := st.ReadAll(ctx, after, f, 4096)
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, ev := range batch {
			if err := fn(ev); err != nil {
				return err
			}
		}
		after = batch[len(batch)-1].Position
	}
}
