package bootevents

import (
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"strconv"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Stage is the step of a boot an event is about.
type Stage uint8

// Stages, in the order a boot usually passes them.
const (
	StageNone      Stage = iota
	StageDHCPv4          // "dhcpv4": a DHCPv4 request on port 67
	StageDHCPv6          // "dhcpv6": a DHCPv6 request on port 547
	StageBoot4011        // "4011": the PXE boot-server request on port 4011 (v4, and EDK2's v6 one)
	StageTFTP            // "tftp": a TFTP read
	StageBind            // "bind": a request claimed against the nonce of its DHCP answer
	StageScript          // "script": the iPXE script over HTTP (/boot/)
	StageHTTP            // "http": another file over HTTP (a loader, a RAM disk, a cached image)
	StageGRUB            // "grub": a GRUB configuration (Secure Boot)
	StageCache           // "cache": an image cache grant issued, served or refused
	StageAssertion       // "assertion": a discovery assertion signed for the boot
	StageBMC             // "bmc": an operation on the machine's BMC
	StageFence           // "fence": the boot lease refused the work
	StageConsole         // "console": a line of the machine's own console (syslog)
	numStages
)

var stageNames = [numStages]string{
	"", "dhcpv4", "dhcpv6", "4011", "tftp", "bind", "script", "http", "grub", "cache",
	"assertion", "bmc", "fence", "console",
}

// String returns the stage's name, as listed with the constants.
func (s Stage) String() string {
	if s < numStages {
		return stageNames[s]
	}
	return "stage-" + strconv.Itoa(int(s))
}

// MarshalText returns the stage's name.
func (s Stage) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses a stage's name; an unknown name is ErrBadName.
func (s *Stage) UnmarshalText(b []byte) error {
	for i, n := range stageNames {
		if n == string(b) {
			*s = Stage(i)
			return nil
		}
	}
	return &NameError{Kind: "stage", Name: clip(string(b))}
}

// dhcp reports whether s is a DHCP stage (67, 547 or 4011).
func (s Stage) dhcp() bool { return s == StageDHCPv4 || s == StageDHCPv6 || s == StageBoot4011 }

// Outcome is what the component decided.
type Outcome uint8

// Outcomes.
const (
	OutcomeNone    Outcome = iota
	OutcomeOK              // "ok": answered, served, signed, bound
	OutcomeRefused         // "refused": a decision to say no (silence, a 403, a TFTP error)
	OutcomeFailed          // "failed": the work started and did not finish (a transfer cut short)
	OutcomeLog             // "log": a record with no decision (a console line)
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"", "ok", "refused", "failed", "log"}

// String returns the outcome's name, as listed with the constants.
func (o Outcome) String() string {
	if o < numOutcomes {
		return outcomeNames[o]
	}
	return "outcome-" + strconv.Itoa(int(o))
}

// MarshalText returns the outcome's name.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText parses an outcome's name; an unknown name is ErrBadName.
func (o *Outcome) UnmarshalText(b []byte) error {
	for i, n := range outcomeNames {
		if n == string(b) {
			*o = Outcome(i)
			return nil
		}
	}
	return &NameError{Kind: "outcome", Name: clip(string(b))}
}

// BootID names one boot of a machine across DHCP, TFTP and HTTP: derived from the nonce
// the DHCP answer named (BootIDOf), so every component that sees the nonce names the same
// boot without the nonce itself, a one-time credential, ever leaving the component. The
// zero BootID is "no boot id" (a request that carried no nonce).
type BootID [8]byte

// BootIDOf returns the boot id of nonce: the first 8 bytes of its SHA-256. The nonce
// cannot be recovered from it. The empty nonce gives the zero BootID.
func BootIDOf(nonce string) BootID {
	var id BootID
	if nonce == "" {
		return id
	}
	sum := sha256.Sum256([]byte(nonce))
	copy(id[:], sum[:])
	if id.IsZero() { // never the "none" value
		id[7] = 1
	}
	return id
}

// IsZero reports whether id is "no boot id".
func (id BootID) IsZero() bool { return id == BootID{} }

// String returns 16 lowercase hexadecimal digits, "" for the zero BootID.
func (id BootID) String() string {
	if id.IsZero() {
		return ""
	}
	return hex.EncodeToString(id[:])
}

// MarshalText returns String's form.
func (id BootID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText parses String's form; "" is the zero BootID; anything else is ErrBadBootID.
func (id *BootID) UnmarshalText(b []byte) error {
	p, err := ParseBootID(string(b))
	if err != nil {
		return err
	}
	*id = p
	return nil
}

// ParseBootID parses String's form (16 hexadecimal digits, either case); "" is the zero
// BootID. Anything else is a *NameError wrapping ErrBadBootID.
func ParseBootID(s string) (BootID, error) {
	var id BootID
	if s == "" {
		return id, nil
	}
	if len(s) != 2*len(id) {
		return id, &NameError{Kind: "boot id", Name: clip(s), Err: ErrBadBootID}
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return BootID{}, &NameError{Kind: "boot id", Name: clip(s), Err: ErrBadBootID}
	}
	return id, nil
}

// Event is one decision a component made about a machine.
type Event struct {
	// Time is when the decision was made. Zero means "now" to a Timeline (its clock).
	Time time.Time `json:"time"`
	// MAC is the machine's. Zero when the component does not know it (TFTP, a console
	// line): a Timeline then finds it by Peer's address.
	MAC hwid.MAC `json:"mac"`
	// BootID is the boot the decision belongs to, where the request carried a nonce.
	BootID BootID `json:"boot_id,omitzero"`
	// Stage and Outcome say what was decided.
	Stage   Stage   `json:"stage"`
	Outcome Outcome `json:"outcome"`
	// Reason is the word the component's counters use for the decision ("unknown",
	// "fenced", "nonce-other-address", ...); "" or the component's word for success
	// ("answered", "bound") when Outcome is OutcomeOK.
	Reason string `json:"reason,omitempty"`
	// Peer is the address the request came from (a relay's for a relayed DHCP request).
	Peer netip.AddrPort `json:"peer,omitzero"`
	// Addr is the machine's own address where the component learned it (the address an
	// answer went to, a DHCP request's ciaddr), so later events naming only an address
	// are put in this machine's timeline.
	Addr netip.Addr `json:"addr,omitzero"`
	// Arch is the architecture the machine asked as, when HasArch.
	Arch    hwid.Arch `json:"-"`
	HasArch bool      `json:"-"`
	// UUID is the SMBIOS UUID the machine sent, when HasUUID.
	UUID    hwid.UUID `json:"-"`
	HasUUID bool      `json:"-"`
	// IPXE is set when the request came from iPXE rather than the firmware.
	IPXE bool `json:"ipxe,omitempty"`
	// Bytes is what was sent (a file, a reply); Duration how long the work took.
	Bytes    uint64        `json:"bytes,omitempty"`
	Duration time.Duration `json:"duration_ns,omitempty"`
	// Detail is a short free text: the file asked for, an entry's expected value, a
	// console line. Never a secret: components name a file, not its token.
	Detail string `json:"detail,omitempty"`
}

// Sink receives events. Emit is called on the component's own goroutine, on the path of
// a request: it must not block and must not keep e's strings beyond their bounds. A
// component's Sink field is nil when nobody listens, and the component then builds no
// event at all.
type Sink interface {
	Emit(e Event)
}

// SinkFunc adapts a function to a Sink.
type SinkFunc func(e Event)

// Emit calls f(e).
func (f SinkFunc) Emit(e Event) { f(e) }

// Tee returns a Sink that hands each event to every non-nil sink in turn, or nil when
// there is none (so a component stays off), or the one sink when there is one.
func Tee(sinks ...Sink) Sink {
	var t tee
	for _, s := range sinks {
		if s != nil {
			t = append(t, s)
		}
	}
	switch len(t) {
	case 0:
		return nil
	case 1:
		return t[0]
	}
	return t
}

type tee []Sink

func (t tee) Emit(e Event) {
	for _, s := range t {
		s.Emit(e)
	}
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
