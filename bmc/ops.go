package bmc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
)

// Kind is a command kind of BMC access, as the seed's commands spell it ("bmc.power", ...).
// A host maps its wire commands to an Op with ParseOp.
type Kind string

// Command kinds. Every one but KindQuery is destructive (KindStorage's listing,
// ListStorage, aside: IsDestructive).
const (
	// KindQuery reads the power state and inspects the machine (Query).
	KindQuery Kind = "bmc.query"
	// KindBoot sets the boot device (SetBoot).
	KindBoot Kind = "bmc.boot"
	// KindPower runs a power action (SetPower).
	KindPower Kind = "bmc.power"
	// KindRotate sets a new password for an account (Rotate).
	KindRotate Kind = "bmc.rotate"
	// KindFirmware updates firmware from a URL (Firmware).
	KindFirmware Kind = "bmc.firmware"
	// KindStorage lists the machine's disks (ListStorage), creates and deletes volumes
	// (CreateVolume, DeleteVolume) and erases drives (EraseDrive).
	KindStorage Kind = "bmc.storage"
	// KindMediaInsert inserts an image as virtual media (InsertMedia); KindMediaEject
	// ejects it (EjectMedia).
	KindMediaInsert Kind = "bmc.mediaInsert"
	KindMediaEject  Kind = "bmc.mediaEject"
)

// Kinds lists every command kind.
var Kinds = []Kind{KindQuery, KindBoot, KindPower, KindRotate, KindFirmware, KindStorage, KindMediaInsert, KindMediaEject}

// Valid reports whether k is one of the Kind constants.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }

// Destructive reports whether an operation of kind k may change the machine or its BMC,
// and so is journaled and claimed before it is sent (at most once). False for a kind that
// is not Valid, and for KindQuery. An operation's own is IsDestructive (a ListStorage,
// of the destructive kind bmc.storage, only reads).
func (k Kind) Destructive() bool {
	return k.Valid() && k != KindQuery
}

// Capability names one of the optional driver interfaces an operation needs.
type Capability string

// Capabilities, each the interface of the same name.
const (
	CapPower    Capability = "power"    // PowerController
	CapBoot     Capability = "boot"     // BootController
	CapInspect  Capability = "inspect"  // Inspector
	CapMedia    Capability = "media"    // VirtualMediaController
	CapFirmware Capability = "firmware" // FirmwareUpdater
	CapStorage  Capability = "storage"  // StorageLister
	CapRotate   Capability = "rotate"   // CredentialRotator
)

// Has reports whether d implements capability c.
func Has(d Driver, c Capability) bool {
	var ok bool
	switch c {
	case CapPower:
		_, ok = d.(PowerController)
	case CapBoot:
		_, ok = d.(BootController)
	case CapInspect:
		_, ok = d.(Inspector)
	case CapMedia:
		_, ok = d.(VirtualMediaController)
	case CapFirmware:
		_, ok = d.(FirmwareUpdater)
	case CapStorage:
		_, ok = d.(StorageLister)
	case CapRotate:
		_, ok = d.(CredentialRotator)
	case CapVolumes:
		_, ok = d.(StorageManager)
	}
	return ok
}

// Op is one typed BMC operation: Query, ListStorage, CreateVolume, DeleteVolume,
// EraseDrive, SetPower, SetBoot, Rotate, Firmware, InsertMedia or EjectMedia. It knows its
// command kind (and so, by IsDestructive, whether it is destructive), its name in journals, claims and errors, and which
// capability it needs; Do runs it on a driver
// and Executor.RunOp under the Executor's rules. The set is closed: the library, not each
// caller, maps an operation to the capability that carries it out.
type Op interface {
	// Kind is the operation's command kind.
	Kind() Kind
	// Name names the operation in journals, claim records, errors and logs ("query",
	// "storage", "create-volume", "delete-volume", "erase-drive", "power", "set-boot",
	// "rotate", "firmware", "media-insert", "media-eject").
	Name() string
	// Capability is the driver interface the operation needs.
	Capability() Capability
	// Validate reports an ErrInvalid error for arguments no BMC accepts.
	Validate() error

	do(ctx context.Context, d Driver) (any, error)
}

// ErrNoCapability is wrapped, beside ErrUnsupported, in the *OpError Do returns for a
// driver that lacks the capability an operation needs: nothing was sent to the BMC.
var ErrNoCapability = errors.New("bmc: driver lacks the capability")

