package sitetls_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/bettercompute/siteboot/sitetls"
)

func TestReasonOf(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("elsewhere"), ""},
		{&sitetls.FileError{Err: sitetls.ErrInsecureFile}, "insecure-file"},
		{fmt.Errorf("load: %w", sitetls.ErrExpired), "expired"},
		{fmt.Errorf("handshake: %w", sitetls.ErrUntrustedCert), "untrusted-cert"},
		{fmt.Errorf("CAFile: %w", sitetls.ErrConfig), "config"},
		{sitetls.ErrNoCredentials, "no-credentials"},
		{fmt.Errorf("check: %w", sitetls.ErrCertIdentity), "cert-identity"},
		{sitetls.ErrCertKey, "cert-key"},
	} {
		if got := sitetls.ReasonOf(tt.err); got != tt.want {
			t.Errorf("ReasonOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
