package sitelink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"unicode/utf8"

	"github.com/bettercompute/siteboot/sitetls"
)

// Peer is the agent a request comes from: the node and site of its verified certificate,
// or, with Handler.Insecure, the ones the request names (Verified false; Site is empty
// except in a StatusReport).
type Peer struct {
	Site, Node string
	Verified   bool
}

// Server is the control plane's side of the heartbeat and the token. Handler calls it only
// for a request from the node it names, with a body that decoded and passed validation.
// Return ErrForbidden for a node that is not enrolled, ErrNotReady for a token not minted
// yet; any error outside the binding's errors is answered 503.
type Server interface {
	Sync(ctx context.Context, peer Peer, r StatusReport) (SyncResponse, error)
	Token(ctx context.Context, peer Peer, q TokenRequest) (TokenResponse, error)
}

// BMCServer is the control plane's side of BMC access: the claim protocol and credentials
// by reference. A credential must go only to the node a live command naming it is routed to,
// and a claim be granted only to that node: answer ErrForbidden otherwise.
type BMCServer interface {
	Claim(ctx context.Context, peer Peer, q ClaimRequest) (Grant, error)
	ReportClaim(ctx context.Context, peer Peer, q ClaimRequest) error
	Credential(ctx context.Context, peer Peer, q CredentialRequest) (Credential, error)
}

// Refusal is why Handler refused a request before it reached the Server.
type Refusal string

// Refusals.
const (
	// RefusedNoIdentity: no verified client certificate naming a node.
	RefusedNoIdentity Refusal = "no-identity"
	// RefusedOtherNode: the request names another node, or another site, than the
	// certificate's.
	RefusedOtherNode Refusal = "other-node"
)

// Handler is the HTTP binding for a control plane: it routes the five POSTs, takes the
// caller from its verified client certificate (sitetls.NodeFrom), refuses a request in
// another node's or site's name, decodes and validates the body within its bound, calls
// the Server and encodes the answer. An error answer carries only a code (Error), never an
// error's text. Serve it over mutual TLS (sitetls.Credentials.ServerConfig).
type Handler struct {
	// Server answers sync and token requests. Required.
	Server Server
	// BMC answers the /v1/bmc/ requests; nil answers them 404.
	BMC BMCServer
	// Insecure trusts the node (and site) each request names, for agents on plain http in
	// a lab: anyone who reaches the handler can then speak for any node.
	Insecure bool
	// OnRefused, when set, is called for each request refused before it reached the
	// Server or BMC (a host's counters).
	OnRefused func(r *http.Request, why Refusal)
	// Logger logs refusals and Server errors; nil discards.
	Logger *slog.Logger
}

var _ http.Handler = (*Handler)(nil)

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	for _, op := range operations {
		if r.URL.Path != op.path {
			continue
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, Error{Code: "method-not-allowed"})
			return
		}
		if op.bmc && h.BMC == nil {
			writeError(w, ErrNotFound)
			return
		}
		h.serve(w, r, op)
		return
	}
	writeError(w, ErrNotFound)
}

