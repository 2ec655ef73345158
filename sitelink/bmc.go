package sitelink

import (
	"fmt"
	"log/slog"
)

// BMCCommand is the body of a bmc.* command: the BMC it goes to and the operation's
// arguments. It holds no secret: credentials are named by reference and fetched with
// POST /v1/bmc/credential by the agent the command is routed to.
type BMCCommand struct {
	Target BMCTarget `json:"target"`
	// Device ("pxe", "http", "cd", "disk", "bios-setup", "none"), Mode ("", "uefi",
	// "legacy") and Persistent (false: the next boot only) for bmc.boot.
	Device     string `json:"device,omitempty"`
	Mode       string `json:"mode,omitempty"`
	Persistent bool   `json:"persistent,omitempty"`
	// Action for bmc.power ("on", "off", "force-off", "cycle", "reset").
	Action string `json:"action,omitempty"`
	// Username is the account bmc.rotate changes ("" the target credential's own);
	// NewCredential names the new secret.
	Username      string `json:"username,omitempty"`
	NewCredential string `json:"new_credential,omitempty"`
	// SHA256 is the cache image of bmc.firmware and bmc.mediaInsert.
	SHA256 string `json:"sha256,omitempty"`
	// Components are the BMC's ids of what bmc.firmware updates; empty lets the BMC decide.
	Components []string `json:"components,omitempty"`
	// StorageAction picks bmc.storage's operation: "" or "list" lists the disks (it only
	// reads); "create-volume", "delete-volume" and "erase-drive" change the machine, each
	// claimed and read back (bmc.CreateVolume, bmc.DeleteVolume, bmc.EraseDrive).
	StorageAction string `json:"storage_action,omitempty"`
	// Controller is the storage controller's id ("" for the system's only one with
	// volumes); Volume the volume delete-volume deletes; Drives the drives of the volume
	// create-volume makes, or the one drive erase-drive erases; RAIDType ("RAID1", ...),
	// VolumeName and CapacityBytes (zero: all it can) the volume create-volume makes.
	Controller    string   `json:"controller,omitempty"`
	Volume        string   `json:"volume,omitempty"`
	Drives        []string `json:"drives,omitempty"`
	RAIDType      string   `json:"raid_type,omitempty"`
	VolumeName    string   `json:"volume_name,omitempty"`
	CapacityBytes int64    `json:"capacity_bytes,omitempty"`
}

// Refs returns the credential references the command names: its target's, and the new
// one of a rotation.
func (c BMCCommand) Refs() []string {
	refs := []string{c.Target.Credential}
	if c.NewCredential != "" {
		refs = append(refs, c.NewCredential)
	}
	return refs
}

// BMCTarget names a BMC: its driver ("redfish", "ipmi"), its address and the reference of
// its credential.
type BMCTarget struct {
	Driver     string `json:"driver"`
	Address    string `json:"address"`
	Credential string `json:"credential"`
	// CertSHA256 pins the BMC's TLS certificate (64 hex digits), Redfish only.
	CertSHA256 string `json:"cert_sha256,omitempty"`
	// Insecure skips TLS verification for this BMC alone.
	Insecure bool `json:"insecure,omitempty"`
}

// Outcome statuses (BMCResult.Status, Outcome.Status), as package bmc spells them; a
// transition's machine may also end StatusAborted.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusUnknown = "unknown"
	StatusNotSent = "not-sent"
)

// BMCResult is how one bmc.* command ended, reported by command id in StatusReport.BMC.
type BMCResult struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Status is StatusOK, StatusFailed, StatusUnknown or StatusNotSent.
	Status string `json:"status"`
	// ErrorKind is the failure's kind ("auth", "timeout", "refused", ...); Code and
	// Message are the BMC's code and what it said.
	ErrorKind string `json:"error_kind,omitempty"`
	Code      string `json:"code,omitempty"`
	Message   string `json:"message,omitempty"`
	// Replayed: the outcome came from the agent's journal or the control plane's claim
	// record; nothing was sent this time.
	Replayed bool `json:"replayed,omitempty"`
	// Power is the power state bmc.query read.
	Power string `json:"power,omitempty"`
	// Inventory is what bmc.query's inspection found.
	Inventory *BMCInventory `json:"inventory,omitempty"`
	// Disks are what bmc.storage listed.
	Disks []Disk `json:"disks,omitempty"`
	// Firmware is how bmc.firmware's update task ended.
	Firmware *FirmwareResult `json:"firmware,omitempty"`
	// Volume is the volume a bmc.storage create-volume made, as read back.
	Volume *Volume `json:"volume,omitempty"`
	// BootKept: a persistent bmc.boot the BMC would not keep (it has no persistent
	// override) was set for the next boot, and the agent keeps it by arming it once again
	// before each power-on it sends to that BMC (until another bmc.boot there, or its
	// restart).
	BootKept bool `json:"boot_kept,omitempty"`
	// Transition and Machine name the bmc.transition and its machine a machine's result
	// (ID "TRANSITION/MACHINE") is for; Forced says a soft-off cut the power after its
	// deadline, Sends counts the action's sends.
	Transition string `json:"transition,omitempty"`
	Machine    string `json:"machine,omitempty"`
	Forced     bool   `json:"forced,omitempty"`
	Sends      int    `json:"sends,omitempty"`
	// Progress is a bmc.transition's count of its machines by state, in its own result.
	Progress *TransitionProgress `json:"progress,omitempty"`
}

