package hwid_test

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/bettercompute/siteboot/hwid"
)

func TestParseMAC(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means ErrBadMAC
	}{
		{"aa:bb:cc:dd:ee:ff", "aa:bb:cc:dd:ee:ff"},
		{"AA-BB-CC-DD-EE-0F", "aa:bb:cc:dd:ee:0f"},
		{"3c:ec:ef:12:34:56", "3c:ec:ef:12:34:56"},
		{"aa:bb:cc:dd:ee", ""},
		{"aa:bb:cc:dd:ee:ff:00", ""},
		{"aa:bb-cc:dd:ee:ff", ""},
		{"aabb.ccdd.eeff", ""},
		{"aa:bb:cc:dd:ee:fg", ""},
		{"00:00:00:00:00:00:00:00", ""},
		{"", ""},
		{"aa:bb:cc:dd:ee:f\n", ""},
	}
	for _, tt := range tests {
		got, err := hwid.ParseMAC(tt.in)
		if tt.want == "" {
			if !errors.Is(err, hwid.ErrBadMAC) {
				t.Errorf("ParseMAC(%q) = %v, %v; want ErrBadMAC", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("ParseMAC(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func TestParseUUID(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means ErrBadUUID
	}{
		{"4C4C4544-0031-3510-8052-B4C04F4E4B32", "4c4c4544-0031-3510-8052-b4c04f4e4b32"},
		{"4c4c454400313510 8052b4c04f4e4b32", ""},
		{"4c4c4544003135108052b4c04f4e4b32", "4c4c4544-0031-3510-8052-b4c04f4e4b32"},
		{"{4c4c4544-0031-3510-8052-b4c04f4e4b32}", ""},
		{"4c4c4544-0031-3510-8052-b4c04f4e4b3", ""},
		{"4c4c4544-00313-510-8052-b4c04f4e4b32", ""},
		{"4c4c4544-0031-3510-8052-b4c04f4e4b3z", ""},
		{"", ""},
	}
	for _, tt := range tests {
		got, err := hwid.ParseUUID(tt.in)
		if tt.want == "" {
			if !errors.Is(err, hwid.ErrBadUUID) {
				t.Errorf("ParseUUID(%q) = %v, %v; want ErrBadUUID", tt.in, got, err)
			}
			continue
		}
		if err != nil || got.String() != tt.want {
			t.Errorf("ParseUUID(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

func mustUUID(t *testing.T, s string) hwid.UUID {
	t.Helper()
	return hwid.MustParseUUID(s)
}

func TestMustParsePanics(t *testing.T) {
	for name, f := range map[string]func(){
		"MAC":  func() { hwid.MustParseMAC("aa:bb") },
		"UUID": func() { hwid.MustParseUUID("nope") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("MustParse%s of a bad value did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestSpellings(t *testing.T) {
	u := mustUUID(t, "4c4c4544-0031-3510-8052-b4c04f4e4b32")
	if got, want := u.SMBIOS().String(), "44454c4c-3100-1035-8052-b4c04f4e4b32"; got != want {
		t.Errorf("SMBIOS = %s, want %s", got, want)
	}
	if got, want := u.Reversed().String(), "324b4e4f-c0b4-5280-1035-310044454c4c"; got != want {
		t.Errorf("Reversed = %s, want %s", got, want)
	}
	for _, s := range u.Spellings() {
		if !hwid.SameMachine(u, s) || !hwid.SameMachine(s, u) {
			t.Errorf("SameMachine(%s, %s) = false", u, s)
		}
	}
	other := mustUUID(t, "4c4c4544-0031-3510-8052-b4c04f4e4b33")
	if hwid.SameMachine(u, other) {
		t.Errorf("SameMachine(%s, %s) = true for different machines", u, other)
	}
}

func TestPlaceholders(t *testing.T) {
	for _, s := range []string{
		"00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"03000200-0400-0500-0006-000700080009",
		"00020003-0004-0005-0006-000700080009",
	} {
		p := mustUUID(t, s)
		for _, sp := range p.Spellings() {
			if !sp.IsPlaceholder() {
				t.Errorf("%s (spelling of %s) is not a placeholder", sp, s)
			}
			if hwid.SameMachine(p, sp) || hwid.SameMachine(sp, sp) {
				t.Errorf("placeholder %s matched %s", s, sp)
			}
		}
	}
}

// TestSpellingProperties checks, on random UUIDs, that each spelling is an involution and
// that the three spellings of a UUID that is not symmetric under them are distinct.
func TestSpellingProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		var u hwid.UUID
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		if u.SMBIOS().SMBIOS() != u || u.Reversed().Reversed() != u {
			t.Fatalf("spelling of %s is not an involution", u)
		}
		sp := u.Spellings()
		symmetric := u == u.SMBIOS() || u == u.Reversed() || u.SMBIOS() == u.Reversed()
		if !symmetric && (sp[0] == sp[1] || sp[0] == sp[2] || sp[1] == sp[2]) {
			t.Fatalf("spellings of %s collide: %v", u, sp)
		}
		if !u.IsPlaceholder() && !hwid.SameMachine(u, u) {
			t.Fatalf("SameMachine(%s, itself) = false", u)
		}
	}
}

// closure is every UUID reached from u by taking spellings of spellings, found with nothing
// but [hwid.UUID.Spellings]: the UUIDs that are the same machine as u when any spelling of a
// UUID matches any other spelling of it and the matching is an equivalence.
func closure(u hwid.UUID) map[hwid.UUID]bool {
	seen := map[hwid.UUID]bool{u: true}
	queue := []hwid.UUID{u}
	for len(queue) > 0 {
		x := queue[0]
		queue = queue[1:]
		for _, s := range x.Spellings() {
			if !seen[s] {
				seen[s] = true
				queue = append(queue, s)
			}
		}
	}
	return seen
}

func randomUUID(r *rand.Rand) hwid.UUID {
	var u hwid.UUID
	for i := range u {
		u[i] = byte(r.Uint32())
	}
	return u
}

// TestSameMachine: the spellings of one UUID, each against each, the SMBIOS spelling against
// the reversed one included; what is not a spelling; placeholders.
func TestSameMachine(t *testing.T) {
	const (
		given    = "01234567-89ab-cdef-0123-456789abcdef"
		smbios   = "67452301-ab89-efcd-0123-456789abcdef" // first three fields byte-swapped
		reversed = "efcdab89-6745-2301-efcd-ab8967452301" // all 16 bytes reversed (IPMI)
		// The SMBIOS spelling of the reversed one: a spelling of a spelling.
		smbiosOfReversed = "89abcdef-4567-0123-efcd-ab8967452301"
	)
	tests := []struct {
		name string
		a, b string
		want bool
	}{
		{"as given, SMBIOS", given, smbios, true},
		{"as given, reversed", given, reversed, true},
		{"SMBIOS, reversed", smbios, reversed, true},
		{"reversed, SMBIOS", reversed, smbios, true},
		{"SMBIOS, itself", smbios, smbios, true},
		{"SMBIOS, the SMBIOS spelling of the reversed one", smbios, smbiosOfReversed, true},
		{"as given, in upper case", given, "01234567-89AB-CDEF-0123-456789ABCDEF", true},
		{"one bit apart", given, "01234567-89ab-cdef-0123-456789abcdee", false},
		{"one bit apart, SMBIOS", smbios, "efcdab89-6745-2301-efcd-ab8967452300", false},
		{"fourth field swapped: no spelling", given, "01234567-89ab-cdef-2301-456789abcdef", false},
		{"first field alone swapped: no spelling", given, "67452301-89ab-cdef-0123-456789abcdef", false},
		{"another machine", given, "4c4c4544-0031-3510-8052-b4c04f4e4b32", false},
		{"placeholder sequence, its SMBIOS spelling", "03000200-0400-0500-0006-000700080009", "00020003-0004-0005-0006-000700080009", false},
		{"placeholder sequence, itself", "00020003-0004-0005-0006-000700080009", "00020003-0004-0005-0006-000700080009", false},
		{"placeholder sequence reversed, itself", "09000800-0700-0600-0500-040003000200", "09000800-0700-0600-0500-040003000200", false},
		{"all zeros, itself", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", false},
		{"all ones, itself", "ffffffff-ffff-ffff-ffff-ffffffffffff", "ffffffff-ffff-ffff-ffff-ffffffffffff", false},
		{"a machine, all zeros", given, "00000000-0000-0000-0000-000000000000", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := mustUUID(t, tt.a), mustUUID(t, tt.b)
			if got := hwid.SameMachine(a, b); got != tt.want {
				t.Errorf("SameMachine(%s, %s) = %v, want %v", a, b, got, tt.want)
			}
			if got := hwid.SameMachine(b, a); got != tt.want {
				t.Errorf("SameMachine(%s, %s) = %v, want %v", b, a, got, tt.want)
			}
			// Two machines differ when both are machines and not the same one.
			wantDiff := !tt.want && !a.IsPlaceholder() && !b.IsPlaceholder()
			if got := hwid.DifferentMachines(a, b); got != wantDiff {
				t.Errorf("DifferentMachines(%s, %s) = %v, want %v", a, b, got, wantDiff)
			}
		})
	}
}

// TestSameMachineProperties checks the one rule on random UUIDs: every pair of spellings of a
// UUID is the same machine, and so is every UUID reached through spellings of spellings; the
// rule is symmetric and transitive; it matches nothing else (a UUID with a byte changed or
// two bytes exchanged is another machine unless the closure holds it, and so is another
// random UUID); and a placeholder, in any order of its bytes the closure reaches, matches
// nothing, itself included.
func TestSameMachineProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		u := randomUUID(r)
		if u.IsPlaceholder() {
			t.Fatalf("random %s is a placeholder", u)
		}
		cl := closure(u)
		sp := u.Spellings()
		for _, a := range sp {
			for _, b := range sp {
				if !hwid.SameMachine(a, b) {
					t.Fatalf("SameMachine(%s, %s) = false: both are spellings of %s", a, b, u)
				}
			}
		}
		members := make([]hwid.UUID, 0, len(cl))
		for m := range cl {
			members = append(members, m)
		}
		a, b, c := members[r.IntN(len(members))], members[r.IntN(len(members))], members[r.IntN(len(members))]
		if !hwid.SameMachine(a, b) || !hwid.SameMachine(b, c) || !hwid.SameMachine(c, a) {
			t.Fatalf("%s, %s and %s, each reached from %s through spellings: SameMachine %v %v %v",
				a, b, c, u, hwid.SameMachine(a, b), hwid.SameMachine(b, c), hwid.SameMachine(c, a))
		}

		flipped := u
		flipped[r.IntN(16)] ^= byte(1 + r.IntN(255))
		exchanged := u
		i, j := r.IntN(16), r.IntN(16)
		exchanged[i], exchanged[j] = exchanged[j], exchanged[i]
		for _, v := range []hwid.UUID{flipped, exchanged, randomUUID(r)} {
			got, back := hwid.SameMachine(u, v), hwid.SameMachine(v, u)
			if got != back {
				t.Fatalf("SameMachine(%s, %s) = %v, but %v the other way round", u, v, got, back)
			}
			if want := cl[v] && !v.IsPlaceholder(); got != want {
				t.Fatalf("SameMachine(%s, %s) = %v, want %v (reached through spellings: %v)", u, v, got, want, cl[v])
			}
			if hwid.DifferentMachines(u, v) != !got || hwid.DifferentMachines(v, u) != !got {
				t.Fatalf("DifferentMachines(%s, %s) = %v, SameMachine %v", u, v, hwid.DifferentMachines(u, v), got)
			}
		}
		if hwid.DifferentMachines(a, b) || hwid.DifferentMachines(u, hwid.UUID{}) || hwid.DifferentMachines(hwid.UUID{}, u) {
			t.Fatalf("DifferentMachines true for %s and %s (both reached from %s), or against no UUID", a, b, u)
		}
	}

	for _, s := range []string{
		"00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"03000200-0400-0500-0006-000700080009",
		"00020003-0004-0005-0006-000700080009",
	} {
		for p := range closure(mustUUID(t, s)) {
			if !p.IsPlaceholder() {
				t.Errorf("%s, reached from placeholder %s through spellings, is not a placeholder", p, s)
			}
			u := randomUUID(r)
			for q := range closure(mustUUID(t, s)) {
				if hwid.SameMachine(p, q) {
					t.Errorf("placeholder %s matched %s", p, q)
				}
			}
			if hwid.SameMachine(p, u) || hwid.SameMachine(u, p) {
				t.Errorf("placeholder %s matched %s", p, u)
			}
			if hwid.DifferentMachines(p, u) || hwid.DifferentMachines(u, p) {
				t.Errorf("placeholder %s is a machine other than %s", p, u)
			}
		}
	}
}

func TestTextRoundTrip(t *testing.T) {
	var m hwid.MAC
	if err := m.UnmarshalText([]byte("AA:BB:CC:DD:EE:FF")); err != nil {
		t.Fatal(err)
	}
	b, _ := m.MarshalText()
	if string(b) != "aa:bb:cc:dd:ee:ff" {
		t.Errorf("MAC text = %s", b)
	}
	var u hwid.UUID
	if err := u.UnmarshalText([]byte("nope")); !errors.Is(err, hwid.ErrBadUUID) {
		t.Errorf("UnmarshalText(nope) = %v", err)
	}
	if _, err := hwid.UUIDFromBytes(make([]byte, 15)); !errors.Is(err, hwid.ErrBadUUID) {
		t.Errorf("UUIDFromBytes(15 bytes) = %v", err)
	}
	if _, err := hwid.MACFromBytes(make([]byte, 8)); !errors.Is(err, hwid.ErrBadMAC) {
		t.Errorf("MACFromBytes(8 bytes) = %v", err)
	}
}

func FuzzParseMAC(f *testing.F) {
	for _, s := range []string{"aa:bb:cc:dd:ee:ff", "AA-BB-CC-DD-EE-FF", "a:b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := hwid.ParseMAC(s)
		if err != nil {
			return
		}
		again, err := hwid.ParseMAC(m.String())
		if err != nil || again != m {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{"4c4c4544-0031-3510-8052-b4c04f4e4b32", "4c4c4544003135108052b4c04f4e4b32", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := hwid.ParseUUID(s)
		if err != nil {
			return
		}
		if len(u.String()) != 36 {
			t.Fatalf("canonical form of %q is %q", s, u.String())
		}
		again, err := hwid.ParseUUID(u.String())
		if err != nil || again != u {
			t.Fatalf("round trip of %q: %v, %v", s, again, err)
		}
	})
}

func TestArch(t *testing.T) {
	for _, tc := range []struct {
		a, b hwid.Arch
		same bool
	}{
		{hwid.ArchX86_64EFI, hwid.ArchX86_64EFIHTTP, true},
		{hwid.ArchX86_64EFI, hwid.ArchEFIBC, true}, // RFC 4578's x86-64 number
		{hwid.ArchBIOS, hwid.ArchBIOSHTTP, true},
		{hwid.ArchARM64EFIHTTP, hwid.ArchARM64EFI, true},
		{hwid.ArchBIOS, hwid.ArchX86_64EFI, false},
		{hwid.ArchX86_64EFI, hwid.ArchARM64EFI, false},
		{hwid.ArchIA32EFI, hwid.ArchX86_64EFI, false},
		{hwid.Arch(999), hwid.Arch(999), true},
	} {
		if got := hwid.SameArch(tc.a, tc.b); got != tc.same {
			t.Errorf("SameArch(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
		if hwid.SameArch(tc.a, tc.b) != hwid.SameArch(tc.b, tc.a) {
			t.Errorf("SameArch(%v, %v) is not symmetric", tc.a, tc.b)
		}
	}
	for _, a := range []hwid.Arch{hwid.ArchBIOS, hwid.ArchX86_64EFIHTTP, hwid.ArchLoongArch64HTTP, hwid.Arch(65535)} {
		b, err := a.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back hwid.Arch
		if err := back.UnmarshalText(b); err != nil || back != a {
			t.Errorf("%d: %q parses back as %d, %v", a, b, back, err)
		}
	}
	var a hwid.Arch
	if err := a.UnmarshalText([]byte("x86 efi")); !errors.Is(err, hwid.ErrBadArch) {
		t.Errorf("UnmarshalText(x86 efi) = %v, want ErrBadArch", err)
	}
	if _, ok := hwid.ParseArch("arch-007"); ok {
		t.Error("ParseArch accepted a number with a leading zero")
	}
}

// TestShimFile: the Secure Boot chain's file names follow the firmware, whichever number it
// sent (PXE or HTTP boot); legacy BIOS and U-Boot have none.
func TestShimFile(t *testing.T) {
	for _, tc := range []struct {
		a            hwid.Arch
		shim, loader string
		ok           bool
	}{
		{hwid.ArchX86_64EFI, "shimx64.efi", "grubx64.efi", true},
		{hwid.ArchEFIBC, "shimx64.efi", "grubx64.efi", true},
		{hwid.ArchX86_64EFIHTTP, "shimx64.efi", "grubx64.efi", true},
		{hwid.ArchARM64EFI, "shimaa64.efi", "grubaa64.efi", true},
		{hwid.ArchARM64EFIHTTP, "shimaa64.efi", "grubaa64.efi", true},
		{hwid.ArchIA32EFI, "shimia32.efi", "grubia32.efi", true},
		{hwid.ArchBIOS, "", "", false},
		{hwid.ArchBIOSHTTP, "", "", false},
		{hwid.ArchARM64UBoot, "", "", false},
		{hwid.Arch(999), "", "", false},
	} {
		shim, loader, ok := tc.a.ShimFile()
		if shim != tc.shim || loader != tc.loader || ok != tc.ok {
			t.Errorf("%v: ShimFile() = %q, %q, %v; want %q, %q, %v", tc.a, shim, loader, ok, tc.shim, tc.loader, tc.ok)
		}
	}
}
