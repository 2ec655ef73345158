package sitetls

import (
	"errors"
	"fmt"
	"strings"

	"github.com/bettercompute/siteboot/internal/errname"
)

// Sentinel errors. Every error of this package wraps one of them; errors about a file are a
// *[FileError] naming it.
var (
	// ErrInsecureFile is wrapped when a certificate or key file grants any permission to its
	// group or to others (mode & 0o077), or a CA bundle is writable by them (mode & 0o022).
	ErrInsecureFile = errors.New("sitetls: file is accessible to group or others")
	// ErrNotRegular is wrapped when a path names a directory, device or pipe.
	ErrNotRegular = errors.New("sitetls: not a regular file")
	// ErrTooLarge is wrapped when a file is larger than [MaxFileBytes].
	ErrTooLarge = errors.New("sitetls: file too large")
	// ErrNoCertificate is wrapped when a certificate file or CA bundle holds no PEM
	// CERTIFICATE block, or one that does not parse.
	ErrNoCertificate = errors.New("sitetls: no certificate")
	// ErrNoKey is wrapped when a key file holds no PEM private key, or one that does not parse.
	ErrNoKey = errors.New("sitetls: no private key")
	// ErrUnsupportedKey is wrapped when a key is neither Ed25519, ECDSA nor RSA.
	ErrUnsupportedKey = errors.New("sitetls: unsupported key type")
	// ErrKeyMismatch is wrapped when the key is not the certificate's.
	ErrKeyMismatch = errors.New("sitetls: key does not match certificate")
	// ErrExpired is wrapped when a certificate's NotAfter has passed.
	ErrExpired = errors.New("sitetls: certificate expired")
	// ErrNotYetValid is wrapped when a certificate's NotBefore is still ahead.
	ErrNotYetValid = errors.New("sitetls: certificate not yet valid")
	// ErrUntrustedCert is wrapped when a re-read certificate does not chain to the CA bundle
	// (Config.IssuerFile, else CAFile): it is not adopted, since the peers would refuse it.
	ErrUntrustedCert = errors.New("sitetls: certificate does not chain to the CA bundle")
	// ErrNoServerName is returned by a client handshake when neither [Credentials.ClientConfig]
	// nor the connection names the server to verify (a URL with an IP address and no
	// server name given).
	ErrNoServerName = errors.New("sitetls: no server name to verify")
	// ErrPeerNotVerified is wrapped when the peer's certificate does not chain to the
	// configured CA bundle, or is not for the expected name or use.
	ErrPeerNotVerified = errors.New("sitetls: peer certificate not verified")
	// ErrNoTLS is returned by [NodeFrom] for a request that did not come over TLS.
	ErrNoTLS = errors.New("sitetls: request not over TLS")
	// ErrNoVerifiedCert is returned by [NodeFrom] when the connection has no verified client
	// certificate chain.
	ErrNoVerifiedCert = errors.New("sitetls: no verified client certificate")
	// ErrNoIdentity is wrapped when a certificate carries no node identity, more than one
	// URI name, or a URI that is not a node identity.
	ErrNoIdentity = errors.New("sitetls: no node identity")
	// ErrConfig is wrapped by [Config.Validate] errors.
	ErrConfig = errors.New("sitetls: bad configuration")
	// ErrNoCredentials is returned where a node's link needs credentials and has none
	// ([CheckLeaf] of a Status without a certificate).
	ErrNoCredentials = errors.New("sitetls: no certificate and CA bundle for the link")
	// ErrCertIdentity is wrapped by [CheckLeaf] when the certificate names another site or
	// node than the one it must be for.
	ErrCertIdentity = errors.New("sitetls: certificate is for another node")
	// ErrCertKey is returned by [CheckLeaf] when the certificate is not for the node key.
	ErrCertKey = errors.New("sitetls: certificate is not for the node key")
)

// File roles, as a *FileError names them.
const (
	RoleCert = "certificate"
	RoleKey  = "key"
	RoleCA   = "CA bundle"
	// RoleIssuer is Config.IssuerFile.
	RoleIssuer = "issuer bundle"
)

// FileError is an error about one of the configured files. It names the file and its role;
// it never holds the file's content.
type FileError struct {
	Role string // RoleCert, RoleKey, RoleCA or RoleIssuer
	Path string
	Err  error
}

var _ error = &FileError{}

func (e *FileError) Error() string {
	return fmt.Sprintf("sitetls: %s %s: %s", e.Role, e.Path, strings.TrimPrefix(e.Err.Error(), "sitetls: "))
}

// Unwrap returns the cause.
func (e *FileError) Unwrap() error { return e.Err }

// ReasonOf names the first of the package's errors in err's chain in a word a host can count:
// "insecure-file", "not-regular", "too-large", "no-certificate", "no-key", "unsupported-key",
// "key-mismatch", "expired", "not-yet-valid", "untrusted-cert", "no-server-name",
// "peer-not-verified", "no-tls", "no-verified-cert", "no-identity", "config", "no-credentials",
// "cert-identity", "cert-key"; "" for nil or an error of another package.
func ReasonOf(err error) string { return reasons.Of(err) }

var reasons = errname.Table{
	{Err: ErrInsecureFile, Name: "insecure-file"},
	{Err: ErrNotRegular, Name: "not-regular"},
	{Err: ErrTooLarge, Name: "too-large"},
	{Err: ErrNoCertificate, Name: "no-certificate"},
	{Err: ErrNoKey, Name: "no-key"},
	{Err: ErrUnsupportedKey, Name: "unsupported-key"},
	{Err: ErrKeyMismatch, Name: "key-mismatch"},
	{Err: ErrExpired, Name: "expired"},
	{Err: ErrNotYetValid, Name: "not-yet-valid"},
	{Err: ErrUntrustedCert, Name: "untrusted-cert"},
	{Err: ErrNoServerName, Name: "no-server-name"},
	{Err: ErrPeerNotVerified, Name: "peer-not-verified"},
	{Err: ErrNoTLS, Name: "no-tls"},
	{Err: ErrNoVerifiedCert, Name: "no-verified-cert"},
	{Err: ErrNoIdentity, Name: "no-identity"},
	{Err: ErrConfig, Name: "config"},
	{Err: ErrNoCredentials, Name: "no-credentials"},
	{Err: ErrCertIdentity, Name: "cert-identity"},
	{Err: ErrCertKey, Name: "cert-key"},
}
