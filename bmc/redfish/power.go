package redfish

import (
	"context"
	"slices"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/stmcginnis/gofish"
)

// rfPower is the part of a ComputerSystem a power operation reads.
type rfPower struct {
	PowerState string
	Actions    struct {
		Reset *struct {
			Target     string   `json:"target"`
			Allowed    []string `json:"ResetType@Redfish.AllowableValues"`
			ActionInfo string   `json:"@Redfish.ActionInfo"`
		} `json:"#ComputerSystem.Reset"`
	}
}

func powerState(s string) bmc.PowerState {
	switch s {
	case "On":
		return bmc.PowerOn
	case "Off":
		return bmc.PowerOff
	}
	return bmc.PowerUnknown
}

// PowerState implements bmc.PowerController.
func (d *Driver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	st := bmc.PowerUnknown
	err := d.do(ctx, "power-state", func(c *gofish.APIClient) error {
		var sys rfPower
		if _, err := getRaw(c, d.sysPath, &sys); err != nil {
			return err
		}
		st = powerState(sys.PowerState)
		return nil
	})
	return st, err
}

// resetChoices lists the ResetType values that carry out an action, best first. A
// graceful off is PushPowerButton where the BMC offers no GracefulShutdown (some iLO 5
// firmware): pressed while the machine is on, it asks the OS to shut down.
var resetChoices = map[bmc.PowerAction][]string{
	bmc.PowerActionOn:       {"On", "ForceOn"},
	bmc.PowerActionOff:      {"GracefulShutdown", "PushPowerButton"},
	bmc.PowerActionForceOff: {"ForceOff"},
	bmc.PowerActionReset:    {"ForceRestart", "PowerCycle"},
	bmc.PowerActionCycle:    {"PowerCycle"},
}

// powerOnResets are the ResetType values that may power a machine on: each waits at the
// context's power-on gate (bmc.AwaitPowerOn) immediately before it is sent.
var powerOnResets = map[string]bool{"On": true, "ForceOn": true, "PowerCycle": true}

// GatesPowerOn implements bmc.PowerOnGater: SetPower waits at the context's power-on gate
// immediately before each On, ForceOn or PowerCycle it sends.
func (d *Driver) GatesPowerOn() {}

// allowedResets returns the ResetType values the BMC lists, from the action's annotation
// or its ActionInfo; nil when it lists none (then the standard values are assumed).
func (d *Driver) allowedResets(c *gofish.APIClient, sys rfPower) []string {
	r := sys.Actions.Reset
	if len(r.Allowed) > 0 || r.ActionInfo == "" {
		return r.Allowed
	}
	var info struct {
		Parameters []struct {
			Name            string
			AllowableValues []string
		}
	}
	if _, err := getRaw(c, r.ActionInfo, &info); err != nil {
		return nil
	}
	for _, p := range info.Parameters {
		if p.Name == "ResetType" {
			return p.AllowableValues
		}
	}
	return nil
}

