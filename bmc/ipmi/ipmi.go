package ipmi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bettercompute/siteboot/bmc"
	"github.com/bettercompute/siteboot/hwid"
	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/command/chassis"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Name is the driver's name.
const Name = "ipmi"

// Defaults used when a Config field is zero.
const (
	DefaultPort    = 623
	DefaultTimeout = 2 * time.Second // one request attempt
	DefaultRetries = 2               // further attempts after a request times out
	DefaultChannel = 1               // the LAN channel inspected for the BMC's address
	// DefaultCycleOffWait bounds the wait for the machine to report off when a power cycle
	// is sent as power down, then power up (see SetPower).
	DefaultCycleOffWait = 30 * time.Second
	// DefaultPowerTimeout bounds the wait, after a power action the BMC accepted, for the
	// machine to report the state asked for (as the Redfish driver's default).
	DefaultPowerTimeout = 2 * time.Minute
	// cyclePoll is how often the power state is read during these waits.
	cyclePoll = 200 * time.Millisecond
)

// DefaultCipherSuites are tried in order: 17 (HMAC-SHA256, AES-CBC-128) first, 3
// (HMAC-SHA1, AES-CBC-128) for BMCs without 17.
var DefaultCipherSuites = []int{17, 3}

// MaxPasswordLen is the longest password IPMI 2.0 stores.
const MaxPasswordLen = 20

// Config is the driver's configuration, shared by every target it opens. It implements
// bmc.Opener: reg.Register("ipmi", ipmi.Config{}).
type Config struct {
	// CipherSuites are the RMCP+ cipher suite ids tried in order when opening a session;
	// nil means DefaultCipherSuites. Pin one where the BMC cannot list its suites.
	CipherSuites []int
	// Timeout bounds one request attempt; zero means DefaultTimeout.
	Timeout time.Duration
	// Retries is how many times a request that got no answer is sent again; zero means
	// DefaultRetries, a negative value none.
	Retries int
	// Channel is the LAN channel whose address Inspect reports; zero means DefaultChannel.
	Channel uint8
	// CycleOffWait bounds how long a power cycle the BMC refuses (and that is therefore sent
	// as power down, then power up) waits for the machine to report off; zero means
	// DefaultCycleOffWait. The context's deadline bounds it too.
	CycleOffWait time.Duration
	// PowerTimeout bounds the wait, after the BMC accepted a power action, for the machine
	// to report the state asked for (off after off and force-off, on after on, cycle and
	// reset), read with Get Chassis Status every 200 ms; zero means DefaultPowerTimeout.
	// The context's deadline bounds it too.
	PowerTimeout time.Duration
	// Logger receives session events; nil discards.
	Logger *slog.Logger
	// OnOp, when set, is called after each operation with its outcome; it must not block.
	OnOp func(bmc.OpEvent)
}

