package bmc

import (
	"context"
	"sync"
)

// BootKeepers keeps a BootKeeper per BMC across an Executor's operations: set as
// [Executor.Wrap], an operation whose context is marked with [KeepBoot] (one that sets a
// boot device or a machine's power) runs through its BMC's keeper, so that a persistent
// boot device the BMC refuses (Lenovo XCC has no Continuous override) is set once and
// armed once again before each power-on sent there afterwards (Ironic's workaround). Any
// other operation gets its session as it is, with every capability it has.
//
// The keeper lives on between operations, over a stand-in driver that is the session of
// the operation in progress (the BMC's pooled session, which the Executor lends to one
// operation at a time and logs out itself). The Executor runs one operation at a time per
// BMC, keyed by driver and address as here. What is kept is in memory only: a restarted
// host (or another one after a failover) does not re-arm a device kept before. The zero
// value is ready to use; safe for concurrent use.
type BootKeepers struct {
	mu   sync.Mutex
	bmcs map[string]*keptBMC // by TargetRef.key; dropped when idle and keeping nothing
}

// keptBMC is one BMC's keeper and the driver it works through: the session of the
// operation in progress.
type keptBMC struct {
	key    string
	refs   int    // operations running through it; under BootKeepers.mu
	cur    Driver // the session of the operation in progress
	keeper *BootKeeper
}

type keepBootKey struct{}

// KeepBoot marks ctx's operations as ones whose driver goes through the BMC's keeper
// ([BootKeepers.Wrap]).
func KeepBoot(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepBootKey{}, true)
}

// Wrap is an [Executor.Wrap]: under a [KeepBoot] context, a session that is a
// PowerController and a BootController runs the operation as those two capabilities
// through t's keeper, until done; any other runs it as it is. A session that waits at the
// power-on gate itself (PowerOnGater) still does, after the keeper armed the device.
func (k *BootKeepers) Wrap(ctx context.Context, t TargetRef, d Driver) (Driver, func()) {
	if keep, _ := ctx.Value(keepBootKey{}).(bool); !keep {
		return d, nil
	}
	_, pc := d.(PowerController)
	_, bc := d.(BootController)
	if !pc || !bc {
		return d, nil // nothing to keep on a driver without both
	}
	b := k.take(t.key())
	b.cur = d
	done := func() {
		b.cur = nil
		k.put(b)
	}
	s := &keptSession{b: b}
	if _, ok := d.(PowerOnGater); ok {
		return &keptGatingSession{s}, done
	}
	return s, done
}

// Kept returns the boot device armed before each power-on at t's BMC, if there is one.
func (k *BootKeepers) Kept(t TargetRef) (BootDevice, bool) {
	k.mu.Lock()
	b := k.bmcs[t.key()]
	k.mu.Unlock()
	if b == nil {
		return BootDevice{}, false
	}
	return b.keeper.Kept()
}

// take returns key's entry, counting the caller.
func (k *BootKeepers) take(key string) *keptBMC {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bmcs == nil {
		k.bmcs = make(map[string]*keptBMC)
	}
	b := k.bmcs[key]
	if b == nil {
		b = &keptBMC{key: key}
		b.keeper = NewBootKeeper(b)
		k.bmcs[key] = b
	}
	b.refs++
	return b
}

// put ends a caller's use of b, dropping it when no one uses it and it keeps nothing.
func (k *BootKeepers) put(b *keptBMC) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b.refs--
	if _, kept := b.keeper.Kept(); b.refs == 0 && !kept {
		delete(k.bmcs, b.key)
	}
}

// keptBMC is the keeper's driver: the session of the operation in progress.
var (
	_ PowerController = (*keptBMC)(nil)
	_ BootController  = (*keptBMC)(nil)
)

func (b *keptBMC) Name() string { return b.cur.Name() }

// Close is the Executor's to do, on the session itself.
func (b *keptBMC) Close() error { return nil }

func (b *keptBMC) PowerState(ctx context.Context) (PowerState, error) {
	return b.cur.(PowerController).PowerState(ctx)
}

func (b *keptBMC) SetPower(ctx context.Context, a PowerAction) error {
	return b.cur.(PowerController).SetPower(ctx, a)
}

func (b *keptBMC) SetBootDevice(ctx context.Context, d BootDevice) error {
	return b.cur.(BootController).SetBootDevice(ctx, d)
}

// keptSession is the driver an operation gets: power and boot through the BMC's keeper.
type keptSession struct{ b *keptBMC }

var (
	_ PowerController = (*keptSession)(nil)
	_ BootController  = (*keptSession)(nil)
	_ PowerOnGater    = (*keptGatingSession)(nil)
)

func (s *keptSession) Name() string { return s.b.cur.Name() }

// Close is the Executor's to do, on the session itself.
func (s *keptSession) Close() error { return nil }

func (s *keptSession) PowerState(ctx context.Context) (PowerState, error) {
	return s.b.keeper.PowerState(ctx)
}

func (s *keptSession) SetPower(ctx context.Context, a PowerAction) error {
	return s.b.keeper.SetPower(ctx, a)
}

func (s *keptSession) SetBootDevice(ctx context.Context, d BootDevice) error {
	return s.b.keeper.SetBootDevice(ctx, d)
}

// keptGatingSession is a keptSession over a driver that waits at the power-on gate itself
// (PowerOnGater), immediately before its power-on request: after the keeper armed the
// boot device.
type keptGatingSession struct{ *keptSession }

func (keptGatingSession) GatesPowerOn() {}
