package secureboot

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bettercompute/siteboot/internal/testpeer"
)

// TestFATImage: images of several shapes (files in the root and three levels down, an empty
// file, files of exactly one and of several clusters, more entries than one cluster of a
// directory holds) pass fsck.fat and read back byte for byte with mtools; each file's
// recorded offset is where its bytes are.
func TestFATImage(t *testing.T) {
	mtype := testpeer.LookPath(t, "mtype", "mtools")
	fsck := testpeer.LookPath(t, "fsck.fat", "dosfstools")
	files := []fatFile{
		{"README.TXT", []byte("hello\n")},
		{"EMPTY", nil},
		{"A/B/C/ONE.BIN", bytes.Repeat([]byte{0xa5}, fatSector)},
		{"A/B/TWO.BIN", bytes.Repeat([]byte("0123456789"), 1000)},
	}
	for i := range 20 {
		files = append(files, fatFile{"MANY/F" + string(rune('A'+i)) + ".DAT", []byte(strings.Repeat("x", i*37))})
	}
	img, err := buildFAT(files)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.img")
	if err := os.WriteFile(path, img.data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(fsck, "-n", path).CombinedOutput(); err != nil {
		t.Fatalf("fsck.fat -n: %v\n%s", err, out)
	}
	for _, f := range files {
		out, err := exec.Command(mtype, "-i", path, "::"+strings.ToLower(f.path)).Output()
		if err != nil || !bytes.Equal(out, f.data) {
			t.Errorf("%s reads back as %d bytes (%v), want %d", f.path, len(out), err, len(f.data))
		}
		if off := img.offsets[f.path]; len(f.data) > 0 && !bytes.Equal(img.data[off:off+len(f.data)], f.data) {
			t.Errorf("%s is not at its offset %d", f.path, off)
		}
	}
}

func TestFATNames(t *testing.T) {
	for _, bad := range []string{"", "TOOLONGNAME.EFI", "A.LONG", "A.B.C", "SPACE X", "Ü.EFI", "A/B"} {
		if _, err := fatName(bad); !errors.Is(err, errFATName) {
			t.Errorf("fatName(%q) = %v, want errFATName", bad, err)
		}
	}
	if n, err := fatName("grubx64.efi"); err != nil || string(n[:]) != "GRUBX64 EFI" {
		t.Errorf("fatName(grubx64.efi) = %q, %v", n, err)
	}
	if _, err := buildFAT([]fatFile{{"X.BIN", make([]byte, (fatMaxClusters+1)*fatSector)}}); err == nil {
		t.Error("an image over FAT16's clusters was built")
	}
	if _, err := buildFAT([]fatFile{{"A", []byte("f")}, {"A/B", []byte("g")}}); err == nil {
		t.Error("a name that is a file and a directory was accepted")
	}
}
