package bootevents

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Facts is what the host knows about a machine beyond its timeline, for Explain.
type Facts struct {
	// Entry is set when the host holds a boot entry for the machine; EntryArch and
	// EntryUUID are the entry's, where it names them (HasEntryArch, HasEntryUUID).
	Entry        bool
	EntryArch    hwid.Arch
	HasEntryArch bool
	EntryUUID    hwid.UUID
	HasEntryUUID bool
	// Fence is the boot lease as this agent sees it: the epoch it holds (FenceActive), or
	// the epoch and holder of the lease another agent holds.
	FenceEpoch  uint64
	FenceActive bool
	FenceHolder string
}

// Diagnosis is Explain's answer: a code a program can switch on, the line a person acts
// on, and, for a boot that went through, its path with timings.
type Diagnosis struct {
	// Code is one of the Diag constants.
	Code string `json:"code"`
	// Line is one line naming what happened and what to check.
	Line string `json:"line"`
	// Path is the boot's steps (the ones that went through, and the refusal that ended
	// it), with their time from the boot's start.
	Path []Step `json:"path,omitempty"`
}

// Step is one step of a boot's path.
type Step struct {
	Stage    Stage         `json:"stage"`
	Outcome  Outcome       `json:"outcome"`
	Reason   string        `json:"reason,omitempty"`
	At       time.Duration `json:"at_ns"`                 // since the boot's first event
	Duration time.Duration `json:"duration_ns,omitempty"` // the step's own, where measured
	Bytes    uint64        `json:"bytes,omitempty"`
	Detail   string        `json:"detail,omitempty"`
}

// Diagnosis codes.
const (
	DiagNoDHCP            = "no-dhcp"             // no event of the MAC at all
	DiagUnknown           = "unknown"             // the MAC has no boot entry here
	DiagFenced            = "fenced"              // this agent does not hold the boot lease
	DiagArchMismatch      = "arch-mismatch"       // the machine asked as another architecture than its entry's
	DiagUUIDMismatch      = "uuid-mismatch"       // the machine's SMBIOS UUID is not its entry's
	DiagNonceOtherAddress = "nonce-other-address" // the nonce came back from another address
	DiagNoTFTPAfter4011   = "no-tftp-after-4011"  // answered at 4011, then no TFTP
	DiagNoTFTP            = "no-tftp"             // answered DHCP, then no TFTP
	DiagNo4011            = "no-4011"             // UEFI PXE answered on 67, then never asked at 4011
	DiagNoScript          = "no-script"           // the loader went over TFTP, then no script request
	DiagIPXENoChain       = "ipxe-no-chain"       // iPXE answered with the chain URL, then no script request
	DiagRefused           = "refused"             // another refusal, named in Line
	DiagInProgress        = "in-progress"         // steps went through, the boot is not over
	DiagBooted            = "booted"              // the script (and its assertion) went out
)

// Explain returns the diagnosis of m's newest boot; ok is false when there is no timeline
// of the machine (m is then ignored), which is itself a diagnosis (DiagNoDHCP).
func Explain(m Machine, ok bool, f Facts) Diagnosis {
	b, has := m.Last()
	if !ok || !has {
		if f.Entry {
			return Diagnosis{Code: DiagNoDHCP, Line: "no DHCP request seen from this MAC on any interface: check the relay or the VLAN, and that the machine boots from this NIC"}
		}
		return Diagnosis{Code: DiagNoDHCP, Line: "no DHCP request seen from this MAC on any interface (and it has no boot entry here): check the relay or the VLAN, and the MAC"}
	}
	path := pathOf(b)
	d := diagnose(b, f)
	d.Path = path
	return d
}

// Explain returns Explain's diagnosis of mac's timeline in t.
func (t *Timeline) Explain(mac hwid.MAC, f Facts) Diagnosis {
	m, ok := t.Machine(mac)
	return Explain(m, ok, f)
}

func pathOf(b Boot) []Step {
	p := make([]Step, 0, len(b.Events))
	for _, e := range b.Events {
		p = append(p, Step{Stage: e.Stage, Outcome: e.Outcome, Reason: e.Reason, At: e.Time.Sub(b.Start), Duration: e.Duration, Bytes: e.Bytes, Detail: e.Detail})
	}
	return p
}

