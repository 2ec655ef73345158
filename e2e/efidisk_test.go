package e2e_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"unicode/utf16"
)

// efiDiskLine is what the EFI application on efiDiskDir's ESP prints on the console.
const efiDiskLine = "SITEBOOT-EFI-DISK-BOOTED"

var efiDiskRE = regexp.MustCompile(efiDiskLine)

// efiDiskApp is a minimal x86-64 EFI application (PE32+, subsystem 10, one section, no
// relocations: its code only addresses its own bytes RIP-relative): it writes efiDiskLine
// through the system table's ConOut, which OVMF mirrors to the serial port, and then powers
// the machine off with ResetSystem(EfiResetShutdown), so QEMU exits. It is the local disk's
// own boot loader for the UEFI tests: a boot the test can see.
func efiDiskApp() []byte {
	code := []byte{
		0x48, 0x83, 0xEC, 0x28, // sub rsp, 0x28 (shadow space, 16-byte aligned)
		0x48, 0x89, 0xD3, // mov rbx, rdx (the system table)
		0x48, 0x8B, 0x4B, 0x40, // mov rcx, [rbx+0x40] (ConOut)
		0x48, 0x8D, 0x15, 0, 0, 0, 0, // lea rdx, [rip+msg]
		0xFF, 0x51, 0x08, // call [rcx+0x08] (OutputString)
		0x48, 0x8B, 0x43, 0x58, // mov rax, [rbx+0x58] (RuntimeServices)
		0xB9, 0x02, 0x00, 0x00, 0x00, // mov ecx, 2 (EfiResetShutdown)
		0x31, 0xD2, // xor edx, edx (EFI_SUCCESS)
		0x45, 0x31, 0xC0, // xor r8d, r8d (no data)
		0x45, 0x31, 0xC9, // xor r9d, r9d
		0xFF, 0x50, 0x68, // call [rax+0x68] (ResetSystem)
		0xEB, 0xFE, // jmp $
	}
	const leaEnd = 18 // the lea's displacement is from the end of the instruction
	binary.LittleEndian.PutUint32(code[leaEnd-4:], uint32(len(code)-leaEnd))
	for _, u := range utf16.Encode([]rune("\r\n" + efiDiskLine + "\r\n\x00")) {
		code = binary.LittleEndian.AppendUint16(code, u)
	}

	const (
		headers   = 0x200  // file alignment: the headers' size, and where the section starts
		alignment = 0x1000 // section alignment: the section's address in the image
	)
	img := make([]byte, headers+headers)
	le := binary.LittleEndian
	copy(img, "MZ")
	le.PutUint32(img[0x3C:], 0x40) // e_lfanew
	pe := img[0x40:]
	copy(pe, "PE\x00\x00")
	coff := pe[4:]
	le.PutUint16(coff[0:], 0x8664)  // x86-64
	le.PutUint16(coff[2:], 1)       // one section
	le.PutUint16(coff[16:], 0xF0)   // size of the PE32+ optional header
	le.PutUint16(coff[18:], 0x0022) // executable, large address aware
	opt := coff[20:]
	le.PutUint16(opt[0:], 0x20B) // PE32+
	le.PutUint32(opt[4:], headers)
	le.PutUint32(opt[16:], alignment) // entry point
	le.PutUint32(opt[20:], alignment) // base of code
	le.PutUint64(opt[24:], 0x10000000)
	le.PutUint32(opt[32:], alignment)
	le.PutUint32(opt[36:], headers)
	le.PutUint32(opt[56:], 2*alignment) // size of image
	le.PutUint32(opt[60:], headers)
	le.PutUint16(opt[68:], 10) // EFI application
	le.PutUint64(opt[72:], 0x10000)
	le.PutUint64(opt[80:], 0x10000)
	le.PutUint32(opt[108:], 16) // data directories, all empty
	sect := opt[0xF0:]
	copy(sect, ".text")
	le.PutUint32(sect[8:], uint32(len(code)))
	le.PutUint32(sect[12:], alignment)
	le.PutUint32(sect[16:], headers)
	le.PutUint32(sect[20:], headers)
	le.PutUint32(sect[36:], 0x60000020) // code, execute, read
	if len(code) > headers {
		panic("efiDiskApp: code larger than its section")
	}
	copy(img[headers:], code)
	return img
}

// efiDiskDir writes an ESP's tree, EFI/BOOT/BOOTX64.EFI holding efiDiskApp, under dir and
// returns its root: QEMU's vvfat driver (file=fat:ROOT) shows it to the machine as a disk with
// one FAT partition, which OVMF's boot manager lists as a boot option of its own.
func efiDiskDir(t *testing.T, dir string) string {
	t.Helper()
	root := filepath.Join(dir, "esp")
	boot := filepath.Join(root, "EFI", "BOOT")
	if err := os.MkdirAll(boot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(boot, "BOOTX64.EFI"), efiDiskApp(), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}