// Open implements bmc.Opener.
func (c Config) Open(ctx context.Context, t bmc.Target) (bmc.Driver, error) {
	d, err := Dial(ctx, c, t)
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Driver is an open IPMI 2.0 (lanplus) session with one BMC. Its methods are safe for
// concurrent use; requests are sent one at a time.
type Driver struct {
	cfg    Config
	target bmc.Target
	host   string
	port   int
	log    *slog.Logger

	mu     sync.Mutex // serialises requests and guards the fields below
	c      *client.Client
	closed bool

	userStep func(step string) // tests: each step of AddUser, in order
}

var (
	_ bmc.Driver            = (*Driver)(nil)
	_ bmc.PowerController   = (*Driver)(nil)
	_ bmc.BootController    = (*Driver)(nil)
	_ bmc.Inspector         = (*Driver)(nil)
	_ bmc.CredentialRotator = (*Driver)(nil)
)

// Dial opens a lanplus session with the BMC at t.Address (host or host:port; port 623
// when none), trying the configured cipher suites in order.
func Dial(ctx context.Context, cfg Config, t bmc.Target) (d *Driver, err error) {
	if cfg.OnOp != nil {
		start := time.Now()
		defer func() {
			cfg.OnOp(bmc.OpEvent{Driver: Name, Op: "open", Addr: t.Address, Duration: time.Since(start), Err: err})
		}()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	if cfg.Channel == 0 {
		cfg.Channel = DefaultChannel
	}
	if cfg.CycleOffWait <= 0 {
		cfg.CycleOffWait = DefaultCycleOffWait
	}
	if cfg.PowerTimeout <= 0 {
		cfg.PowerTimeout = DefaultPowerTimeout
	}
	if len(cfg.CipherSuites) == 0 {
		cfg.CipherSuites = DefaultCipherSuites
	}
	d = &Driver{cfg: cfg, target: t, log: cfg.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	host, port, err := splitAddr(t.Address)
	if err != nil {
		return nil, d.opErr("open", bmc.ErrInvalid, err.Error(), nil)
	}
	d.host, d.port = host, port
	var suites []types.CipherSuiteID
	for _, s := range cfg.CipherSuites {
		if s < 0 || s > 255 {
			return nil, d.opErr("open", bmc.ErrInvalid, "cipher suite "+strconv.Itoa(s)+" out of range", nil)
		}
		suites = append(suites, types.CipherSuiteID(s))
	}
	if len(t.Username) > 16 {
		return nil, d.opErr("open", bmc.ErrInvalid, "IPMI user names have at most 16 characters", nil)
	}
	c, err := client.NewClient(host, port, t.Username, t.Password)
	if err != nil {
		return nil, d.opErr("open", bmc.ErrInvalid, "", err)
	}
	c.WithTimeout(cfg.Timeout).WithRetry(cfg.Retries).WithCipherSuiteID(suites...)
	if len(suites) == 1 {
		// WithCipherSuiteID with one id pins it; with several it tries them in order.
		c.WithCipherSuiteID(suites[0])
	}
	if err := c.Connect(ctx); err != nil {
		// A failed Connect leaves the UDP socket open; closing it is all that is left to do.
		closeQuietly(c)
		return nil, d.classify("open", err, true)
	}
	d.c = c
	d.log.Debug("ipmi: session opened", "addr", d.target.Address)
	return d, nil
}

func closeQuietly(c *client.Client) {
	defer func() { _ = recover() }()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = c.Close(ctx)
}

func splitAddr(addr string) (string, int, error) {
	if addr == "" {
		return "", 0, errors.New("empty address")
	}
	host, ps, err := net.SplitHostPort(addr)
	if err != nil {
		if ap, perr := netip.ParseAddr(addr); perr == nil {
			return ap.String(), DefaultPort, nil
		}
		return addr, DefaultPort, nil
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, errors.New("bad port in address")
	}
	if host == "" {
		return "", 0, errors.New("address needs a host")
	}
	return host, p, nil
}

// Name implements bmc.Driver.
func (d *Driver) Name() string { return Name }

// Close closes the session (bounded by the driver's timeout) and its socket. A second
// Close returns nil; go-ipmi's own Close is never called twice.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Timeout)
	defer cancel()
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("ipmi: close: %v", r)
			}
		}()
		err = d.c.Close(ctx)
	}()
	if err != nil {
		return d.classify("close", err, false)
	}
	return nil
}

// call runs fn with the session, serialised and refused after Close.
func (d *Driver) call(ctx context.Context, op string, fn func(c *client.Client) error) (err error) {
	if d.cfg.OnOp != nil {
		start := time.Now()
		defer func() {
			d.cfg.OnOp(bmc.OpEvent{Driver: Name, Op: op, Addr: d.target.Address, Duration: time.Since(start), Err: err})
		}()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return d.opErr(op, bmc.ErrClosed, "", nil)
	}
	if err := ctx.Err(); err != nil {
		return d.opErr(op, bmc.ErrTimeout, "deadline passed before sending", err)
	}
	if err := fn(d.c); err != nil {
		return d.classify(op, err, false)
	}
	return nil
}

