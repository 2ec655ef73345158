package discovery_test

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bettercompute/siteboot/discovery"
	"github.com/bettercompute/siteboot/hwid"
)

func TestMatch(t *testing.T) {
	P := epoch // the power command
	now := P.Add(15 * time.Minute)
	u := hwid.MustParseUUID(uuidA)
	other := hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566")
	mac1, mac2 := hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(2))
	seen := func(mac hwid.MAC, uuid hwid.UUID, first, last time.Time) discovery.Merged {
		return discovery.Merged{MAC: mac, ProductUUID: uuid.String(), FirstSeen: first, LastSeen: last, Count: 1}
	}
	at := func(d time.Duration) time.Time { return P.Add(d) }
	type want struct {
		mac    hwid.MAC
		reason discovery.Reason
	}
	tests := []struct {
		name string
		seen []discovery.Merged
		site []discovery.Machine
		want want
	}{
		{"nothing seen", nil, nil, want{reason: discovery.ReasonNotSeen}},
		{"seen as given", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))}, nil, want{mac: mac1}},
		{"seen in SMBIOS order", []discovery.Merged{seen(mac1, u.SMBIOS(), at(time.Minute), at(time.Minute))}, nil, want{mac: mac1}},
		{"seen reversed as IPMI prints it", []discovery.Merged{seen(mac1, u.Reversed(), at(time.Minute), at(time.Minute))}, nil, want{mac: mac1}},
		// Spellings of spellings: the firmware reports one spelling, the enrollment holds another.
		{"seen as the SMBIOS spelling reversed", []discovery.Merged{seen(mac1, u.SMBIOS().Reversed(), at(time.Minute), at(time.Minute))}, nil, want{mac: mac1}},
		{"seen as the reversal in SMBIOS order", []discovery.Merged{seen(mac1, u.Reversed().SMBIOS(), at(time.Minute), at(time.Minute))}, nil, want{mac: mac1}},
		{"seen with one bit changed", []discovery.Merged{seen(mac1, flip(u.SMBIOS()), at(time.Minute), at(time.Minute))}, nil, want{reason: discovery.ReasonNotSeen}},
		{"another UUID", []discovery.Merged{seen(mac1, other, at(time.Minute), at(time.Minute))}, nil, want{reason: discovery.ReasonNotSeen}},
		{"no UUID", []discovery.Merged{{MAC: mac1, FirstSeen: at(time.Minute), LastSeen: at(time.Minute)}}, nil, want{reason: discovery.ReasonNotSeen}},

		// The window around the power command, both ends included.
		{"first seen 30 s before", []discovery.Merged{seen(mac1, u, at(-30*time.Second), at(time.Minute))}, nil, want{mac: mac1}},
		{"first seen just over 30 s before", []discovery.Merged{seen(mac1, u, at(-30*time.Second-time.Nanosecond), at(time.Minute))}, nil,
			want{reason: discovery.ReasonNotSeen}},
		{"first seen at the command", []discovery.Merged{seen(mac1, u, at(0), at(0))}, nil, want{mac: mac1}},
		{"first seen 10 min after", []discovery.Merged{seen(mac1, u, at(10*time.Minute), at(10*time.Minute))}, nil, want{mac: mac1}},
		{"first seen just over 10 min after", []discovery.Merged{seen(mac1, u, at(10*time.Minute+time.Nanosecond), at(11*time.Minute))}, nil,
			want{reason: discovery.ReasonNotSeen}},
		{"first seen yesterday, seen again now", []discovery.Merged{seen(mac1, u, at(-20*time.Hour), at(time.Minute))}, nil,
			want{reason: discovery.ReasonNotSeen}},

		// The only MAC in 24 hours.
		{"two MACs in the window", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac2, u.SMBIOS(), at(2*time.Minute), at(2*time.Minute))}, nil,
			want{reason: discovery.ReasonAmbiguous}},
		{"two MACs in the window, as SMBIOS and IPMI spell it", []discovery.Merged{seen(mac1, u.SMBIOS(), at(time.Minute), at(time.Minute)), seen(mac2, u.SMBIOS().Reversed(), at(2*time.Minute), at(2*time.Minute))}, nil,
			want{reason: discovery.ReasonAmbiguous}},
		{"another MAC earlier today", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac2, u, at(-5*time.Hour), at(-5*time.Hour))}, nil,
			want{reason: discovery.ReasonAmbiguous}},
		{"another MAC last seen a day ago", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac2, u, now.Add(-25*time.Hour), now.Add(-24*time.Hour))}, nil,
			want{mac: mac1}},
		{"another MAC last seen just under a day ago", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac2, u, now.Add(-25*time.Hour), now.Add(-24*time.Hour+time.Nanosecond))}, nil,
			want{reason: discovery.ReasonAmbiguous}},
		{"the only MAC last seen a day ago", []discovery.Merged{seen(mac1, u, now.Add(-24*time.Hour), now.Add(-24*time.Hour))}, nil,
			want{reason: discovery.ReasonNotSeen}},
		{"one MAC listed twice (unmerged), earliest first seen counts",
			[]discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac1, u, at(-time.Hour), at(-time.Hour))}, nil,
			want{reason: discovery.ReasonNotSeen}},
		{"one MAC listed twice, both in the window",
			[]discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac1, u.Reversed(), at(2*time.Minute), at(2*time.Minute))}, nil,
			want{mac: mac1}},
		{"a placeholder sighting does not make it ambiguous",
			[]discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute)), seen(mac2, hwid.UUID{}, at(time.Minute), at(time.Minute))}, nil,
			want{mac: mac1}},

		// The site's other machines.
		{"another machine shares the UUID", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: u}}, want{reason: discovery.ReasonSharedUUID}},
		{"another machine has it in SMBIOS order", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: u.SMBIOS()}}, want{reason: discovery.ReasonSharedUUID}},
		{"another machine has it as the SMBIOS spelling reversed", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: u.SMBIOS().Reversed()}}, want{reason: discovery.ReasonSharedUUID}},
		{"another machine has it with one bit changed", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: flip(u)}}, want{mac: mac1}},
		{"shared UUID before not-seen", nil,
			[]discovery.Machine{{ID: "m2", UUID: u.Reversed()}}, want{reason: discovery.ReasonSharedUUID}},
		{"the machine's own row is skipped", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m1", UUID: u}, {ID: "m3", UUID: other}, {ID: "m4"}}, want{mac: mac1}},
		{"MAC enrolled", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: other, MACs: []hwid.MAC{mac2, mac1}}}, want{reason: discovery.ReasonMACEnrolled}},
		{"another MAC enrolled", []discovery.Merged{seen(mac1, u, at(time.Minute), at(time.Minute))},
			[]discovery.Machine{{ID: "m2", UUID: other, MACs: []hwid.MAC{mac2}}}, want{mac: mac1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := discovery.Query{MachineID: "m1", UUID: u, PoweredAt: P, Now: now, Seen: tt.seen, Site: tt.site}
			c, err := discovery.Match(q)
			got := want{mac: c.MAC, reason: discovery.Reason(discovery.ReasonOf(err))}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Fatalf("Match (-want +got):\n%s\nerr: %v", diff, err)
			}
			if err == nil {
				return
			}
			var me *discovery.MatchError
			if !errors.As(err, &me) || me.UUID != u || me.Detail == "" {
				t.Errorf("error %v: not a complete *MatchError", err)
			}
			if !errors.Is(err, me.Unwrap()) || me.Unwrap() == nil {
				t.Errorf("error %v does not unwrap to its reason's sentinel", err)
			}
		})
	}
}

