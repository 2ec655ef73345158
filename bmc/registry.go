package bmc

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// Registry opens drivers by name. The host builds one and registers the drivers it
// supports; the zero value is empty and ready to use.
type Registry struct {
	mu      sync.RWMutex
	openers map[string]Opener
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{} }

// Register adds an opener under name. An empty name, a nil opener or a name already taken
// is an error.
func (r *Registry) Register(name string, o Opener) error {
	if name == "" || o == nil {
		return errors.New("bmc: Register needs a name and an opener")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.openers[name]; ok {
		return errors.New("bmc: driver " + quote(name) + " already registered")
	}
	if r.openers == nil {
		r.openers = make(map[string]Opener)
	}
	r.openers[name] = o
	return nil
}

// Names returns the registered names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.openers))
	for n := range r.openers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Open opens the driver registered under t.Driver. A name nobody registered is an
// *OpError of kind ErrUnsupportedDriver.
func (r *Registry) Open(ctx context.Context, t Target) (Driver, error) {
	r.mu.RLock()
	o := r.openers[t.Driver]
	r.mu.RUnlock()
	if o == nil {
		return nil, &OpError{Driver: t.Driver, Op: "open", Addr: t.Address, Kind: ErrUnsupportedDriver,
			Message: "no driver registered as " + quote(t.Driver)}
	}
	return o.Open(ctx, t)
}