// Outcome returns the result's outcome.
func (r BMCResult) Outcome() Outcome {
	return Outcome{Status: r.Status, Kind: r.ErrorKind, Code: r.Code, Message: r.Message}
}

// BMCInventory is what bmc.query's inspection found.
type BMCInventory struct {
	UUID         string   `json:"uuid,omitempty"`
	Manufacturer string   `json:"manufacturer,omitempty"`
	Model        string   `json:"model,omitempty"`
	Serial       string   `json:"serial,omitempty"`
	NICsKnown    bool     `json:"nics_known"`
	MACs         []string `json:"macs,omitempty"`
	HostAddrs    []string `json:"host_addrs,omitempty"`
	BMCAddrs     []string `json:"bmc_addrs,omitempty"`
	BMCMAC       string   `json:"bmc_mac,omitempty"`
	// Failed names the parts of the inspection the BMC did not answer.
	Failed []string `json:"failed,omitempty"`
}

// Disk is a storage device bmc.storage listed. Its JSON keys are capitalised, as agents
// send them today.
type Disk struct {
	Name          string `json:"Name"`
	Model         string `json:"Model"`
	Serial        string `json:"Serial"`
	CapacityBytes int64  `json:"CapacityBytes"`
	Controller    string `json:"Controller"`
	Health        string `json:"Health"`
}

// Volume is a logical volume of a storage controller, as bmc.storage create-volume read it
// back.
type Volume struct {
	Controller    string   `json:"controller"`
	ID            string   `json:"id"`
	Name          string   `json:"name,omitempty"`
	RAIDType      string   `json:"raid_type,omitempty"`
	CapacityBytes int64    `json:"capacity_bytes"`
	Drives        []string `json:"drives,omitempty"`
}

// FirmwareResult is how a firmware update task ended. Its JSON keys are capitalised, as
// agents send them today.
type FirmwareResult struct {
	Task     string   `json:"Task"`
	State    string   `json:"State"`
	Messages []string `json:"Messages"`
}

// ClaimRequest claims a destructive bmc.* command (POST /v1/bmc/claim) or reports how a
// claimed one ended (POST /v1/bmc/report, with Outcome).
type ClaimRequest struct {
	Node string `json:"node"`
	// ID is the command's id; Op the operation ("power", "set-boot", ...).
	ID string `json:"id"`
	Op string `json:"op"`
	// Journal identifies the agent's journal: a claim is granted again only to the same
	// node with the same journal (an answer that was lost).
	Journal string `json:"journal"`
	// Outcome is set in a report, and only there.
	Outcome *Outcome `json:"outcome,omitempty"`
}

// Claim states of Grant.State.
const (
	ClaimNone     = ""
	ClaimIssued   = "issued"
	ClaimGranted  = "granted"
	ClaimReported = "reported"
)

// Grant answers a claim. Its JSON keys are capitalised, as control planes send them today.
type Grant struct {
	// Granted: the agent may send the operation.
	Granted bool `json:"Granted"`
	// State, Node and Outcome describe the claim record when not granted: issued to
	// another node, granted to another, or reported (Outcome holds the recorded outcome).
	State   string  `json:"State"`
	Node    string  `json:"Node"`
	Outcome Outcome `json:"Outcome"`
}

// Outcome is how an operation ended. Its JSON keys are capitalised, as agents send them
// today.
type Outcome struct {
	Status  string `json:"Status"` // StatusOK, StatusFailed, StatusUnknown, StatusNotSent
	Kind    string `json:"Kind"`
	Code    string `json:"Code"`
	Message string `json:"Message"`
}

// CredentialRequest asks for the BMC credential ref names (POST /v1/bmc/credential).
type CredentialRequest struct {
	Node string `json:"node"`
	Ref  string `json:"ref"`
}

// Credential is a BMC credential as the control plane answers it. It prints redacted with
// every fmt verb and in slog; keep it in memory only.
type Credential struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

const redacted = "sitelink.Credential{REDACTED}"

// String implements fmt.Stringer, redacted.
func (Credential) String() string { return redacted }

// GoString implements fmt.GoStringer, redacted.
func (Credential) GoString() string { return redacted }

// Format implements fmt.Formatter: every verb prints the redacted form.
func (Credential) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(redacted)) }

// LogValue implements slog.LogValuer, redacted.
func (Credential) LogValue() slog.Value { return slog.StringValue(redacted) }

var (
	_ fmt.Formatter  = Credential{}
	_ slog.LogValuer = Credential{}
)