// flip returns u with the lowest bit of its last byte changed: another machine.
func flip(u hwid.UUID) hwid.UUID {
	u[15] ^= 1
	return u
}

func TestMatchErrorDetails(t *testing.T) {
	u := hwid.MustParseUUID(uuidA)
	mac1, mac2 := hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(2))
	q := discovery.Query{MachineID: "m1", UUID: u, PoweredAt: epoch, Now: epoch.Add(time.Minute), Seen: []discovery.Merged{
		{MAC: mac1, ProductUUID: uuidA, FirstSeen: epoch, LastSeen: epoch},
		{MAC: mac2, ProductUUID: u.Reversed().String(), FirstSeen: epoch, LastSeen: epoch},
	}}
	_, err := discovery.Match(q)
	var me *discovery.MatchError
	if !errors.As(err, &me) || !errors.Is(err, discovery.ErrAmbiguous) {
		t.Fatalf("Match = %v, want ambiguous", err)
	}
	if diff := cmp.Diff([]hwid.MAC{mac1, mac2}, me.MACs); diff != "" {
		t.Errorf("ambiguous MACs (-want +got):\n%s", diff)
	}
	q.Seen = q.Seen[:1]
	q.Site = []discovery.Machine{{ID: "m2", UUID: u.SMBIOS()}, {ID: "m3", UUID: u}}
	_, err = discovery.Match(q)
	if !errors.As(err, &me) || !errors.Is(err, discovery.ErrSharedUUID) {
		t.Fatalf("Match = %v, want shared-uuid", err)
	}
	if diff := cmp.Diff([]string{"m2", "m3"}, me.MachineIDs); diff != "" {
		t.Errorf("sharers (-want +got):\n%s", diff)
	}
}