// SetPower implements bmc.PowerController. Asking for the state the machine is already
// in (on when on, off when off) sends nothing. A cycle of a machine that is off powers it
// on. Where the BMC offers no PowerCycle, a cycle is ForceOff then On. After the BMC
// accepts, the power state is read back every PollInterval until it is the one asked for
// (on after on, cycle and reset; off after off and force-off), for at most PowerTimeout:
// a machine that does not get there is ErrTimeout, saying what it reports.
func (d *Driver) SetPower(ctx context.Context, a bmc.PowerAction) error {
	if !a.Valid() {
		return d.opErr("power", bmc.ErrInvalid, "unknown power action "+string(a), nil)
	}
	return d.do(ctx, "power", func(c *gofish.APIClient) error {
		var sys rfPower
		etag, err := getRaw(c, d.sysPath, &sys)
		if err != nil {
			return err
		}
		if sys.Actions.Reset == nil {
			return d.opErr("power", bmc.ErrUnsupported, "the system has no ComputerSystem.Reset action", nil)
		}
		st := powerState(sys.PowerState)
		switch {
		case a == bmc.PowerActionOn && st == bmc.PowerOn,
			(a == bmc.PowerActionOff || a == bmc.PowerActionForceOff) && st == bmc.PowerOff:
			return nil
		case a == bmc.PowerActionCycle && st == bmc.PowerOff:
			a = bmc.PowerActionOn
		}
		allowed := d.allowedResets(c, sys)
		pick := func(a bmc.PowerAction) (string, bool) {
			for _, rt := range resetChoices[a] {
				if len(allowed) == 0 || slices.Contains(allowed, rt) {
					return rt, true
				}
			}
			return "", false
		}
		reset := func(rt, etag string) error {
			var gate func() error
			if powerOnResets[rt] {
				gate = func() error {
					if err := bmc.AwaitPowerOn(ctx); err != nil {
						return d.opErr("power", bmc.ErrTimeout, "the site's power-on ramp gave no turn before the deadline; "+rt+" not sent", err)
					}
					return nil
				}
			}
			_, err := d.gatedAction(c, sys.Actions.Reset.Target, etag, map[string]string{"ResetType": rt}, gate)
			return err
		}
		rt, ok := pick(a)
		if !ok && a == bmc.PowerActionCycle {
			off, ok1 := pick(bmc.PowerActionForceOff)
			on, ok2 := pick(bmc.PowerActionOn)
			if ok1 && ok2 {
				d.log.Info("redfish: no PowerCycle offered, sending ForceOff then On", "addr", d.endpoint)
				if err := reset(off, etag); err != nil {
					return err
				}
				after, err := d.waitPower(ctx, c, bmc.PowerOff, "ForceOff", true)
				if err != nil {
					return err
				}
				if err := reset(on, after); err != nil {
					return err
				}
				_, err = d.waitPower(ctx, c, bmc.PowerOn, on, false)
				return err
			}
		}
		if !ok {
			return d.opErr("power", bmc.ErrUnsupported, "the BMC offers no reset type for "+string(a), nil)
		}
		if err := reset(rt, etag); err != nil {
			return err
		}
		want := bmc.PowerOn
		if a == bmc.PowerActionOff || a == bmc.PowerActionForceOff {
			want = bmc.PowerOff
		}
		_, err = d.waitPower(ctx, c, want, rt, false)
		return err
	})
}

// maxPowerPolls bounds any wait for a power state, whatever PowerTimeout says.
const maxPowerPolls = 10000

// waitPower reads the system until it reports want, every PollInterval, for at most
// PowerTimeout (and maxPowerPolls reads), and returns its ETag as last read. cycleOff
// marks the wait for Off inside a cycle, whose On is not sent when it fails.
func (d *Driver) waitPower(ctx context.Context, c *gofish.APIClient, want bmc.PowerState, sentType string, cycleOff bool) (string, error) {
	deadline := time.Now().Add(d.cfg.PowerTimeout)
	last := ""
	for i := 0; ; i++ {
		var sys rfPower
		etag, err := getRaw(c, d.sysPath, &sys)
		_, busy := transient(err)
		switch {
		case err != nil && (!busy || i >= maxPowerPolls || time.Now().After(deadline)):
			return "", err
		case err == nil && powerState(sys.PowerState) == want:
			return etag, nil
		case err == nil:
			last = sys.PowerState
		}
		// A busy answer to a read after the BMC took the action is no answer about the
		// action: read again.
		if i >= maxPowerPolls || time.Now().After(deadline) {
			msg := "the BMC accepted " + sentType + " but the machine still reports " + orNone(last) +
				" after " + d.cfg.PowerTimeout.String()
			if cycleOff {
				msg = "the machine did not report Off after ForceOff; On not sent"
			}
			return "", d.opErr("power", bmc.ErrTimeout, msg, nil)
		}
		t := time.NewTimer(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", d.opErr("power", bmc.ErrTimeout, "the machine reports "+orNone(last)+" at the deadline, "+
				string(want)+" was asked for", ctx.Err())
		case <-t.C:
		}
	}
}