func diagnose(b Boot, f Facts) Diagnosis {
	// The decisive event: the last refusal no later success of the same or a later stage
	// overcame.
	var last *Event
	for i := range b.Events {
		e := &b.Events[i]
		if e.Reason == "ignored" {
			continue // a message not for a proxy (the site's server's REQUEST) decides nothing
		}
		switch e.Outcome {
		case OutcomeRefused, OutcomeFailed:
			// a component's generic word after the host's own reason for the same request
			// ("declined" after "arch-mismatch", the script's "mismatch" after it, the
			// script's "unbound" after the binding's "nonce-other-address"), or a DHCP
			// message not for a proxy after a refusal, does not hide it
			if last == nil || !generic(last, e) {
				last = e
			}
		case OutcomeOK:
			if last != nil && e.Stage >= last.Stage {
				last = nil
			}
		}
	}
	if last != nil {
		return refusal(last, f)
	}
	var ok4011, okDHCP, tftp, tftpOK, script, assertion, httpBoot, uefiPXE, ipxeDHCP bool
	var tftpFile string
	for _, e := range b.Events {
		if e.Outcome != OutcomeOK {
			continue
		}
		switch e.Stage {
		case StageBoot4011:
			ok4011 = true
		case StageDHCPv4, StageDHCPv6:
			okDHCP = true
			httpBoot = httpBoot || (e.HasArch && isHTTP(e.Arch))
			ipxeDHCP = ipxeDHCP || e.IPXE
			uefiPXE = uefiPXE || (e.Stage == StageDHCPv4 && !e.IPXE && e.HasArch && e.Arch != hwid.ArchBIOS && !isHTTP(e.Arch))
		case StageTFTP:
			tftp, tftpOK, tftpFile = true, true, e.Detail
		case StageHTTP, StageGRUB:
			tftp = true // the firmware or loader reached us after DHCP
		case StageScript:
			script = true
		case StageAssertion:
			assertion = true
		}
	}
	for _, e := range b.Events {
		if e.Stage == StageTFTP {
			tftp = true
		}
	}
	total := b.Last.Sub(b.Start)
	switch {
	case script && assertion:
		return Diagnosis{Code: DiagBooted, Line: "booted: DHCP to assertion in " + dur(total) + ": " + summary(b)}
	case script:
		return Diagnosis{Code: DiagBooted, Line: "booted: DHCP to script in " + dur(total) + ": " + summary(b)}
	case ok4011 && !tftp && !httpBoot:
		return Diagnosis{Code: DiagNoTFTPAfter4011, Line: "answered at 4011 but the firmware never asked for the boot file over TFTP: check that UDP 69 from the machine reaches this agent"}
	case uefiPXE && !ok4011 && !tftp:
		// EDK2 asks the boot server at 4011 after a proxy offer; it asked elsewhere.
		return Diagnosis{Code: DiagNo4011, Line: "answered the UEFI firmware on port 67 but it never asked this agent at 4011: it took another server's PXE offer (a DHCP server sending option 60 PXEClient without option 43 sends EDK2 to that offer's next server on 4011): make this agent the next server there, or stop that server sending option 60"}
	case okDHCP && !tftp && httpBoot:
		return Diagnosis{Code: DiagNoTFTP, Line: "answered DHCP but the firmware never fetched its boot file over HTTP: check that the machine reaches this agent's HTTP port"}
	case okDHCP && !tftp:
		return Diagnosis{Code: DiagNoTFTP, Line: "answered DHCP but the firmware never asked for the boot file over TFTP: check that UDP 69 from the machine reaches this agent"}
	case ipxeDHCP:
		return Diagnosis{Code: DiagIPXENoChain, Line: "answered iPXE's DHCP with the chain script's URL but it never asked for it: if another DHCP server's offer carries option 60 PXEClient (without option 43), iPXE takes that server as its ProxyDHCP server and asks it at 4011 instead, so stop that server sending option 60; else check that the machine reaches this agent's HTTP port"}
	case tftpOK:
		return Diagnosis{Code: DiagNoScript, Line: "the boot file " + quoteOr(tftpFile) + " went out over TFTP but no script request followed: check the machine's console and that it reaches this agent's HTTP port"}
	}
	return Diagnosis{Code: DiagInProgress, Line: "in progress: " + summary(b)}
}

// generic says e is a component's generic word for the refusal last already named.
func generic(last, e *Event) bool {
	switch e.Reason {
	case "declined", "mismatch":
		return last.Stage == e.Stage
	case "ignored": // a message not for a proxy (the site's server's REQUEST) decides nothing
		return last.Stage.dhcp() && e.Stage.dhcp()
	case "unbound":
		return last.Stage == StageBind && (e.Stage == StageScript || e.Stage == StageGRUB)
	}
	return false
}