func (d *Driver) opErr(op string, kind error, msg string, err error) *bmc.OpError {
	return &bmc.OpError{Driver: Name, Op: op, Addr: d.target.Address, Kind: kind, Message: msg, Err: err}
}

// classify maps go-ipmi errors to kinds. connecting says whether the session was being
// opened: silence then means nothing answers at the address.
func (d *Driver) classify(op string, err error, connecting bool) error {
	var oe *bmc.OpError
	if errors.As(err, &oe) {
		return err
	}
	e := d.opErr(op, bmc.ErrRefused, "", err)
	var rs *types.RmcpStatusError
	var re *types.ResponseError
	var netErr net.Error
	switch {
	case connecting && isNoSession(err):
		e.Kind, e.Message = bmc.ErrNoSession, "the BMC has no free session (close other sessions or wait for them to time out)"
	case errors.Is(err, client.ErrRAKPAuthentication), mentionsAny(err, authPhrases...):
		e.Kind, e.Message = bmc.ErrAuth, "the BMC did not accept the password"
	case errors.As(err, &rs):
		e.Code = fmt.Sprintf("rmcp+ status %#02x", uint8(rs.StatusCode()))
		e.Message = rs.StatusCode().String()
		switch rs.StatusCode() {
		case types.RmcpStatusCodeNoResToCreateSess:
			e.Kind = bmc.ErrNoSession
		case types.RmcpStatusCodeUnauthorizedName, types.RmcpStatusCodeInvalidRole,
			types.RmcpStatusCodeUnauthorizedRoleOfPriLevel, types.RmcpStatusCodeInvalidNameLength:
			e.Kind = bmc.ErrAuth
		case types.RmcpStatusCodeNoCipherSuiteMatch, types.RmcpStatusCodeInvalidAuthAlg,
			types.RmcpStatusCodeInvalidIntegrityAlg, types.RmcpStatusCodeInvalidConfidentAlg:
			e.Kind, e.Message = bmc.ErrUnsupported, e.Message+" (try other CipherSuites)"
		}
	case mentionsAny(err, suitePhrases...):
		e.Kind, e.Message = bmc.ErrUnsupported, "the BMC accepts none of the cipher suites tried (set CipherSuites)"
	case errors.As(err, &re):
		cc := re.CompletionCode()
		e.Code = fmt.Sprintf("%#02x", uint8(cc))
		e.Message = cc.String()
		switch cc {
		case types.CodeInvalidCommand, types.CodeInvalidCommandForLUN, types.CodeParameterOutOfRange,
			types.CodeRequestedDataNotPresent:
			e.Kind = bmc.ErrUnsupported
		case types.CodeInsufficientPrivilege:
			e.Kind = bmc.ErrAuth
		}
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		e.Kind, e.Message = bmc.ErrUnreachable, "nothing answers IPMI at this address"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		e.Kind, e.Message = bmc.ErrTimeout, "no answer before the deadline"
	case errors.As(err, &netErr) && netErr.Timeout(), isNoAnswer(err):
		e.Kind, e.Message = bmc.ErrTimeout, "the BMC did not answer"
		if connecting {
			e.Kind, e.Message = bmc.ErrUnreachable, "no IPMI answer at this address (wrong address or port, or a firewall)"
		}
	default:
		var dnsErr *net.DNSError
		if errors.As(err, &dnsErr) {
			e.Kind, e.Message = bmc.ErrUnreachable, "cannot resolve the BMC's name"
		}
	}
	return e
}

// go-ipmi reports the failures of each cipher suite it tried joined into one message with
// %v, which drops the error chain; these phrases of its messages (and of the RMCP+ status
// names) are what is left to classify them by.
var (
	authPhrases = []string{"RAKP authentication failed", "RMCP+ status 0x0d", "RMCP+ status 0x09",
		"RMCP+ status 0x0a", "RMCP+ status 0x0c"}
	suitePhrases   = []string{"RMCP+ status 0x11", "RMCP+ status 0x04", "RMCP+ status 0x05", "RMCP+ status 0x10"}
	noAnswerPhrase = []string{"no UDP datagram matched", "no matching IPMI response", "UDP read timed out"}
)