// Do runs op on d through the capability it needs, after op.Validate. A driver that lacks
// the capability answers an *OpError of kind ErrUnsupported (matching ErrNoCapability
// too) without contacting the BMC. What the operation read is returned beside its error:
// a QueryResult for Query (partly filled with a *PartialError), a []Disk for ListStorage,
// a Volume for CreateVolume,
// a FirmwareResult for Firmware, nil for the others.
//
// Do runs the operation once, as asked; it neither journals nor claims it. A host that
// must not send a destructive operation twice runs it with Executor.RunOp (or Runner).
func Do(ctx context.Context, d Driver, op Op) (any, error) {
	if op == nil {
		return nil, &OpError{Kind: ErrInvalid, Message: "no operation"}
	}
	if err := op.Validate(); err != nil {
		return nil, err
	}
	if !Has(d, op.Capability()) {
		return nil, noCapability(d, op)
	}
	return op.do(ctx, d)
}

func noCapability(d Driver, op Op) error {
	return &OpError{Driver: d.Name(), Op: op.Name(), Kind: ErrUnsupported, Err: ErrNoCapability,
		Message: "the " + d.Name() + " driver has no " + string(op.Capability()) + " capability"}
}

// Query reads the power state (when the driver has CapPower) and inspects the machine.
// Non-destructive. Its value is a QueryResult.
type Query struct{}

// QueryResult is what a Query read.
type QueryResult struct {
	// Power is the power state, "" when it was not read.
	Power PowerState
	// Inventory is what the inspection found; with a *PartialError, what it read.
	Inventory Inventory
	// Inspected is false when the inspection failed outright.
	Inspected bool
	// Failed names the inspection's parts the BMC did not answer (a *PartialError's).
	Failed []string
}

func (Query) Kind() Kind             { return KindQuery }
func (Query) Name() string           { return "query" }
func (Query) Capability() Capability { return CapInspect }
func (Query) Validate() error        { return nil }
func (q Query) String() string       { return q.Name() }
func (Query) do(ctx context.Context, d Driver) (any, error) {
	var res QueryResult
	var errs []error
	if p, ok := d.(PowerController); ok {
		st, err := p.PowerState(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			res.Power = st
		}
	}
	inv, err := d.(Inspector).Inspect(ctx)
	var pe *PartialError
	if err == nil || errors.As(err, &pe) {
		res.Inventory, res.Inspected = inv, true
	}
	if pe != nil {
		res.Failed = pe.Failed()
	}
	if err != nil {
		errs = append(errs, err)
	}
	return res, errors.Join(errs...)
}

// ListStorage lists the machine's disks. Non-destructive. Its value is a []Disk.
type ListStorage struct{}

func (ListStorage) Kind() Kind             { return KindStorage }
func (ListStorage) Name() string           { return "storage" }
func (ListStorage) Capability() Capability { return CapStorage }
func (ListStorage) Validate() error        { return nil }
func (ListStorage) do(ctx context.Context, d Driver) (any, error) {
	return d.(StorageLister).Storage(ctx)
}

// SetPower runs a power action. Destructive.
type SetPower struct {
	Action PowerAction
}

func (SetPower) Kind() Kind             { return KindPower }
func (SetPower) Name() string           { return "power" }
func (SetPower) Capability() Capability { return CapPower }
func (o SetPower) Validate() error {
	if !o.Action.Valid() {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "unknown power action " + quote(string(o.Action))}
	}
	return nil
}
func (o SetPower) do(ctx context.Context, d Driver) (any, error) {
	if _, gates := d.(PowerOnGater); !gates && o.Action.powersOn() {
		// The driver does not wait at the power-on gate itself: wait here, as close to
		// the send as this side can, and take the gate away so it is not waited at twice.
		if err := AwaitPowerOn(ctx); err != nil {
			return nil, &OpError{Driver: d.Name(), Op: o.Name(), Kind: ErrTimeout, Message: "the power-on ramp's turn did not come before the deadline; nothing sent", Err: err}
		}
		ctx = WithPowerOnGate(ctx, nil)
	}
	return nil, d.(PowerController).SetPower(ctx, o.Action)
}

// SetBoot sets the boot device. Destructive.
type SetBoot struct {
	Device BootDevice
}

