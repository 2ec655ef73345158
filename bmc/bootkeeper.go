package bmc

import (
	"context"
	"errors"
	"sync"
)

// BootKeeper keeps a boot device in force across power-ons where the BMC cannot keep one
// persistently (Lenovo XCC refuses a Continuous override, and the Redfish driver answers
// such a SetBootDevice ErrUnsupported): Ironic's workaround, a one-time override armed
// again before each power-on. Wrap the open driver and use the keeper's SetBootDevice and
// SetPower in its place; the driver's other capabilities are used as they are. Safe for
// concurrent use.
type BootKeeper struct {
	d Driver

	mu   sync.Mutex
	keep *BootDevice // armed once before each power-on; nil when none
}

// NewBootKeeper wraps d, which must be a PowerController and a BootController.
func NewBootKeeper(d Driver) *BootKeeper { return &BootKeeper{d: d} }

var (
	_ PowerController = (*BootKeeper)(nil)
	_ BootController  = (*BootKeeper)(nil)
	_ Driver          = (*BootKeeper)(nil)
)

// Name is the wrapped driver's.
func (k *BootKeeper) Name() string { return k.d.Name() }

// Close closes the wrapped driver.
func (k *BootKeeper) Close() error { return k.d.Close() }

// PowerState is the wrapped driver's.
func (k *BootKeeper) PowerState(ctx context.Context) (PowerState, error) {
	pc, err := k.power()
	if err != nil {
		return PowerUnknown, err
	}
	return pc.PowerState(ctx)
}

// SetBootDevice sets b. A persistent b that the BMC refuses as unsupported is set once
// instead, and kept: each power-on through SetPower arms it once again. Any other b (a
// one-time override, or a persistent one the BMC keeps) ends the keeping; so does an error.
func (k *BootKeeper) SetBootDevice(ctx context.Context, b BootDevice) error {
	bc, ok := k.d.(BootController)
	if !ok {
		return &OpError{Driver: k.d.Name(), Op: "set-boot", Kind: ErrUnsupported, Message: "the driver cannot set a boot device"}
	}
	k.set(nil)
	err := bc.SetBootDevice(ctx, b)
	if err == nil || !b.Persistent || !errors.Is(err, ErrUnsupported) {
		return err
	}
	once := b
	once.Persistent = false
	if oerr := bc.SetBootDevice(ctx, once); oerr != nil {
		return oerr
	}
	k.set(&once)
	return nil
}

// SetPower runs a. Before on, cycle and reset, while a device is kept, it is armed once
// first; if that fails, the error is returned and the power is left as it was, since the
// machine would boot from something else.
func (k *BootKeeper) SetPower(ctx context.Context, a PowerAction) error {
	pc, err := k.power()
	if err != nil {
		return err
	}
	if dev, ok := k.Kept(); ok && (a == PowerActionOn || a == PowerActionCycle || a == PowerActionReset) {
		if err := k.d.(BootController).SetBootDevice(ctx, dev); err != nil {
			return err
		}
	}
	return pc.SetPower(ctx, a)
}

// Kept returns the device armed before each power-on (a one-time override), and whether
// there is one: a persistent device the BMC would not keep.
func (k *BootKeeper) Kept() (BootDevice, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.keep == nil {
		return BootDevice{}, false
	}
	return *k.keep, true
}

func (k *BootKeeper) set(b *BootDevice) {
	k.mu.Lock()
	k.keep = b
	k.mu.Unlock()
}

func (k *BootKeeper) power() (PowerController, error) {
	pc, ok := k.d.(PowerController)
	if !ok {
		return nil, &OpError{Driver: k.d.Name(), Op: "power", Kind: ErrUnsupported, Message: "the driver cannot control power"}
	}
	return pc, nil
}