func refusal(e *Event, f Facts) Diagnosis {
	at := e.Stage.human()
	switch {
	case e.Reason == "fenced" || e.Stage == StageFence:
		return Diagnosis{Code: DiagFenced, Line: "fenced: this agent does not hold the boot lease" + fence(f)}
	case e.Reason == "unknown":
		if f.Entry {
			return Diagnosis{Code: DiagUnknown, Line: "unknown machine when it asked over " + at + " (" + when(e) + "); it has an entry now: boot it again"}
		}
		return Diagnosis{Code: DiagUnknown, Line: "unknown machine: it asked over " + at + " but has no boot entry here: enroll it or check its MAC"}
	case e.Reason == "arch-mismatch":
		entry := "another"
		if f.HasEntryArch {
			entry = ArchName(f.EntryArch)
		}
		asked := "another architecture"
		if e.HasArch {
			asked = ArchName(e.Arch)
		}
		return Diagnosis{Code: DiagArchMismatch, Line: "entry's arch " + entry + ", machine asked as " + asked + ": fix the entry or the firmware's boot mode"}
	case e.Reason == "uuid-mismatch":
		sent, want := "none", "another"
		if e.HasUUID {
			sent = e.UUID.String()
		}
		if f.HasEntryUUID {
			want = f.EntryUUID.String()
		}
		return Diagnosis{Code: DiagUUIDMismatch, Line: "machine's SMBIOS UUID " + sent + " is not its entry's " + want + ": fix the entry, or check which board answers to this MAC"}
	case e.Reason == "nonce-other-address":
		return Diagnosis{Code: DiagNonceOtherAddress, Line: at + " refused: the nonce was presented from " + e.Peer.Addr().String() + ", another address: another host may be replaying this machine's boot"}
	case e.Reason == "nonce-lapsed":
		return Diagnosis{Code: DiagRefused, Line: at + " refused: the nonce lapsed before the machine presented it: the machine is slow between DHCP and " + at + ", or a stale request was replayed"}
	}
	line := at + " " + e.Outcome.String()
	if e.Reason != "" {
		line += ": " + e.Reason
	}
	if e.Detail != "" {
		line += " (" + e.Detail + ")"
	}
	return Diagnosis{Code: DiagRefused, Line: line}
}

func fence(f Facts) string {
	switch {
	case f.FenceHolder != "" && f.FenceEpoch != 0:
		return " (epoch " + strconv.FormatUint(f.FenceEpoch, 10) + " held by " + Printable(f.FenceHolder, 64) + ")"
	case f.FenceHolder != "":
		return " (held by " + Printable(f.FenceHolder, 64) + ")"
	case f.FenceEpoch != 0 && !f.FenceActive:
		return " (epoch " + strconv.FormatUint(f.FenceEpoch, 10) + ")"
	case f.FenceActive:
		return " at the time (it holds epoch " + strconv.FormatUint(f.FenceEpoch, 10) + " now): boot it again"
	}
	return ""
}

func when(e *Event) string { return e.Time.UTC().Format(time.RFC3339) }

// summary is the boot's path on one line: each step and its time from the start.
func summary(b Boot) string {
	var s strings.Builder
	for i, e := range b.Events {
		if i > 0 {
			s.WriteString(", ")
		}
		s.WriteString(e.Stage.String())
		if e.Outcome != OutcomeOK {
			s.WriteString(" " + e.Outcome.String())
			if e.Reason != "" {
				s.WriteString(" " + e.Reason)
			}
		}
		if e.Detail != "" && (e.Stage == StageTFTP || e.Stage == StageHTTP) {
			s.WriteString(" " + e.Detail)
		}
		s.WriteString(" +" + dur(e.Time.Sub(b.Start)))
		if e.Duration > 0 || e.Bytes > 0 {
			s.WriteString(" (")
			if e.Duration > 0 {
				s.WriteString(dur(e.Duration))
			}
			if e.Bytes > 0 {
				if e.Duration > 0 {
					s.WriteString(", ")
				}
				s.WriteString(strconv.FormatUint(e.Bytes, 10) + " B")
			}
			s.WriteString(")")
		}
	}
	if b.EventsDropped > 0 {
		fmt.Fprintf(&s, " (%d events not kept)", b.EventsDropped)
	}
	return s.String()
}

func dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.String()
}

func quoteOr(s string) string {
	if s == "" {
		return "(unnamed)"
	}
	return strconv.Quote(s)
}

func (s Stage) human() string {
	switch s {
	case StageDHCPv4:
		return "DHCPv4"
	case StageDHCPv6:
		return "DHCPv6"
	case StageBoot4011:
		return "4011"
	case StageTFTP:
		return "TFTP"
	case StageBind, StageScript:
		return "script"
	case StageHTTP:
		return "HTTP"
	case StageGRUB:
		return "GRUB configuration"
	}
	return s.String()
}

func isHTTP(a hwid.Arch) bool { return strings.HasSuffix(a.String(), "-http") }

// ArchName returns the name a person knows an architecture by: "BIOS", "x86-64 UEFI",
// "ARM64 UEFI HTTP", ...; the hwid name for the rare ones.
func ArchName(a hwid.Arch) string {
	switch a {
	case hwid.ArchBIOS:
		return "BIOS"
	case hwid.ArchBIOSHTTP:
		return "BIOS HTTP"
	case hwid.ArchIA32EFI:
		return "x86 UEFI"
	case hwid.ArchIA32EFIHTTP:
		return "x86 UEFI HTTP"
	case hwid.ArchX86_64EFI, hwid.ArchEFIBC:
		return "x86-64 UEFI"
	case hwid.ArchX86_64EFIHTTP, hwid.ArchEFIBCHTTP:
		return "x86-64 UEFI HTTP"
	case hwid.ArchARM64EFI:
		return "ARM64 UEFI"
	case hwid.ArchARM64EFIHTTP:
		return "ARM64 UEFI HTTP"
	}
	return a.String()
}
