package sitelink

import "net/http"

// The HTTP binding: every operation is a POST of a JSON body to a path under the control
// plane's base URL, answered 200 with a JSON body, or with another status and an Error.
const (
	PathSync          = "/v1/sync"           // StatusReport -> SyncResponse
	PathToken         = "/v1/token"          // TokenRequest -> TokenResponse; 409 while not ready
	PathBMCClaim      = "/v1/bmc/claim"      // ClaimRequest -> Grant
	PathBMCReport     = "/v1/bmc/report"     // ClaimRequest with Outcome -> {}
	PathBMCCredential = "/v1/bmc/credential" // CredentialRequest -> Credential
)

// Bounds of a body, in bytes.
const (
	// MaxReportBytes bounds a StatusReport and a SyncResponse.
	MaxReportBytes = 8 << 20
	// MaxRequestBytes bounds every other request and answer.
	MaxRequestBytes = 64 << 10
)

// ContentType is the media type of every body.
const ContentType = "application/json"

// operation describes one operation of the binding, for Handler and for the test that
// checks the specification against it.
type operation struct {
	path, id      string
	request, resp any // zero values of the body types
	bmc           bool
	max           int64
	statuses      []int // besides 200
}

// Empty is the body of an answer that carries nothing: {}.
type Empty struct{}

var operations = []operation{
	{PathSync, "sync", StatusReport{}, SyncResponse{}, false, MaxReportBytes,
		[]int{http.StatusBadRequest, http.StatusForbidden, http.StatusServiceUnavailable}},
	{PathToken, "token", TokenRequest{}, TokenResponse{}, false, MaxRequestBytes,
		[]int{http.StatusBadRequest, http.StatusForbidden, http.StatusConflict, http.StatusServiceUnavailable}},
	{PathBMCClaim, "bmcClaim", ClaimRequest{}, Grant{}, true, MaxRequestBytes,
		[]int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable}},
	{PathBMCReport, "bmcReport", ClaimRequest{}, Empty{}, true, MaxRequestBytes,
		[]int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable}},
	{PathBMCCredential, "bmcCredential", CredentialRequest{}, Credential{}, true, MaxRequestBytes,
		[]int{http.StatusBadRequest, http.StatusForbidden, http.StatusNotFound, http.StatusServiceUnavailable}},
}