func (SetBoot) Kind() Kind             { return KindBoot }
func (SetBoot) Name() string           { return "set-boot" }
func (SetBoot) Capability() Capability { return CapBoot }
func (o SetBoot) Validate() error      { return o.Device.Validate() }
func (o SetBoot) do(ctx context.Context, d Driver) (any, error) {
	return nil, d.(BootController).SetBootDevice(ctx, o.Device)
}

// Rotate sets a new password for a BMC account. Destructive.
//
// Run by Executor.RunOp, its secrets are references: NewCredential names the new
// password, resolved through the Executor's Credentials when the operation is sent, and an
// empty Username is the account of the target's own credential; the target's cached
// credential is dropped afterwards. Run by Do, Username and NewPassword must be set.
// Rotate prints NewPassword redacted with every fmt verb and in slog.
type Rotate struct {
	// Username is the account changed; "" means the account the Executor logs in with.
	Username string
	// NewCredential is the reference of the new password (Executor.RunOp).
	NewCredential string
	// NewPassword is the new password itself; the Executor fills it from NewCredential.
	NewPassword string
}

func (Rotate) Kind() Kind             { return KindRotate }
func (Rotate) Name() string           { return "rotate" }
func (Rotate) Capability() Capability { return CapRotate }

// Validate wants a new credential by reference or a new password.
func (o Rotate) Validate() error {
	if o.NewCredential == "" && o.NewPassword == "" {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "rotation without a new credential"}
	}
	if len(o.NewCredential) > MaxIDLen || len(o.Username) > MaxIDLen {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "username or credential reference too long"}
	}
	return nil
}

func (o Rotate) do(ctx context.Context, d Driver) (any, error) {
	if o.Username == "" || o.NewPassword == "" {
		return nil, &OpError{Driver: d.Name(), Op: o.Name(), Kind: ErrInvalid,
			Message: "rotation without a username or a resolved password (run it through an Executor)"}
	}
	return nil, d.(CredentialRotator).RotatePassword(ctx, o.Username, o.NewPassword)
}

// String implements fmt.Stringer, without the password.
func (o Rotate) String() string {
	return fmt.Sprintf("bmc.Rotate{Username:%q NewCredential:%q NewPassword:REDACTED}", o.Username, o.NewCredential)
}

// GoString implements fmt.GoStringer, without the password.
func (o Rotate) GoString() string { return o.String() }

// Format implements fmt.Formatter: every verb prints String.
func (o Rotate) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(o.String())) }

// LogValue implements slog.LogValuer, without the password.
func (o Rotate) LogValue() slog.Value {
	return slog.GroupValue(slog.String("username", o.Username), slog.String("new_credential", o.NewCredential))
}

// ImageURL gives the URL a BMC fetches an image from. It is called only when the
// operation is sent, never for one answered from a journal or a claim record, so a host
// can mint a short-lived grant there. The URL may carry a secret: it is never logged nor
// put into errors by this package.
type ImageURL func(ctx context.Context) (string, error)

// StaticURL returns an ImageURL that always gives u.
func StaticURL(u string) ImageURL {
	return func(context.Context) (string, error) { return u, nil }
}

func (f ImageURL) url(ctx context.Context, d Driver, op string) (string, error) {
	u, err := f(ctx)
	if err != nil {
		return "", &OpError{Driver: d.Name(), Op: op, Kind: KindOf(err), Message: "no URL for the image", Err: err}
	}
	if u == "" {
		return "", &OpError{Driver: d.Name(), Op: op, Kind: ErrInvalid, Message: "empty image URL"}
	}
	return u, nil
}

// Firmware updates firmware from an image URL and follows the update to its end.
// Destructive. Its value is a FirmwareResult.
type Firmware struct {
	// Image gives the image's URL when the update is sent. Required.
	Image ImageURL
	// Targets are the BMC's ids of the components to update; empty lets the BMC decide.
	Targets []string
}

func (Firmware) Kind() Kind             { return KindFirmware }
func (Firmware) Name() string           { return "firmware" }
func (Firmware) Capability() Capability { return CapFirmware }
func (o Firmware) Validate() error {
	if o.Image == nil {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "firmware update without an image"}
	}
	return nil
}
func (o Firmware) do(ctx context.Context, d Driver) (any, error) {
	u, err := o.Image.url(ctx, d, o.Name())
	if err != nil {
		return nil, err
	}
	return d.(FirmwareUpdater).UpdateFirmware(ctx, FirmwareUpdate{URL: u, Targets: o.Targets})
}