func isNoAnswer(err error) bool { return mentionsAny(err, noAnswerPhrase...) }

// isNoSession recognises a BMC out of sessions while a session is opened: RMCP+ status
// 0x01 (insufficient resources), or the 2-byte Open Session reply ipmi_sim sends then
// (tag and status only), which go-ipmi cannot decode and reports as "unpacked data is too
// short (2/8)".
func isNoSession(err error) bool {
	if mentionsAny(err, "RMCP+ status 0x01", "Insufficient resources to create a session") {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "Open Session") && strings.Contains(s, "unpack session setup response failed") &&
		strings.Contains(s, "too short")
}

func mentionsAny(err error, phrases ...string) bool {
	s := err.Error()
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// PowerState implements bmc.PowerController with Get Chassis Status.
func (d *Driver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	st := bmc.PowerUnknown
	err := d.call(ctx, "power-state", func(c *client.Client) error {
		res, err := c.GetChassisStatus(ctx)
		if err != nil {
			return err
		}
		st = bmc.PowerOff
		if res.PowerIsOn {
			st = bmc.PowerOn
		}
		return nil
	})
	return st, err
}

// SetPower implements bmc.PowerController with Chassis Control. Asking for the state
// the machine is already in sends nothing; a cycle of a machine that is off powers it on.
// After the BMC accepts, the power state is read back (Get Chassis Status) until it is
// the one asked for (on after on, cycle and reset; off after off and force-off), for at
// most PowerTimeout: a machine that does not get there (an OS that ignores a graceful
// off) is ErrTimeout, saying what it reports. This is the Redfish driver's contract.
func (d *Driver) SetPower(ctx context.Context, a bmc.PowerAction) error {
	if !a.Valid() {
		return d.opErr("power", bmc.ErrInvalid, "unknown power action "+string(a), nil)
	}
	return d.call(ctx, "power", func(c *client.Client) error {
		res, err := c.GetChassisStatus(ctx)
		if err != nil {
			return err
		}
		on := res.PowerIsOn
		var ctl chassis.ChassisControl
		switch a {
		case bmc.PowerActionOn:
			if on {
				return nil
			}
			ctl = chassis.ChassisControlPowerUp
		case bmc.PowerActionOff:
			if !on {
				return nil
			}
			ctl = chassis.ChassisControlSoftShutdown
		case bmc.PowerActionForceOff:
			if !on {
				return nil
			}
			ctl = chassis.ChassisControlPowerDown
		case bmc.PowerActionCycle:
			ctl = chassis.ChassisControlPowerCycle
			if !on {
				ctl = chassis.ChassisControlPowerUp
			}
		case bmc.PowerActionReset:
			ctl = chassis.ChassisControlHardReset
		}
		if ctl == chassis.ChassisControlPowerUp || ctl == chassis.ChassisControlPowerCycle {
			if err := d.awaitPowerOn(ctx, ctl); err != nil {
				return err
			}
		}
		_, err = c.ChassisControl(ctx, ctl)
		if err != nil && ctl == chassis.ChassisControlPowerCycle && refusesCycle(err) {
			d.log.Debug("ipmi: power cycle refused; sending power down, then power up", "addr", d.target.Address, "err", err)
			if err := d.offThenOn(ctx, c); err != nil {
				return err
			}
			return d.waitPower(ctx, c, true, "power up")
		}
		if err != nil {
			return err
		}
		return d.waitPower(ctx, c, a != bmc.PowerActionOff && a != bmc.PowerActionForceOff, controlNames[ctl])
	})
}

var controlNames = map[chassis.ChassisControl]string{
	chassis.ChassisControlPowerUp: "power up", chassis.ChassisControlPowerDown: "power down",
	chassis.ChassisControlSoftShutdown: "soft shutdown", chassis.ChassisControlPowerCycle: "power cycle",
	chassis.ChassisControlHardReset: "hard reset",
}

// waitPower reads the power state until it is on (wantOn) or off, for at most
// PowerTimeout and ctx's deadline.
func (d *Driver) waitPower(ctx context.Context, c *client.Client, wantOn bool, sent string) error {
	want := map[bool]string{true: "on", false: "off"}
	wait, cancel := context.WithTimeout(ctx, d.cfg.PowerTimeout)
	defer cancel()
	tick := time.NewTicker(cyclePoll)
	defer tick.Stop()
	last := "unknown"
	for {
		res, err := c.GetChassisStatus(wait)
		if err == nil {
			if res.PowerIsOn == wantOn {
				return nil
			}
			last = want[res.PowerIsOn]
		}
		select {
		case <-wait.Done():
			return d.opErr("power", bmc.ErrTimeout, "the BMC accepted "+sent+" but the machine still reports "+last+
				" after "+d.cfg.PowerTimeout.String()+"; "+want[wantOn]+" was asked for", wait.Err())
		case <-tick.C:
		}
	}
}

// refusesCycle reports whether err is a BMC's answer that it does not do Chassis Control
// power cycle: 0xcc (invalid data field: virtualbmc, pyghmi, some real BMCs), 0xd5 (not
// supported in the present state) or 0xd6 (sub-function disabled).
func refusesCycle(err error) bool {
	var re *types.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	switch re.CompletionCode() {
	case types.CodeRequestDataFieldInvalid, types.CodeNotSupported, types.CodeSubFnDisabled:
		return true
	}
	return false
}

// offThenOn is a power cycle made of power down, a wait until the machine reports off
// (bounded by CycleOffWait and ctx), then power up. If it never reports off, power up is
// not sent: the error says so, and the machine may be off.
func (d *Driver) offThenOn(ctx context.Context, c *client.Client) error {
	if _, err := c.ChassisControl(ctx, chassis.ChassisControlPowerDown); err != nil {
		return err
	}
	wait, cancel := context.WithTimeout(ctx, d.cfg.CycleOffWait)
	defer cancel()
	tick := time.NewTicker(cyclePoll)
	defer tick.Stop()
	for {
		res, err := c.GetChassisStatus(wait)
		if err == nil && !res.PowerIsOn {
			break
		}
		select {
		case <-wait.Done():
			return d.opErr("power", bmc.ErrTimeout,
				"power cycle sent as power down, then power up: the machine did not report off within "+
					d.cfg.CycleOffWait.String()+"; power up not sent", wait.Err())
		case <-tick.C:
		}
	}
	if err := d.awaitPowerOn(ctx, chassis.ChassisControlPowerUp); err != nil {
		return err
	}
	_, err := c.ChassisControl(ctx, chassis.ChassisControlPowerUp)
	return err
}

// awaitPowerOn waits at ctx's power-on gate (bmc.AwaitPowerOn) before ctl is sent.
func (d *Driver) awaitPowerOn(ctx context.Context, ctl chassis.ChassisControl) error {
	if err := bmc.AwaitPowerOn(ctx); err != nil {
		return d.opErr("power", bmc.ErrTimeout, "the site's power-on ramp gave no turn before the deadline; "+controlNames[ctl]+" not sent", err)
	}
	return nil
}

// GatesPowerOn implements bmc.PowerOnGater: SetPower waits at the context's power-on gate
// immediately before each power up or power cycle it sends.
func (d *Driver) GatesPowerOn() {}

var selectors = map[bmc.BootTarget]types.BootDeviceSelector{
	bmc.BootNone:      types.BootDeviceSelectorNoOverride,
	bmc.BootPXE:       types.BootDeviceSelectorForcePXE,
	bmc.BootDisk:      types.BootDeviceSelectorForceHardDrive,
	bmc.BootCD:        types.BootDeviceSelectorForceCDROM,
	bmc.BootBIOSSetup: types.BootDeviceSelectorForceBIOSSetup,
}

// SetBootDevice implements bmc.BootController with Set System Boot Options (boot flags,
// parameter 5). IPMI has no UEFI HTTP boot selector: BootHTTP is ErrUnsupported.
// BootModeAuto is sent as legacy, IPMI's default. The boot flags are read back afterwards
// (Get System Boot Options), as the Redfish driver reads its override back: a BMC that
// answered success but kept another device (virtualbmc keeps the old one for "BIOS setup"
// and "none") is an ErrDiffers error naming what it kept. Only the device selector is
// compared: some BMCs (ipmi_sim) keep neither the EFI nor the persistent bit.
func (d *Driver) SetBootDevice(ctx context.Context, b bmc.BootDevice) error {
	if err := b.Validate(); err != nil {
		oe := err.(*bmc.OpError)
		oe.Driver, oe.Addr = Name, d.target.Address
		return oe
	}
	sel, ok := selectors[b.Target]
	if !ok {
		return d.opErr("set-boot", bmc.ErrUnsupported, "IPMI cannot select boot target "+string(b.Target), nil)
	}
	bootType := types.BIOSBootTypeLegacy
	if b.Mode == bmc.BootModeUEFI {
		bootType = types.BIOSBootTypeEFI
	}
	return d.call(ctx, "set-boot", func(c *client.Client) error {
		if err := c.SetBootDevice(ctx, sel, bootType, b.Persistent); err != nil {
			return err
		}
		p := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, p); err != nil {
			return err
		}
		if p.BootDeviceSelector != sel {
			return d.opErr("set-boot", bmc.ErrDiffers, "the BMC accepted boot device "+string(b.Target)+
				" but kept "+string(targetOf(p.BootDeviceSelector))+
				" (some BMCs ignore IPMI's boot options, iDRAC10 among them: set it over Redfish)", nil)
		}
		return nil
	})
}

