package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/bettercompute/siteboot/hwid"
)

// Link is how the agent talks to its control plane. The agent calls Sync every heartbeat
// and keeps serving from the last desired state while Sync fails, until its fence says stop.
type Link interface {
	// Sync sends the agent's report (with the heartbeat number the lease fence stamped) and
	// returns the control plane's desired state for this agent.
	Sync(ctx context.Context, r Report) (Desired, error)
	// Token returns the bearer of a machine's discovery token, named by the entry's
	// workflow and token reference. ErrTokenNotReady means "ask again later".
	Token(ctx context.Context, node, workflow, ref string) (string, error)
}

// ErrTokenNotReady is returned by Link.Token while the control plane has no token yet.
var ErrTokenNotReady = errors.New("agent: discovery token not ready")

// Report is what the agent tells the control plane on each heartbeat.
type Report struct {
	Site string `json:"site"`
	Node string `json:"node"`
	// Beat is the heartbeat number from the lease fence: the control plane hands it to its
	// lease tick so a renewal names the heartbeat it answers.
	Beat uint64 `json:"beat"`
	// Discovered is the list of unknown machines, sent only when its digest changed since
	// the last report the control plane acknowledged (DiscoveredDigest always).
	Discovered       []Discovered `json:"discovered,omitempty"`
	DiscoveredDigest string       `json:"discovered_digest"`
	// Images is the cache inventory and the status of each pinned image.
	Images []ImageReport `json:"images,omitempty"`
	// Counters are the components' counters by name, for the control plane's view.
	Counters map[string]uint64 `json:"counters,omitempty"`
	// Acked are the ids of commands the agent applied and persisted since its last report.
	Acked []string `json:"acked,omitempty"`
	// BMC are the results of bmc.* commands finished since the last report the control
	// plane answered, by command id (see BMCResult).
	BMC []BMCResult `json:"bmc,omitempty"`
}

// Discovered is one unknown machine, as the status report lists it.
type Discovered struct {
	MAC         string    `json:"mac"`
	ProductUUID string    `json:"product_uuid,omitempty"`
	Arch        string    `json:"arch,omitempty"`
	FirstSeen   time.Time `json:"first_seen"`
	LastSeen    time.Time `json:"last_seen"`
	Count       uint64    `json:"count"`
	Relay       string    `json:"relay,omitempty"`
}

// ImageReport is one cache image's state.
type ImageReport struct {
	SHA256 string `json:"sha256"`
	Format string `json:"format,omitempty"`
	State  string `json:"state"` // warming, ready, failed
	Bytes  int64  `json:"bytes"`
	Reason string `json:"reason,omitempty"`
}

// Desired is the control plane's desired state for one agent, and the commands it has not
// seen acknowledged yet.
type Desired struct {
	Lease       LeaseWord `json:"lease"`
	CacheImages []Image   `json:"cache_images,omitempty"`
	Commands    []Command `json:"commands,omitempty"`
}

// Command kinds.
const (
	// CommandPrepare adds boot entries (the seed's boot.prepareRamdisk).
	CommandPrepare = "boot.prepareRamdisk"
	// CommandCleanUp removes a workflow's entries, or the listed MACs' (boot.cleanUp).
	CommandCleanUp = "boot.cleanUp"
)

// Command is one instruction of the control plane. The agent applies it, persists the result
// and acknowledges its id in the next report; until then the control plane sends it again,
// so applying one twice must change nothing.
type Command struct {
	ID       string     `json:"id"`
	Kind     string     `json:"kind"`
	Entries  []Entry    `json:"entries,omitempty"`  // CommandPrepare
	Workflow string     `json:"workflow,omitempty"` // CommandCleanUp: every entry of this workflow
	MACs     []hwid.MAC `json:"macs,omitempty"`     // CommandCleanUp: these MACs' entries

	// BMC is the body of the bmc.* kinds: the BMC and the operation.
	BMC *BMCCommand `json:"bmc,omitempty"`
}

// LeaseWord is the control plane's word about the site's boot lease (BootLeaseState).
type LeaseWord struct {
	Holds bool   `json:"holds"`
	Epoch uint64 `json:"epoch"`
	TTLMs int64  `json:"ttl_ms"`
	Beat  uint64 `json:"beat"`
}

// HTTPLink is a Link over HTTP and JSON:
//
//	POST BASE/v1/sync   Report -> Desired
//	POST BASE/v1/token  {"node","workflow","ref"} -> {"token"}; 409 while not ready
type HTTPLink struct {
	Base   string       // the control plane's base URL
	Client *http.Client // nil: a client with Timeout 10 s
}

var _ Link = (*HTTPLink)(nil)

// Sync implements Link.
func (l *HTTPLink) Sync(ctx context.Context, r Report) (Desired, error) {
	var d Desired
	err := l.post(ctx, "/v1/sync", r, &d)
	return d, err
}

// Token implements Link.
func (l *HTTPLink) Token(ctx context.Context, node, workflow, ref string) (string, error) {
	var out struct {
		Token string `json:"token"`
	}
	err := l.post(ctx, "/v1/token", map[string]string{"node": node, "workflow": workflow, "ref": ref}, &out)
	if err != nil {
		return "", err
	}
	return out.Token, nil
}

// maxReplyBytes bounds what the agent reads from its control plane.
const maxReplyBytes = 8 << 20

func (l *HTTPLink) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	u, err := url.JoinPath(l.Base, path)
	if err != nil {
		return fmt.Errorf("agent: control url: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := l.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("agent: control plane: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return fmt.Errorf("agent: control plane: %w", err)
	}
	switch {
	case resp.StatusCode == http.StatusConflict:
		return ErrTokenNotReady
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("agent: control plane %s: %s", path, resp.Status)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("agent: control plane %s: %w", path, err)
	}
	return nil
}
