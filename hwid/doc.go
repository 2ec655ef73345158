// Package hwid is the identity vocabulary every siteboot package shares: MAC addresses and
// SMBIOS system UUIDs in canonical form, the three byte orders in which firmware, SMBIOS and
// IPMI spell one UUID, and the placeholder UUIDs that firmware reports when it has none.
//
// # Why three spellings
//
// SMBIOS stores the first three fields of the system UUID little-endian, so the same machine is
// reported as 4c4c4544-0031-… by one tool and 44454c4c-3100-… by another; IPMI's Get System
// GUID returns all 16 bytes reversed. A firmware may report one spelling in DHCP option 97
// while a boot entry or an enrollment holds another, so [SameMachine] is one rule for every
// comparison: any spelling of a UUID is the same machine as any other spelling of it, the
// SMBIOS one as the reversed one included, and a UUID read from DHCP, from a BMC and from
// the running machine can be compared without knowing which tool printed which.
//
// The rule is an equivalence, so that two UUIDs each the same machine as a third are the same
// machine as each other. Because a spelling's own spellings are then the same machine too,
// it matches the eight byte orders of a UUID that the two swaps (SMBIOS's, reversal's) reach
// one after the other: the three spellings, the reversal of the SMBIOS spelling, the SMBIOS
// spelling of the reversal, and three more. No smaller rule that matches every spelling with
// every other is transitive; with eight values of 2^128 per machine, two machines still
// never collide in practice.
//
// # Placeholders
//
// Boards without a programmed UUID report all zeros, all ones, or one of two well-known
// sequences. [UUID.IsPlaceholder] names them, in any of the byte orders above; [SameMachine]
// never matches one, because every board of that make would otherwise be "the same
// machine".
//
// The package has no dependencies and owns no state; any siteboot package may import it.
package hwid
