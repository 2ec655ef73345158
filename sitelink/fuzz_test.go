package sitelink

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"testing"
)

// echo answers every call with a fixed, valid answer.
type echo struct{}

func (echo) Sync(context.Context, Peer, StatusReport) (SyncResponse, error) {
	return SyncResponse{Commands: []Command{{ID: "c", Kind: KindCleanUp, Workflow: "wf"}}}, nil
}
func (echo) Token(context.Context, Peer, TokenRequest) (TokenResponse, error) {
	return TokenResponse{}, ErrNotReady
}
func (echo) Claim(context.Context, Peer, ClaimRequest) (Grant, error) {
	return Grant{Granted: true, State: ClaimGranted}, nil
}
func (echo) ReportClaim(context.Context, Peer, ClaimRequest) error { return nil }
func (echo) Credential(context.Context, Peer, CredentialRequest) (Credential, error) {
	return Credential{}, ErrNotFound
}

// FuzzHandler: whatever body comes to whichever path, the Handler answers a status the
// specification lists for that operation, with a body that decodes strictly into the
// operation's answer (200) or an Error (anything else).
func FuzzHandler(f *testing.F) {
	for i, op := range operations {
		b, _ := json.Marshal(op.request)
		f.Add(uint8(i), b)
	}
	f.Add(uint8(0), []byte(`{"site":"s","node":"n","beat":1,"counters":{"a":1},"bmc":[{"id":"x","disks":[{}]}]}`))
	f.Add(uint8(1), []byte(`{"node":"n","ref":"r","workflow":"w"}`))
	f.Add(uint8(3), []byte(`{"node":"n","id":"c","outcome":{"Status":"ok"}}`))
	f.Add(uint8(2), []byte(`{"node":"n","id":"c"}{}`))
	f.Add(uint8(4), []byte(`null`))
	h := &Handler{Server: echo{}, BMC: echo{}, Insecure: true}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		op := operations[int(which)%len(operations)]
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, op.path, bytes.NewReader(body)))
		if w.Code != http.StatusOK && !slices.Contains(op.statuses, w.Code) {
			t.Fatalf("%s %q: status %d is not in the specification", op.path, body, w.Code)
		}
		var out any = &Error{}
		if w.Code == http.StatusOK {
			out = reflect.New(reflect.TypeOf(op.resp)).Interface()
		}
		dec := json.NewDecoder(w.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			t.Fatalf("%s %q: answer %d does not decode into %T: %v", op.path, body, w.Code, out, err)
		}
		if e, ok := out.(*Error); ok {
			if st, _ := statusOf(errorOf(w.Code)); st != w.Code || e.Code == "" {
				t.Fatalf("%s: status %d with error code %q", op.path, w.Code, e.Code)
			}
		}
	})
}