// targetOf names a boot device selector as a bmc.BootTarget ("ipmi-selector-N" for one
// it has no name for).
func targetOf(sel types.BootDeviceSelector) bmc.BootTarget {
	for t, s := range selectors {
		if s == sel {
			return t
		}
	}
	return bmc.BootTarget("ipmi-selector-" + strconv.Itoa(int(sel)))
}

// BootDevice reads the boot flags back (Get System Boot Options, parameter 5): the
// override's target. Some BMCs (ipmi_sim) do not keep the
// EFI and persistent bits, so only the target is reported.
func (d *Driver) BootDevice(ctx context.Context) (bmc.BootTarget, error) {
	var target bmc.BootTarget
	err := d.call(ctx, "get-boot", func(c *client.Client) error {
		p := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, p); err != nil {
			return err
		}
		// The valid bit is not checked: ipmi_sim clears it yet keeps the selector, and
		// ipmitool reports the selector the same way.
		target = targetOf(p.BootDeviceSelector)
		return nil
	})
	return target, err
}

// Inspect implements bmc.Inspector: the system GUID, and the BMC's own MAC and IPv4
// address on the configured LAN channel where the BMC reports them. IPMI cannot list the
// host's NICs: NICsKnown is false and NICs empty.
//
// Each part is read on its own: when the BMC refuses one (virtualbmc answers Get System
// GUID with 0xc1), the others are still returned, with a *bmc.PartialError naming the
// parts that failed ("system-guid", "lan-address", "lan-mac"). Only when every part fails
// is the error an *bmc.OpError of the first failure's kind. A failure of the session
// itself (no answer, closed) ends the inspection at once.
//
// The GUID's 16 bytes are returned as received in UUIDRaw and read in the SMBIOS byte
// order (first three fields little-endian) in UUID. ipmitool prints the raw bytes fully
// reversed (UUIDRaw.Reversed()).
func (d *Driver) Inspect(ctx context.Context) (bmc.Inventory, error) {
	var inv bmc.Inventory
	err := d.call(ctx, "inspect", func(c *client.Client) error {
		var failed []bmc.PartError
		// part reads one part; a refusal of it is noted and the inspection goes on, any
		// other failure (no answer) ends it.
		part := func(name string, fn func() error) error {
			err := fn()
			if err == nil {
				return nil
			}
			ce := d.classify("inspect", err, false)
			switch bmc.KindOf(ce) {
			case bmc.ErrRefused, bmc.ErrUnsupported, bmc.ErrAuth:
				failed = append(failed, bmc.PartError{Part: name, Err: ce})
				return nil
			}
			return ce
		}
		if err := part("system-guid", func() error {
			g, err := c.GetSystemGUID(ctx)
			if err != nil {
				return err
			}
			inv.UUIDRaw = hwid.UUID(g.GUID)
			inv.UUID = inv.UUIDRaw.SMBIOS()
			inv.HasUUID = true
			return nil
		}); err != nil {
			return err
		}
		if err := part("lan-address", func() error {
			ip := &types.LanConfigParam_IP{}
			if err := c.GetLanConfigParamFor(ctx, d.cfg.Channel, ip); err != nil {
				return err
			}
			if a, ok := netip.AddrFromSlice(ip.IP.To4()); ok && !a.IsUnspecified() {
				inv.BMCAddrs = append(inv.BMCAddrs, a)
			}
			return nil
		}); err != nil {
			return err
		}
		if err := part("lan-mac", func() error {
			mac := &types.LanConfigParam_MAC{}
			if err := c.GetLanConfigParamFor(ctx, d.cfg.Channel, mac); err != nil {
				return err
			}
			if m, err := hwid.MACFromBytes(mac.MAC); err == nil {
				inv.BMCMAC = m
			}
			return nil
		}); err != nil {
			return err
		}
		switch {
		case len(failed) == 0:
			return nil
		case len(failed) == 3:
			var first *bmc.OpError
			if !errors.As(failed[0].Err, &first) {
				return failed[0].Err
			}
			oe := *first
			oe.Message = strings.TrimPrefix(oe.Message+"; every part failed: system-guid, lan-address, lan-mac", "; ")
			return &oe
		}
		return &bmc.PartialError{Driver: Name, Op: "inspect", Addr: d.target.Address, Parts: failed}
	})
	return inv, err
}