func TestMatchPlaceholderQuery(t *testing.T) {
	for _, s := range []string{
		"00000000-0000-0000-0000-000000000000",
		"ffffffff-ffff-ffff-ffff-ffffffffffff",
		"03000200-0400-0500-0006-000700080009",
		"00020003-0004-0005-0006-000700080009",
	} {
		p := hwid.MustParseUUID(s)
		for _, sp := range p.Spellings() {
			q := discovery.Query{MachineID: "m1", UUID: sp, PoweredAt: epoch, Now: epoch.Add(time.Minute),
				Seen: []discovery.Merged{{MAC: hwid.MustParseMAC(macA), ProductUUID: sp.String(), FirstSeen: epoch, LastSeen: epoch}}}
			if c, err := discovery.Match(q); !errors.Is(err, discovery.ErrUnusableUUID) {
				t.Errorf("Match(placeholder %s) = %v, %v; want ErrUnusableUUID", sp, c.MAC, err)
			}
		}
	}
}

// Properties over random UUIDs: whichever spelling the machine was enrolled with and
// whichever the firmware reported (the SMBIOS one against the reversed one included), the
// candidate is found and the identity backstop agrees; a UUID with one bit changed never
// matches; a placeholder sighting never matches anything.
func TestMatchSpellingProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	mac := hwid.MustParseMAC(macA)
	placeholders := []hwid.UUID{{}, hwid.MustParseUUID("ffffffff-ffff-ffff-ffff-ffffffffffff"),
		hwid.MustParseUUID("03000200-0400-0500-0006-000700080009"), hwid.MustParseUUID("00020003-0004-0005-0006-000700080009")}
	for range 20000 {
		var u hwid.UUID
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		if u.IsPlaceholder() {
			continue
		}
		enrolled := u.Spellings()[r.IntN(3)]
		reported := u.Spellings()[r.IntN(3)]
		q := discovery.Query{MachineID: "m1", UUID: enrolled, PoweredAt: epoch, Now: epoch.Add(time.Minute),
			Seen: []discovery.Merged{{MAC: mac, ProductUUID: reported.String(), FirstSeen: epoch, LastSeen: epoch}}}
		if c, err := discovery.Match(q); err != nil || c.MAC != mac {
			t.Fatalf("enrolled %s, reported %s (spellings of %s): %v, %v; want %s", enrolled, reported, u, c.MAC, err, mac)
		}
		// The identity backstop agrees with the matcher.
		id := discovery.Identity{EnrolledUUID: enrolled, MAC: mac, MACSource: discovery.MACDiscovered, ReportedUUID: reported,
			ReportedNICs: []hwid.MAC{mac}}
		if err := id.Verify(); err != nil {
			t.Fatalf("Verify(enrolled %s, reported %s, spellings of %s) = %v", enrolled, reported, u, err)
		}
		// Flip one bit: a different machine, for the matcher and the backstop.
		flipped := reported
		flipped[r.IntN(16)] ^= 1 << r.IntN(8)
		q.Seen[0].ProductUUID = flipped.String()
		if c, err := discovery.Match(q); !errors.Is(err, discovery.ErrNotSeen) {
			t.Fatalf("enrolled %s, seen %s (one bit from %s): %v, %v; want not-seen", enrolled, flipped, reported, c.MAC, err)
		}
		id.ReportedUUID = flipped
		if err := id.Verify(); discovery.ReasonOf(err) != string(discovery.ReasonIdentityMismatch) {
			t.Fatalf("Verify(enrolled %s, reported %s) = %v, want an identity mismatch", enrolled, flipped, err)
		}
		// Placeholders, in every spelling, are never the machine's.
		p := placeholders[r.IntN(len(placeholders))].Spellings()[r.IntN(3)]
		q.Seen[0].ProductUUID = p.String()
		if _, err := discovery.Match(q); !errors.Is(err, discovery.ErrNotSeen) {
			t.Fatalf("placeholder %s sighting: %v, want not-seen", p, err)
		}
	}
}

