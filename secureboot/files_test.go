package secureboot_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/bettercompute/siteboot/secureboot"
)

// TestCheckFiles: CheckPaths and CheckFiles name the file at fault in a *FileError, with
// the sentinel a host counts (invalid for a relative path, unavailable for a file that is
// missing or not regular), and pass two regular files.
func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	shim, grub := filepath.Join(dir, "shimx64.efi.signed"), filepath.Join(dir, "grubnetx64.efi.signed")
	for _, p := range []string{shim, grub} {
		if err := os.WriteFile(p, []byte("MZ"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := (secureboot.Config{Shim: shim, GRUB: grub}).CheckFiles(); err != nil {
		t.Fatalf("two regular files: %v", err)
	}
	for _, tc := range []struct {
		name   string
		c      secureboot.Config
		check  func(secureboot.Config) error
		field  string
		reason string
	}{
		{"relative shim", secureboot.Config{Shim: "shim.efi", GRUB: grub}, secureboot.Config.CheckPaths, "Shim", "invalid"},
		{"relative grub", secureboot.Config{Shim: shim, GRUB: "grub.efi"}, secureboot.Config.CheckPaths, "GRUB", "invalid"},
		{"missing shim", secureboot.Config{Shim: filepath.Join(dir, "none"), GRUB: grub}, secureboot.Config.CheckFiles, "Shim", "unavailable"},
		{"grub a directory", secureboot.Config{Shim: shim, GRUB: dir}, secureboot.Config.CheckFiles, "GRUB", "unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.c)
			var fe *secureboot.FileError
			if !errors.As(err, &fe) || fe.Field != tc.field {
				t.Fatalf("err = %v, want a FileError for %s", err, tc.field)
			}
			if got := secureboot.ReasonOf(err); got != tc.reason {
				t.Errorf("ReasonOf = %q, want %q", got, tc.reason)
			}
		})
	}
}