// RotatePassword implements bmc.CredentialRotator with Set User Password, finding the
// user id by name (never user 1, the anonymous user, nor a slot named "(Empty User)"),
// and reads it back with Test Password (a mismatch is ErrDiffers). Passwords longer than 16 bytes are stored in the 20-byte form; longer
// than MaxPasswordLen is ErrInvalid. The open session stays valid; the driver keeps the new
// password when it is its own account.
func (d *Driver) RotatePassword(ctx context.Context, username, newPassword string) error {
	if username == "" || freeSlot(username) || newPassword == "" || len(newPassword) > MaxPasswordLen {
		return d.opErr("rotate-password", bmc.ErrInvalid, "a user name and a password of 1 to 20 bytes are required", nil)
	}
	err := d.call(ctx, "rotate-password", func(c *client.Client) error {
		_, maxID, err := userSlots(ctx, c)
		if err != nil {
			return err
		}
		for id := 2; id <= maxID; id++ { // user 1 is the anonymous user
			u, err := c.GetUsername(ctx, uint8(id))
			if err != nil {
				continue // unused ids answer an error on some BMCs
			}
			if u.Username != username {
				continue
			}
			long := len(newPassword) > 16
			if _, err = c.SetUserPassword(ctx, uint8(id), newPassword, long); err != nil {
				return err
			}
			// Read back: a BMC that took the password and stored something else fails here.
			if _, err = c.TestUserPassword(ctx, uint8(id), newPassword, long); err != nil {
				e := d.classify("rotate-password", err, false)
				var oe *bmc.OpError
				if errors.As(e, &oe) {
					oe.Kind = bmc.ErrDiffers
					oe.Message = "the BMC accepted the new password but does not test it as set: " + oe.Message
				}
				return e
			}
			return nil
		}
		return d.opErr("rotate-password", bmc.ErrInvalid, "the BMC has no user named "+username, nil)
	})
	if err == nil && username == d.target.Username {
		d.mu.Lock()
		d.target.Password = newPassword
		d.mu.Unlock()
	}
	return err
}
