package agent

import (
	"context"
	"sync"

	"github.com/bettercompute/siteboot/bmc"
)

// bootKeeps is the agent's bmc.Executor.Wrap. An operation that sets a boot device or a
// machine's power (a bmc.boot or bmc.power command, a transition's steps: their contexts
// are marked with keepBoot) runs through a bmc.BootKeeper kept per BMC across operations,
// so that a persistent boot device the BMC refuses (Lenovo XCC has no Continuous override)
// is set once and armed once again before each power-on the agent sends (Ironic's
// workaround). Any other operation gets its session as it is, with every capability it
// has.
//
// The keeper lives on between operations, over a stand-in driver (keptBMC) that is the
// session of the operation in progress: the BMC's pooled session (bmc.SessionPool), which
// the Executor lends to one operation at a time and logs out itself. The Executor runs one
// operation at a time per BMC (by driver and address, the key here too), so cur has one
// writer at a time. What is kept is in memory only: a restarted agent (or another one
// after a failover) does not re-arm a device kept before.
type bootKeeps struct {
	mu   sync.Mutex
	bmcs map[string]*keptBMC // by driver and address; dropped when idle and keeping nothing
}

// keptBMC is one BMC's keeper and the driver it works through: the session of the
// operation in progress.
type keptBMC struct {
	key    string
	refs   int        // operations running through it; under bootKeeps.mu
	cur    bmc.Driver // the session of the operation in progress
	keeper *bmc.BootKeeper
}

type keepBootKey struct{}

// keepBoot marks ctx's operations as ones whose driver goes through the BMC's keeper.
func keepBoot(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepBootKey{}, true)
}

func newBootKeeps() *bootKeeps { return &bootKeeps{} }

// wrap is the Executor's Wrap: under a keepBoot context, a session that is a
// PowerController and a BootController runs the operation as those two capabilities
// through t's keeper, until done; any other runs it as it is.
func (k *bootKeeps) wrap(ctx context.Context, t bmc.TargetRef, d bmc.Driver) (bmc.Driver, func()) {
	if keep, _ := ctx.Value(keepBootKey{}).(bool); !keep {
		return d, nil
	}
	_, pc := d.(bmc.PowerController)
	_, bc := d.(bmc.BootController)
	if !pc || !bc {
		return d, nil // nothing to keep on a driver without both
	}
	b := k.take(t.Driver + "\x00" + t.Address)
	b.cur = d
	done := func() {
		b.cur = nil
		k.put(b)
	}
	s := &keptSession{b: b}
	if _, ok := d.(bmc.PowerOnGater); ok {
		return &keptGatingSession{s}, done
	}
	return s, done
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
		b = &keptBMC{key: key}
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

// Close is the Executor's to do, on the session itself.
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
type keptSession struct{ b *keptBMC }

var (
	_ bmc.PowerController = (*keptSession)(nil)
	_ bmc.BootController  = (*keptSession)(nil)
	_ bmc.PowerOnGater    = (*keptGatingSession)(nil)
)

func (s *keptSession) Name() string { return s.b.cur.Name() }

// Close is the Executor's to do, on the session itself.
func (s *keptSession) Close() error { return nil }

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