// InsertMedia inserts an image as the machine's virtual CD. Destructive.
type InsertMedia struct {
	// Image gives the image's URL when the operation is sent. Required.
	Image ImageURL
}

func (InsertMedia) Kind() Kind             { return KindMediaInsert }
func (InsertMedia) Name() string           { return "media-insert" }
func (InsertMedia) Capability() Capability { return CapMedia }
func (o InsertMedia) Validate() error {
	if o.Image == nil {
		return &OpError{Op: o.Name(), Kind: ErrInvalid, Message: "media insert without an image"}
	}
	return nil
}
func (o InsertMedia) do(ctx context.Context, d Driver) (any, error) {
	u, err := o.Image.url(ctx, d, o.Name())
	if err != nil {
		return nil, err
	}
	return nil, d.(VirtualMediaController).InsertMedia(ctx, u)
}

// EjectMedia ejects the machine's virtual CD. Destructive.
type EjectMedia struct{}

func (EjectMedia) Kind() Kind             { return KindMediaEject }
func (EjectMedia) Name() string           { return "media-eject" }
func (EjectMedia) Capability() Capability { return CapMedia }
func (EjectMedia) Validate() error        { return nil }
func (EjectMedia) do(ctx context.Context, d Driver) (any, error) {
	return nil, d.(VirtualMediaController).EjectMedia(ctx)
}

var (
	_ Op = Query{}
	_ Op = ListStorage{}
	_ Op = SetPower{}
	_ Op = SetBoot{}
	_ Op = Rotate{}
	_ Op = Firmware{}
	_ Op = InsertMedia{}
	_ Op = EjectMedia{}
	_ Op = CreateVolume{}
	_ Op = DeleteVolume{}
	_ Op = EraseDrive{}
)

// Args are a command's arguments as a wire message carries them (the seed's bmc.*
// command body, its target aside). ParseOp reads the ones its kind uses.
type Args struct {
	// Device, Mode and Persistent for KindBoot (BootTarget, BootMode spellings).
	Device     string
	Mode       string
	Persistent bool
	// Action for KindPower (a PowerAction).
	Action string
	// Username and NewCredential (a reference) for KindRotate.
	Username      string
	NewCredential string
	// Image for KindFirmware and KindMediaInsert: where the BMC fetches the image, asked
	// only when the operation is sent.
	Image ImageURL
	// Components for KindFirmware: the BMC's ids of what it updates.
	Components []string
	// For KindStorage, StorageAction is StorageList (or ""), StorageCreateVolume,
	// StorageDeleteVolume or StorageEraseDrive; Controller the storage controller's id
	// ("" for the only one); Volume the volume deleted; Drives the drives of a volume
	// created, or the one drive erased; RAIDType, VolumeName and CapacityBytes the
	// volume created.
	StorageAction string
	Controller    string
	Volume        string
	Drives        []string
	RAIDType      string
	VolumeName    string
	CapacityBytes int64
}

// ParseOp returns the operation of a command of kind with arguments a, validated. An
// unknown kind or invalid arguments are an *OpError of kind ErrInvalid.
func ParseOp(kind string, a Args) (Op, error) {
	var op Op
	switch Kind(kind) {
	case KindQuery:
		op = Query{}
	case KindStorage:
		var err error
		if op, err = parseStorage(a); err != nil {
			return nil, err
		}
	case KindPower:
		op = SetPower{Action: PowerAction(a.Action)}
	case KindBoot:
		op = SetBoot{Device: BootDevice{Target: BootTarget(a.Device), Mode: BootMode(a.Mode), Persistent: a.Persistent}}
	case KindRotate:
		op = Rotate{Username: a.Username, NewCredential: a.NewCredential}
	case KindFirmware:
		op = Firmware{Image: a.Image, Targets: slices.Clone(a.Components)}
	case KindMediaInsert:
		op = InsertMedia{Image: a.Image}
	case KindMediaEject:
		op = EjectMedia{}
	default:
		return nil, &OpError{Kind: ErrInvalid, Message: "unknown command kind " + quote(kind)}
	}
	if err := op.Validate(); err != nil {
		return nil, err
	}
	return op, nil
}
