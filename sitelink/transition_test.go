package sitelink_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/sitelink"
)

func transitionCommand(action string, names ...string) sitelink.Command {
	body := &sitelink.TransitionCommand{Action: action}
	for _, n := range names {
		body.Machines = append(body.Machines, sitelink.TransitionMachine{Name: n, Group: "pdu-" + n[:1],
			Target: sitelink.BMCTarget{Driver: "redfish", Address: "https://198.51.100.7/" + n, Credential: "bmc/" + n}})
	}
	return sitelink.Command{ID: "tr-1", Kind: sitelink.KindBMCTransition, Transition: body}
}

func TestBMCTransition(t *testing.T) {
	c := transitionCommand("soft-off", "a1", "b2")
	c.Transition.DeadlineMs = 90_000
	c.Transition.Machines[1].Network = "oob-2"
	c.Transition.Machines[1].Target.CertSHA256 = pin
	got, err := sitelink.BMCTransition(c)
	if err != nil {
		t.Fatal(err)
	}
	pinBytes, _ := hex.DecodeString(pin)
	want := bmc.Transition{ID: "tr-1", Action: bmc.TransitionSoftOff, Deadline: 90 * time.Second, Machines: []bmc.Machine{
		{Name: "a1", Group: "pdu-a", Target: bmc.TargetRef{Driver: "redfish", Address: "https://198.51.100.7/a1", Credential: "bmc/a1"}},
		{Name: "b2", Group: "pdu-b", Network: "oob-2", Target: bmc.TargetRef{Driver: "redfish", Address: "https://198.51.100.7/b2", Credential: "bmc/b2", CertSHA256: pinBytes}},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("transition (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"bmc/a1", "bmc/b2"}, c.Transition.Refs()); diff != "" {
		t.Errorf("refs (-want +got):\n%s", diff)
	}

	many := make([]string, sitelink.MaxTransitionMachines+1)
	for i := range many {
		many[i] = "m" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + strings.Repeat("y", i/26)
	}
	for name, c := range map[string]sitelink.Command{
		"no body":       {ID: "tr-1", Kind: sitelink.KindBMCTransition},
		"another kind":  func() sitelink.Command { c := transitionCommand("on", "a"); c.Kind = sitelink.KindBMCPower; return c }(),
		"no machine":    transitionCommand("on"),
		"too many":      transitionCommand("on", many...),
		"unknown":       transitionCommand("reboot", "a"),
		"twice":         transitionCommand("on", "a", "a"),
		"slash in name": transitionCommand("on", "a/b"),
		"slash in id":   func() sitelink.Command { c := transitionCommand("on", "a"); c.ID = "x/y"; return c }(),
		"negative deadline": func() sitelink.Command {
			c := transitionCommand("soft-off", "a")
			c.Transition.DeadlineMs = -1
			return c
		}(),
		"deadline over a day": func() sitelink.Command {
			c := transitionCommand("soft-off", "a")
			c.Transition.DeadlineMs = 25 * 3600 * 1000
			return c
		}(),
		"bad target": func() sitelink.Command {
			c := transitionCommand("on", "a")
			c.Transition.Machines[0].Target.Address = ""
			return c
		}(),
		"bad pin": func() sitelink.Command {
			c := transitionCommand("on", "a")
			c.Transition.Machines[0].Target.CertSHA256 = "zz"
			return c
		}(),
	} {
		if _, err := sitelink.BMCTransition(c); !errors.Is(err, bmc.ErrInvalid) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}

func TestTransitionResultOf(t *testing.T) {
	for _, tc := range []struct {
		in   bmc.MachineResult
		want sitelink.BMCResult
	}{
		{bmc.MachineResult{Machine: "m1", Status: bmc.MachineDone, Power: bmc.PowerOn, Sends: 1},
			sitelink.BMCResult{ID: "tr-1/m1", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusOK, Power: "on", Transition: "tr-1", Machine: "m1", Sends: 1}},
		{bmc.MachineResult{Machine: "m2", Status: bmc.MachineFailed, Kind: "differs", Reason: "reverted", Power: bmc.PowerOff, Sends: 1},
			sitelink.BMCResult{ID: "tr-1/m2", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusFailed, ErrorKind: "differs", Message: "reverted", Power: "off", Transition: "tr-1", Machine: "m2", Sends: 1}},
		{bmc.MachineResult{Machine: "m3", Status: bmc.MachineUnknown, Kind: "outcome-unknown", Reason: "claimed elsewhere", Resumed: true},
			sitelink.BMCResult{ID: "tr-1/m3", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusUnknown, ErrorKind: "outcome-unknown", Message: "claimed elsewhere", Replayed: true, Transition: "tr-1", Machine: "m3"}},
		{bmc.MachineResult{Machine: "m4", Status: bmc.MachineAborted, Reason: "aborted before on was sent"},
			sitelink.BMCResult{ID: "tr-1/m4", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusAborted, Message: "aborted before on was sent", Transition: "tr-1", Machine: "m4"}},
		{bmc.MachineResult{Machine: "m5", Status: bmc.MachineDone, Forced: true, Sends: 2, Reason: strings.Repeat("é", bmc.MaxMessageLen)},
			sitelink.BMCResult{ID: "tr-1/m5", Kind: sitelink.KindBMCTransition, Status: sitelink.StatusOK, Message: strings.Repeat("é", bmc.MaxMessageLen/2), Transition: "tr-1", Machine: "m5", Forced: true, Sends: 2}},
	} {
		if diff := cmp.Diff(tc.want, sitelink.TransitionResultOf("tr-1", tc.in)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in.Machine, diff)
		}
	}
}

func TestTransitionSummary(t *testing.T) {
	c := transitionCommand("cycle", "a")
	for _, tc := range []struct {
		p          sitelink.TransitionProgress
		status     string
		msgContain string
	}{
		{sitelink.TransitionProgress{Total: 3, Done: 3}, sitelink.StatusOK, "3 done, 0 failed, 0 unknown, 0 aborted, 0 pending of 3"},
		{sitelink.TransitionProgress{Total: 3, Done: 2, Unknown: 1}, sitelink.StatusUnknown, "1 unknown"},
		{sitelink.TransitionProgress{Total: 3, Done: 1, Unknown: 1, Failed: 1}, sitelink.StatusFailed, "1 failed"},
		{sitelink.TransitionProgress{Total: 3, Done: 1, Aborted: 2, Aborting: true}, sitelink.StatusFailed, "2 aborted"},
		{sitelink.TransitionProgress{Total: 3, Done: 1, Pending: 2}, sitelink.StatusFailed, "2 pending"},
	} {
		tc.p.ID = c.ID
		r := sitelink.TransitionSummary(c, tc.p)
		if r.ID != c.ID || r.Kind != sitelink.KindBMCTransition || r.Status != tc.status || !strings.Contains(r.Message, tc.msgContain) ||
			r.Progress == nil || *r.Progress != tc.p {
			t.Errorf("summary of %+v: %+v, want status %s saying %q", tc.p, r, tc.status, tc.msgContain)
		}
	}
}

// TestTransitionKinds: the transition kinds are bmc.* kinds; a transition is destructive
// (routed through the claims), its abort is not (it reaches no BMC).
func TestTransitionKinds(t *testing.T) {
	for kind, destructive := range map[string]bool{
		sitelink.KindBMCTransition:      true,
		sitelink.KindBMCTransitionAbort: false,
	} {
		if !sitelink.IsBMCKind(kind) || sitelink.Destructive(kind) != destructive {
			t.Errorf("%s: IsBMCKind %v, Destructive %v; want true, %v", kind, sitelink.IsBMCKind(kind), sitelink.Destructive(kind), destructive)
		}
	}
}

// FuzzBMCTransition: whatever bmc.transition the control plane sends, BMCTransition either
// refuses it as invalid (a not-sent result naming the command) or returns a valid
// transition under the command's id with its machines, in order, each on a target that
// converts back to itself.
func FuzzBMCTransition(f *testing.F) {
	for _, s := range []string{
		`{"id":"t1","kind":"bmc.transition","transition":{"action":"cycle","machines":[{"name":"m1","target":{"driver":"redfish","address":"https://198.51.100.1","credential":"c"},"group":"pdu-1"}]}}`,
		`{"id":"t2","kind":"bmc.transition","transition":{"action":"soft-off","deadline_ms":60000,"machines":[{"name":"a","target":{"driver":"ipmi","address":"198.51.100.2","credential":"c"},"network":"n1"},{"name":"b","target":{"driver":"redfish","address":"x","credential":"d","cert_sha256":"` + pin + `"}}]}}`,
		`{"id":"t3","kind":"bmc.transition","transition":{"action":"on","machines":[{"name":"a","target":{"driver":"","address":"x"}}]}}`,
		`{"id":"t4","kind":"bmc.transition","transition":{"action":"off","machines":[]}}`,
		`{"id":"t5","kind":"bmc.transitionAbort","abort":"t1"}`,
		`{"id":"t/6","kind":"bmc.transition","transition":{"action":"on","deadline_ms":-5,"machines":[{"name":"a/b","target":{"driver":"r","address":"x"}}]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var c sitelink.Command
		if json.Unmarshal(b, &c) != nil {
			return
		}
		tr, err := sitelink.BMCTransition(c)
		if err != nil {
			if !errors.Is(err, bmc.ErrInvalid) {
				t.Fatalf("%s: error %v is not invalid", b, err)
			}
			if r := sitelink.NotSentResult(c, err); r.ID != c.ID || r.Status != sitelink.StatusNotSent || r.ErrorKind == "" {
				t.Fatalf("%s: not-sent result %+v", b, r)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("%s: transition does not validate: %v", b, err)
		}
		if tr.ID != c.ID || string(tr.Action) != c.Transition.Action || len(tr.Machines) != len(c.Transition.Machines) ||
			tr.Deadline != time.Duration(c.Transition.DeadlineMs)*time.Millisecond {
			t.Fatalf("%s: transition %+v", b, tr)
		}
		for i, m := range tr.Machines {
			w := c.Transition.Machines[i]
			ref, err := w.Target.Ref()
			if err != nil || m.Name != w.Name || m.Group != w.Group || m.Network != w.Network || !cmp.Equal(ref, m.Target) {
				t.Fatalf("%s: machine %d: %+v from %+v (%v)", b, i, m, w, err)
			}
		}
	})
}