func (h *Handler) log() *slog.Logger {
	if h.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return h.Logger
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, why Refusal, attrs ...any) {
	if h.OnRefused != nil {
		h.OnRefused(r, why)
	}
	h.log().Warn("sitelink: request refused", append([]any{"reason", string(why), "path", r.URL.Path, "remote", r.RemoteAddr}, attrs...)...)
	writeError(w, ErrForbidden)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, op operation) {
	var id sitetls.Identity
	if !h.Insecure {
		var err error
		if id, err = sitetls.NodeFrom(r); err != nil {
			h.refuse(w, r, RefusedNoIdentity)
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, op.max)
	// auth checks the node (and site, when the request names one) against the certificate
	// and returns the peer.
	auth := func(site, node string) (Peer, bool) {
		if h.Insecure {
			return Peer{Site: site, Node: node}, true
		}
		if id.Node != node || (site != "" && id.Site != site) {
			h.refuse(w, r, RefusedOtherNode, "identity", id.String(), "named_site", site, "named_node", node)
			return Peer{}, false
		}
		return Peer{Site: id.Site, Node: id.Node, Verified: true}, true
	}
	ctx := r.Context()
	var (
		out any
		err error
	)
	switch op.path {
	case PathSync:
		var q StatusReport
		if !h.decode(w, r, &q) {
			return
		}
		if err := validateReport(q); err != nil {
			h.bad(w, r, err)
			return
		}
		peer, ok := auth(q.Site, q.Node)
		if !ok {
			return
		}
		out, err = h.Server.Sync(ctx, peer, q)
	case PathToken:
		var q TokenRequest
		if !h.decode(w, r, &q) {
			return
		}
		if err := validIDs("node", q.Node, "workflow", q.Workflow, "ref", q.Ref); err != nil {
			h.bad(w, r, err)
			return
		}
		peer, ok := auth("", q.Node)
		if !ok {
			return
		}
		out, err = h.Server.Token(ctx, peer, q)
	case PathBMCClaim, PathBMCReport:
		var q ClaimRequest
		if !h.decode(w, r, &q) {
			return
		}
		if err := validateClaim(q, op.path == PathBMCReport); err != nil {
			h.bad(w, r, err)
			return
		}
		peer, ok := auth("", q.Node)
		if !ok {
			return
		}
		if op.path == PathBMCClaim {
			out, err = h.BMC.Claim(ctx, peer, q)
		} else {
			out, err = Empty{}, h.BMC.ReportClaim(ctx, peer, q)
		}
	case PathBMCCredential:
		var q CredentialRequest
		if !h.decode(w, r, &q) {
			return
		}
		if err := validIDs("node", q.Node, "ref", q.Ref); err != nil {
			h.bad(w, r, err)
			return
		}
		peer, ok := auth("", q.Node)
		if !ok {
			return
		}
		out, err = h.BMC.Credential(ctx, peer, q)
		w.Header().Set("Cache-Control", "no-store")
	}
	if err != nil {
		// The cause stays here: the peer gets the code only.
		status, _ := statusOf(err)
		level := slog.LevelDebug
		if status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		h.log().Log(ctx, level, "sitelink: request answered with an error", "path", op.path, "status", status, "err", err)
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		h.bad(w, r, err)
		return false
	}
	if dec.More() {
		h.bad(w, r, errors.New("trailing data"))
		return false
	}
	return true
}

func (h *Handler) bad(w http.ResponseWriter, r *http.Request, err error) {
	h.log().Debug("sitelink: bad request", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
	writeError(w, ErrBadRequest)
}

// MaxIDLen bounds a node, site, workflow, reference, command id, op or journal id.
const MaxIDLen = 256

func validIDs(kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if v := kv[i+1]; v == "" || len(v) > MaxIDLen || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s: want 1 to %d bytes of UTF-8", ErrBadRequest, kv[i], MaxIDLen)
		}
	}
	return nil
}

func validateReport(q StatusReport) error {
	return validIDs("site", q.Site, "node", q.Node)
}

func validateClaim(q ClaimRequest, report bool) error {
	if err := validIDs("node", q.Node, "id", q.ID); err != nil {
		return err
	}
	if len(q.Op) > MaxIDLen || len(q.Journal) > MaxIDLen {
		return fmt.Errorf("%w: op or journal over %d bytes", ErrBadRequest, MaxIDLen)
	}
	switch {
	case report && q.Outcome == nil:
		return fmt.Errorf("%w: a claim report needs an outcome", ErrBadRequest)
	case !report && q.Outcome != nil:
		return fmt.Errorf("%w: a claim carries no outcome", ErrBadRequest)
	case report:
		switch q.Outcome.Status {
		case StatusOK, StatusFailed, StatusUnknown, StatusNotSent:
		default:
			return fmt.Errorf("%w: outcome status %q", ErrBadRequest, q.Outcome.Status)
		}
	}
	return nil
}

func writeError(w http.ResponseWriter, err error) {
	status, code := statusOf(err)
	writeJSON(w, status, Error{Code: code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
