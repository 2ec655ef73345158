package sitelink

import (
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// StatusReport is what an agent tells its control plane on each heartbeat (POST /v1/sync).
type StatusReport struct {
	Site string `json:"site"`
	Node string `json:"node"`
	// Beat is the heartbeat number from the agent's lease fence: the control plane hands it
	// to its lease tick so that a renewal names the heartbeat it answers (BootLeaseState.Beat).
	Beat uint64 `json:"beat"`
	// Discovered is the list of unknown machines, sent only when its digest changed since
	// the last report the control plane answered; DiscoveredDigest is always sent.
	Discovered       []DiscoveredMachine `json:"discovered,omitempty"`
	DiscoveredDigest string              `json:"discovered_digest"`
	// Images is the cache inventory and the state of each pinned image.
	Images []ImageReport `json:"images,omitempty"`
	// Section is the state of the agent's site section ([SiteSection]); nil from an agent
	// that does not report it.
	Section *SectionStatus `json:"section,omitempty"`
	// Counters are the agent's counters by name, for the control plane's view.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// Acked are the ids of commands the agent applied and persisted since its last report.
	Acked []string `json:"acked,omitempty"`
	// BMC are the results of bmc.* commands that ended since the last report the control
	// plane answered; a bmc.transition's machines' results among them, each as it ends.
	BMC []BMCResult `json:"bmc,omitempty"`
	// Transitions is the progress of the bmc.transition commands running, and of those
	// that ended until their result is delivered.
	Transitions []TransitionProgress `json:"transitions,omitempty"`
}

// DiscoveredMachine is one unknown machine of StatusReport.Discovered (DESIGN.md D1).
type DiscoveredMachine struct {
	MAC         string    `json:"mac"`
	ProductUUID string    `json:"product_uuid,omitempty"`
	Arch        string    `json:"arch,omitempty"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Count       uint64    `json:"count"`
	Relay       string    `json:"relay,omitempty"`
}

// Image states of ImageReport.State.
const (
	ImageWarming = "warming"
	ImageReady   = "ready"
	ImageFailed  = "failed"
)

// ImageReport is one cache image's state.
type ImageReport struct {
	SHA256 string `json:"sha256"`
	Format string `json:"format,omitempty"`
	State  string `json:"state"` // ImageWarming, ImageReady or ImageFailed
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason,omitempty"`
}

// SiteSpec is the agent's desired state, the seed's site section of its NodeSpec: the word
// on the site's boot lease and the images its cache pre-warms.
type SiteSpec struct {
	Lease       BootLeaseState `json:"lease"`
	CacheImages []CacheImage   `json:"cache_images,omitempty"`
}

// SyncResponse answers a StatusReport: the agent's SiteSpec and the commands it has not
// acknowledged yet (sent again until it does, so applying one twice must change nothing).
// SiteSpec's fields are inline in the JSON object.
type SyncResponse struct {
	SiteSpec
	Commands []Command `json:"commands,omitempty"`
}

// BootLeaseState is the control plane's word about the site's boot lease for one agent
// (DESIGN.md L3): whether it holds the lease, at which epoch, for how long, and which of
// its heartbeats the renewal answers.
type BootLeaseState struct {
	Holds bool   `json:"holds"`
	Epoch uint64 `json:"epoch"`
	TTLMs int64  `json:"ttl_ms"`
	Beat  uint64 `json:"beat"`
	// Holder is the node id of the agent holding the lease; empty when none does (or the
	// control plane does not say). An agent that does not hold it names it to its operator.
	Holder string `json:"holder,omitempty"`
}

// TTL returns TTLMs as a duration.
func (s BootLeaseState) TTL() time.Duration { return time.Duration(s.TTLMs) * time.Millisecond }

// CacheImage is an image the agent's cache pre-warms, by URL and digest. Its JSON keys are
// capitalised ("URL", "SHA256", "Format"): that is what agents and control planes exchange
// today, and the specification keeps it.
type CacheImage struct {
	URL    string `json:"URL"`
	SHA256 string `json:"SHA256"` // 64 lower-case hex digits
	Format string `json:"Format"` // "raw", "iso", "kernel", "initrd", ...; "" lets the agent choose
}

// Command kinds. The bmc.* kinds carry a BMCCommand.
const (
	// KindPrepareRamdisk adds boot entries (Command.Entries).
	KindPrepareRamdisk = "boot.prepareRamdisk"
	// KindCleanUp removes a workflow's entries (Command.Workflow), or the listed MACs'
	// (Command.MACs).
	KindCleanUp = "boot.cleanUp"

	// KindBMCQuery reads the power state and inspects the machine.
	KindBMCQuery = "bmc.query"
	// KindBMCBoot sets the boot device (BMCCommand.Device, Mode, Persistent).
	KindBMCBoot = "bmc.boot"
	// KindBMCPower runs a power action (BMCCommand.Action).
	KindBMCPower = "bmc.power"
	// KindBMCRotate sets a new password (BMCCommand.NewCredential) for an account
	// (BMCCommand.Username, or the target credential's own).
	KindBMCRotate = "bmc.rotate"
	// KindBMCFirmware updates firmware from the agent's cache (BMCCommand.SHA256,
	// BMCCommand.Components).
	KindBMCFirmware = "bmc.firmware"
	// KindBMCStorage lists the machine's disks, or with BMCCommand.StorageAction creates
	// or deletes a volume or erases a drive. Destructive: a listing only reads (it is not
	// claimed by the agent), but the kind is routed as every destructive one is.
	KindBMCStorage = "bmc.storage"
	// KindBMCMediaInsert inserts a cached image (BMCCommand.SHA256) as virtual media;
	// KindBMCMediaEject ejects it.
	KindBMCMediaInsert = "bmc.mediaInsert"
	KindBMCMediaEject  = "bmc.mediaEject"
	// KindBMCTransition runs a power transition over many machines (Command.Transition):
	// its machines' results are reported as each ends, its progress on each heartbeat
	// (StatusReport.Transitions), and its own result once every machine ended.
	KindBMCTransition = "bmc.transition"
	// KindBMCTransitionAbort aborts the bmc.transition Command.Abort names: its machines
	// still pending take no new action and end aborted.
	KindBMCTransitionAbort = "bmc.transitionAbort"
)

// IsBMCKind reports whether kind is one of the bmc.* command kinds.
func IsBMCKind(kind string) bool {
	switch kind {
	case KindBMCQuery, KindBMCBoot, KindBMCPower, KindBMCRotate, KindBMCFirmware,
		KindBMCStorage, KindBMCMediaInsert, KindBMCMediaEject, KindBMCTransition, KindBMCTransitionAbort:
		return true
	}
	return false
}

// Destructive reports whether a bmc.* kind changes the machine or its BMC. A destructive
// command is claimed (POST /v1/bmc/claim) before it reaches the BMC and is sent at most
// once across a site's agents (DESIGN.md B5); a bmc.transition's steps are claimed each
// under its own id ("ID/machine/step/attempt"). bmc.storage is destructive as the seed
// lists it (its volume and drive changes are claimed; its listing, which only reads, is
// not: bmc.IsDestructive). bmc.query and bmc.transitionAbort are not destructive.
func Destructive(kind string) bool {
	return IsBMCKind(kind) && kind != KindBMCQuery && kind != KindBMCTransitionAbort
}

// Command is one instruction of the control plane. The agent applies it, persists the
// result and acknowledges its id (StatusReport.Acked); a bmc.* command is answered by a
// BMCResult instead.
type Command struct {
	ID       string           `json:"id"`
	Kind     string           `json:"kind"`
	Entries  []ProxyDhcpEntry `json:"entries,omitempty"`  // KindPrepareRamdisk
	Workflow string           `json:"workflow,omitempty"` // KindCleanUp: every entry of this workflow
	MACs     []hwid.MAC       `json:"macs,omitempty"`     // KindCleanUp: these MACs' entries
	// BMC is the body of the bmc.* kinds but bmc.transition and bmc.transitionAbort.
	BMC *BMCCommand `json:"bmc,omitempty"`
	// Transition is the body of bmc.transition.
	Transition *TransitionCommand `json:"transition,omitempty"`
	// Abort is the id of the bmc.transition command a bmc.transitionAbort aborts.
	Abort string `json:"abort,omitempty"`
}

// Architectures a ProxyDhcpEntry may name.
const (
	ArchBIOS     = "BIOS"
	ArchX86UEFI  = "X86_64_EFI"
	ArchARM64EFI = "ARM64_EFI"
)

// ProxyDhcpEntry is one machine the agent may boot (the seed's ProxyDhcpEntry): its PXE MAC,
// SMBIOS UUID when known, boot architecture, workflow and deadline, and the reference of its
// discovery token, which the agent fetches with POST /v1/token. It holds no secret.
type ProxyDhcpEntry struct {
	MAC      hwid.MAC  `json:"mac"`
	UUID     string    `json:"product_uuid,omitempty"` // canonical SMBIOS UUID when known
	Arch     string    `json:"arch"`                   // ArchBIOS, ArchX86UEFI or ArchARM64EFI
	Workflow string    `json:"workflow"`
	NotAfter time.Time `json:"not_after"`
	// TokenRef names the machine's discovery token in the control plane's secret store.
	TokenRef string `json:"token_ref,omitempty"`
	// SanbootSHA256, when set, boots this cached ISO instead of the ramdisk.
	SanbootSHA256 string `json:"sanboot_sha256,omitempty"`
	// LocalBoot, when set, answers the machine "boot from the local disk" at once instead of
	// the ramdisk: a site that keeps the network first in the boot order keeps control
	// without making the firmware wait out DHCP timeouts (ipxe.AnswerLocal).
	LocalBoot bool `json:"local_boot,omitempty"`
	// SecureBoot: boot through shim and the signed GRUB (true) or through iPXE (false); nil
	// leaves it to the agent's configuration.
	SecureBoot *bool `json:"secure_boot,omitempty"`
}

// TokenRequest asks for a machine's discovery token (POST /v1/token), named by the entry's
// workflow and token reference.
type TokenRequest struct {
	Node     string `json:"node"`
	Ref      string `json:"ref"`
	Workflow string `json:"workflow"`
}

// TokenResponse carries the bearer of a discovery token.
type TokenResponse struct {
	Token string `json:"token"`
}

// Validate checks an image as a site's configuration names it: an http(s) URL with a host
// and the digest in its one spelling, 64 lower-case hex digits. The error names the field
// ("URL: ...", "SHA256: ...").
func (im CacheImage) Validate() error {
	u, err := url.Parse(im.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("URL: want an http(s) URL, got %q", im.URL)
	}
	if !sha256RE.MatchString(im.SHA256) {
		return fmt.Errorf("SHA256: want 64 lower-case hex digits, got %q", im.SHA256)
	}
	return nil
}

var sha256RE = regexp.MustCompile(`^[0-9a-f]{64}$`)
