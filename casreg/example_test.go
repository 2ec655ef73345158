package casreg_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/bettercompute/siteboot/casreg"
)

// Two writers read the same version; the first to write wins, the second is told to read
// again.
func Example() {
	ctx := context.Background()
	var r casreg.Memory
	_, v, _ := r.Get(ctx, "counter")
	if _, err := r.CompareAndSwap(ctx, "counter", v, []byte("1")); err != nil {
		fmt.Println(err)
	}
	_, err := r.CompareAndSwap(ctx, "counter", v, []byte("1"))
	fmt.Println(errors.Is(err, casreg.ErrConflict))
	b, _, _ := r.Get(ctx, "counter")
	fmt.Println(string(b))
	// Output:
	// true
	// 1
}
