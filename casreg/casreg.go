package casreg

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Version identifies one stored value of a key; 0 means no value is stored.
type Version int64

// ErrConflict: a compare-and-swap found the key's version changed since it was read.
var ErrConflict = errors.New("casreg: version changed meanwhile")

// ReasonOf returns "conflict" when err wraps ErrConflict, and "" otherwise (nil
// included): a store's own failures belong to the store.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{{Err: ErrConflict, Name: "conflict"}}

// Register keeps values by key with compare-and-swap. Implementations are safe for
// concurrent use.
type Register interface {
	// Get returns key's value and its version. A key with no value yields nil, version 0
	// and no error.
	Get(ctx context.Context, key string) ([]byte, Version, error)
	// CompareAndSwap stores value under key if the key's version is still old (0: no
	// value stored) and returns the new version, greater than any the key had. Otherwise
	// it stores nothing and returns an error matching ErrConflict.
	CompareAndSwap(ctx context.Context, key string, old Version, value []byte) (Version, error)
}

// Memory is a Register in memory. The zero value is ready to use; it is safe for
// concurrent use. Values are kept for the life of the process.
type Memory struct {
	mu   sync.Mutex
	rev  Version
	vals map[string]memValue
}

type memValue struct {
	b   []byte
	ver Version
}

var _ Register = (*Memory)(nil)

// Get implements Register. The bytes returned are the caller's own (never nil for a
// stored value, even an empty one).
func (m *Memory) Get(ctx context.Context, key string) ([]byte, Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, 0, fmt.Errorf("casreg: get %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.vals[key]
	if !ok {
		return nil, 0, nil
	}
	return append([]byte{}, v.b...), v.ver, nil
}

// CompareAndSwap implements Register. The value is copied.
func (m *Memory) CompareAndSwap(ctx context.Context, key string, old Version, value []byte) (Version, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("casreg: compare-and-swap %q: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.vals[key].ver != old {
		return 0, fmt.Errorf("casreg: compare-and-swap %q: %w", key, ErrConflict)
	}
	if m.vals == nil {
		m.vals = make(map[string]memValue)
	}
	m.rev++
	m.vals[key] = memValue{b: append([]byte{}, value...), ver: m.rev}
	return m.rev, nil
}

// Len returns the number of keys holding a value.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.vals)
}
