package redfish

import (
	"context"
	"slices"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
	"github.com/stmcginnis/gofish/schemas"
)

func (d *Driver) system(c *gofish.APIClient) (*schemas.ComputerSystem, error) {
	return schemas.GetComputerSystem(c, d.sysPath)
}

func powerState(s schemas.PowerState) bmc.PowerState {
	switch s {
	case schemas.OnPowerState:
		return bmc.PowerOn
	case schemas.OffPowerState:
		return bmc.PowerOff
	}
	return bmc.PowerUnknown
}

// PowerState implements bmc.PowerController.
func (d *Driver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	st := bmc.PowerUnknown
	err := d.do(ctx, "power-state", func(c *gofish.APIClient) error {
		sys, err := d.system(c)
		if err != nil {
			return err
		}
		st = powerState(sys.PowerState)
		return nil
	})
	return st, err
}

// resetChoices lists the ResetType values that carry out an action, best first.
var resetChoices = map[bmc.PowerAction][]schemas.ResetType{
	bmc.PowerActionOn:       {schemas.OnResetType, schemas.ForceOnResetType},
	bmc.PowerActionOff:      {schemas.GracefulShutdownResetType},
	bmc.PowerActionForceOff: {schemas.ForceOffResetType},
	bmc.PowerActionReset:    {schemas.ForceRestartResetType, schemas.PowerCycleResetType},
	bmc.PowerActionCycle:    {schemas.PowerCycleResetType},
}

// SetPower implements bmc.PowerController. Asking for the state the machine is already
// in (on when on, off when off) sends nothing. A cycle of a machine that is off powers it
// on. Where the BMC offers no PowerCycle, a cycle is ForceOff then On.
func (d *Driver) SetPower(ctx context.Context, a bmc.PowerAction) error {
	if !a.Valid() {
		return d.opErr("power", bmc.ErrInvalid, "unknown power action "+string(a), nil)
	}
	return d.do(ctx, "power", func(c *gofish.APIClient) error {
		sys, err := d.system(c)
		if err != nil {
			return err
		}
		st := powerState(sys.PowerState)
		switch {
		case a == bmc.PowerActionOn && st == bmc.PowerOn,
			(a == bmc.PowerActionOff || a == bmc.PowerActionForceOff) && st == bmc.PowerOff:
			return nil
		case a == bmc.PowerActionCycle && st == bmc.PowerOff:
			a = bmc.PowerActionOn
		}
		allowed, err := sys.GetSupportedResetTypes()
		if err != nil {
			allowed = nil // no ActionInfo: assume the standard values
		}
		pick := func(a bmc.PowerAction) (schemas.ResetType, bool) {
			for _, rt := range resetChoices[a] {
				if len(allowed) == 0 || slices.Contains(allowed, rt) {
					return rt, true
				}
			}
			return "", false
		}
		rt, ok := pick(a)
		if !ok && a == bmc.PowerActionCycle {
			off, ok1 := pick(bmc.PowerActionForceOff)
			on, ok2 := pick(bmc.PowerActionOn)
			if ok1 && ok2 {
				d.log.Info("redfish: no PowerCycle offered, sending ForceOff then On", "addr", d.endpoint)
				if _, err := sys.Reset(off); err != nil {
					return err
				}
				after, err := d.waitOff(ctx, c)
				if err != nil {
					return err
				}
				_, err = after.Reset(on)
				return err
			}
		}
		if !ok {
			return d.opErr("power", bmc.ErrUnsupported, "the BMC offers no reset type for "+string(a), nil)
		}
		_, err = sys.Reset(rt)
		return err
	})
}

// maxOffPolls bounds the wait for a ForceOff to take effect before the On of a cycle.
const maxOffPolls = 30

// waitOff polls the system until it reports Off, every PollInterval, at most maxOffPolls
// times, and returns the system as last read.
func (d *Driver) waitOff(ctx context.Context, c *gofish.APIClient) (*schemas.ComputerSystem, error) {
	for i := 0; ; i++ {
		sys, err := d.system(c)
		if err != nil {
			return nil, err
		}
		if powerState(sys.PowerState) == bmc.PowerOff {
			return sys, nil
		}
		if i >= maxOffPolls {
			return nil, d.opErr("power", bmc.ErrTimeout, "the machine did not report Off after ForceOff; On not sent", nil)
		}
		t := time.NewTimer(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
