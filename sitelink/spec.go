package sitelink

import _ "embed"

// OpenAPI is the specification of the link: an OpenAPI 3.1 document (openapi.yaml in this
// package) describing every operation, status code and message of the HTTP binding, for a
// control plane written in any language.
//
//go:embed openapi.yaml
var OpenAPI []byte