func TestIdentityVerify(t *testing.T) {
	u := hwid.MustParseUUID(uuidA)
	other := hwid.MustParseUUID("8f1c0e2a-1b2c-4d5e-9f00-112233445566")
	zero := hwid.UUID{}
	ones := hwid.MustParseUUID("ffffffff-ffff-ffff-ffff-ffffffffffff")
	mac, mac2 := hwid.MustParseMAC(macN(1)), hwid.MustParseMAC(macN(2))
	nics := []hwid.MAC{mac2, mac}
	tests := []struct {
		name     string
		src      discovery.MACSource
		enrolled hwid.UUID
		reported hwid.UUID
		nics     []hwid.MAC
		ok       bool
	}{
		{"discovered, same UUID", discovery.MACDiscovered, u, u, nics, true},
		{"discovered, SMBIOS spelling", discovery.MACDiscovered, u, u.SMBIOS(), nics, true},
		{"discovered, reversed spelling", discovery.MACDiscovered, u.SMBIOS(), u.SMBIOS().Reversed(), nics, true},
		{"discovered, SMBIOS spelling enrolled, reversed reported", discovery.MACDiscovered, u.SMBIOS(), u.Reversed(), nics, true},
		{"discovered, reversed enrolled, SMBIOS spelling reported", discovery.MACDiscovered, u.Reversed(), u.SMBIOS(), nics, true},
		{"discovered, one bit apart", discovery.MACDiscovered, u.SMBIOS(), flip(u.SMBIOS()), nics, false},
		{"discovered, other UUID", discovery.MACDiscovered, u, other, nics, false},
		{"discovered, no UUID reported", discovery.MACDiscovered, u, zero, nics, false},
		{"discovered, placeholder on both sides", discovery.MACDiscovered, ones, ones, nics, false},
		{"discovered, MAC not among the NICs", discovery.MACDiscovered, u, u, []hwid.MAC{mac2}, false},
		{"discovered, no NICs", discovery.MACDiscovered, u, u, nil, false},
		{"unknown source checked strictly", "", u, u, []hwid.MAC{mac2}, false},
		{"unknown source, all well", "", u, u.Reversed(), nics, true},
		{"operator, other UUID", discovery.MACFromOperator, u, other, nil, false},
		{"operator, spelling, NICs not checked", discovery.MACFromOperator, u, u.Reversed(), nil, true},
		{"operator, SMBIOS spelling enrolled, reversed reported", discovery.MACFromOperator, u.SMBIOS(), u.Reversed(), nil, true},
		{"inspection, reversed enrolled, SMBIOS spelling reported", discovery.MACFromInspection, u.Reversed(), u.SMBIOS(), nil, true},
		{"operator, no reported UUID", discovery.MACFromOperator, u, zero, nil, true},
		{"operator, enrolled without UUID", discovery.MACFromOperator, zero, other, nil, true},
		{"operator, placeholder reported", discovery.MACFromOperator, u, ones, nil, true},
		{"inspection, other UUID", discovery.MACFromInspection, u, other, nics, false},
		{"inspection, same UUID", discovery.MACFromInspection, u, u, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := discovery.Identity{EnrolledUUID: tt.enrolled, MAC: mac, MACSource: tt.src, ReportedUUID: tt.reported, ReportedNICs: tt.nics}.Verify()
			if (err == nil) != tt.ok {
				t.Fatalf("Verify = %v, want ok=%v", err, tt.ok)
			}
			if err != nil && (!errors.Is(err, discovery.ErrIdentityMismatch) || discovery.ReasonOf(err) != string(discovery.ReasonIdentityMismatch)) {
				t.Errorf("Verify = %v, want machine-identity-mismatch", err)
			}
		})
	}
}

func TestMatchIncompleteQuery(t *testing.T) {
	u := hwid.MustParseUUID(uuidA)
	seen := []discovery.Merged{{MAC: hwid.MustParseMAC(macA), ProductUUID: uuidA, FirstSeen: epoch, LastSeen: epoch}}
	for _, q := range []discovery.Query{
		{UUID: u, PoweredAt: epoch, Seen: seen},
		{UUID: u, Now: epoch, Seen: seen},
	} {
		if _, err := discovery.Match(q); !errors.Is(err, discovery.ErrQuery) {
			t.Errorf("Match(%+v) = %v, want ErrQuery", q, err)
		}
	}
}
