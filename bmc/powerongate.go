package bmc

import "context"

type powerOnGateKey struct{}

// WithPowerOnGate returns a copy of ctx whose power-ons wait for gate: a driver running
// an operation under it calls AwaitPowerOn immediately before each request that may power
// a machine on, so that a site's ramp bounds power-ons as they are sent to BMCs, not as
// operations start (an operation reads the system, a cycle cuts the power and waits for
// it to be off, before its power-on goes out). A nil gate removes any gate. The
// TransitionRunner sets it on the power-ons it sends; a host rarely does.
func WithPowerOnGate(ctx context.Context, gate func(context.Context) error) context.Context {
	return context.WithValue(ctx, powerOnGateKey{}, gate)
}

// AwaitPowerOn waits at ctx's power-on gate, if it has one (nil at once if not), and
// returns its error (the context's, when it ends first). A driver calls it immediately before sending each
// request that may power a machine on (on, a cycle, the on half of an off-then-on; not a
// restart, which does not cut the power), once per request sent (a request sent again
// waits again), and nothing is sent when it fails. A driver that does so says it with
// PowerOnGater; for any other, SetPower waits at the gate before calling the driver.
func AwaitPowerOn(ctx context.Context) error {
	gate, _ := ctx.Value(powerOnGateKey{}).(func(context.Context) error)
	if gate == nil {
		return nil
	}
	return gate(ctx)
}

// PowerOnGater is implemented by a driver whose SetPower calls AwaitPowerOn itself,
// immediately before each power-on it sends (bmc/redfish, bmc/ipmi).
type PowerOnGater interface {
	GatesPowerOn()
}

// powersOn reports whether a may power a machine on.
func (a PowerAction) powersOn() bool { return a == PowerActionOn || a == PowerActionCycle }
