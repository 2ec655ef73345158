package agent

import (
	"context"
	"sync"

	"github.com/bettercompute/siteboot/bmc"
)

// bootKeeps is the agent's bmc.Opener around the drivers' own. An operation that sets a
// boot device or a machine's power (a bmc.boot or bmc.power command, a transition's steps:
// their contexts are marked with keepBoot) gets its driver through a bmc.BootKeeper kept
// per BMC across operations, so that a persistent boot device the BMC refuses (Lenovo XCC
// has no Continuous override) is set once and armed once again before each power-on the
// agent sends (Ironic's workaround). Any other operation gets the driver as it is, with
// every capability it has.
//
// The Executor opens a session per operation; the keeper lives on between them, over a
// stand-in driver (keptBMC) that is the session of the operation in progress. The
// Executor runs one operation at a time per BMC, and keptBMC's lock holds that too. What
// is kept is in memory only: a restarted agent (or another one after a failover) does not
// re-arm a device kept before.
type bootKeeps struct {
	inner bmc.Opener

	mu   sync.Mutex
	bmcs map[string]*keptBMC // by driver and address; dropped when idle and keeping nothing
}

// keptBMC is one BMC's keeper and the driver it works through: the session of the
// operation in progress.
type keptBMC struct {
	key    string
	lock   chan struct{} // held from Open to the session's Close
	refs   int           // operations holding or waiting for lock; under bootKeeps.mu
	cur    bmc.Driver    // the open session; set while lock is held
	keeper *bmc.BootKeeper
}

type keepBootKey struct{}

// keepBoot marks ctx's operations as ones whose driver goes through the BMC's keeper.
func keepBoot(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepBootKey{}, true)
}

func newBootKeeps(inner bmc.Opener) *bootKeeps { return &bootKeeps{inner: inner} }

// Open opens t's driver; under a keepBoot context, a driver that is a PowerController and
// a BootController comes back as those two capabilities through t's keeper.
func (k *bootKeeps) Open(ctx context.Context, t bmc.Target) (bmc.Driver, error) {
	if keep, _ := ctx.Value(keepBootKey{}).(bool); !keep {
		return k.inner.Open(ctx, t)
	}
	b := k.take(t.Driver + "\x00" + t.Address)
	select {
	case b.lock <- struct{}{}:
	case <-ctx.Done():
		k.put(b)
		return nil, ctx.Err()
	}
	d, err := k.inner.Open(ctx, t)
	if err != nil {
		<-b.lock
		k.put(b)
		return nil, err
	}
	_, pc := d.(bmc.PowerController)
	_, bc := d.(bmc.BootController)
	if !pc || !bc {
		// Nothing to keep on a driver without both: give it back as it is.
		<-b.lock
		k.put(b)
		return d, nil
	}
	b.cur = d
	s := &keptSession{k: k, b: b}
	if _, ok := d.(bmc.PowerOnGater); ok {
		return &keptGatingSession{s}, nil
	}
	return s, nil
}

// Kept returns the boot device armed before each power-on at t's BMC, if there is one.
func (k *bootKeeps) Kept(t bmc.TargetRef) (bmc.BootDevice, bool) {
	k.mu.Lock()
	b := k.bmcs[t.Driver+"\x00"+t.Address]
	k.mu.Unlock()
	if b == nil {
		return bmc.BootDevice{}, false
	}
	return b.keeper.Kept()
}

// take returns key's entry, counting the caller.
func (k *bootKeeps) take(key string) *keptBMC {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.bmcs == nil {
		k.bmcs = make(map[string]*keptBMC)
	}
	b := k.bmcs[key]
	if b == nil {
		b = &keptBMC{key: key, lock: make(chan struct{}, 1)}
		b.keeper = bmc.NewBootKeeper(b)
		k.bmcs[key] = b
	}
	b.refs++
	return b
}

// put ends a caller's use of b, dropping it when no one uses it and it keeps nothing.
func (k *bootKeeps) put(b *keptBMC) {
	k.mu.Lock()
	defer k.mu.Unlock()
	b.refs--
	if _, kept := b.keeper.Kept(); b.refs == 0 && !kept {
		delete(k.bmcs, b.key)
	}
}

// keptBMC is the keeper's driver: the session of the operation in progress.
var (
	_ bmc.PowerController = (*keptBMC)(nil)
	_ bmc.BootController  = (*keptBMC)(nil)
)

func (b *keptBMC) Name() string { return b.cur.Name() }

// Close is the session's to do (keptSession.Close).
func (b *keptBMC) Close() error { return nil }

func (b *keptBMC) PowerState(ctx context.Context) (bmc.PowerState, error) {
	return b.cur.(bmc.PowerController).PowerState(ctx)
}

func (b *keptBMC) SetPower(ctx context.Context, a bmc.PowerAction) error {
	return b.cur.(bmc.PowerController).SetPower(ctx, a)
}

func (b *keptBMC) SetBootDevice(ctx context.Context, d bmc.BootDevice) error {
	return b.cur.(bmc.BootController).SetBootDevice(ctx, d)
}

// keptSession is the driver an operation gets: power and boot through the BMC's keeper.
type keptSession struct {
	k    *bootKeeps
	b    *keptBMC
	once sync.Once
}

var (
	_ bmc.PowerController = (*keptSession)(nil)
	_ bmc.BootController  = (*keptSession)(nil)
	_ bmc.PowerOnGater    = (*keptGatingSession)(nil)
)

func (s *keptSession) Name() string { return s.b.cur.Name() }

// Close logs the session out and lets the BMC's next operation have the keeper.
func (s *keptSession) Close() error {
	var err error
	s.once.Do(func() {
		err = s.b.cur.Close()
		s.b.cur = nil
		<-s.b.lock
		s.k.put(s.b)
	})
	return err
}

func (s *keptSession) PowerState(ctx context.Context) (bmc.PowerState, error) {
	return s.b.keeper.PowerState(ctx)
}

func (s *keptSession) SetPower(ctx context.Context, a bmc.PowerAction) error {
	return s.b.keeper.SetPower(ctx, a)
}

func (s *keptSession) SetBootDevice(ctx context.Context, d bmc.BootDevice) error {
	return s.b.keeper.SetBootDevice(ctx, d)
}

// keptGatingSession is a keptSession over a driver that waits at the power-on gate itself
// (bmc.PowerOnGater), immediately before its power-on request: after the keeper armed the
// boot device.
type keptGatingSession struct{ *keptSession }

func (keptGatingSession) GatesPowerOn() {}
