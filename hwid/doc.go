// Package hwid is the identity vocabulary every siteboot package shares: MAC addresses and
// SMBIOS system UUIDs in canonical form, the three byte orders in which firmware, SMBIOS and
// IPMI spell one UUID, and the placeholder UUIDs that firmware reports when it has none.
//
// # Why three spellings
//
// SMBIOS stores the first three fields of the system UUID little-endian, so the same machine is
// reported as 4c4c4544-0031-… by one tool and 44454c4c-3100-… by another; IPMI's Get System
// GUID returns all 16 bytes reversed. [SameMachine] treats a UUID and any of its spellings as
// the same machine, so a UUID read from DHCP option 97, from a BMC and from the running
// machine can be compared without knowing which tool printed which.
//
// # Placeholders
//
// Boards without a programmed UUID report all zeros, all ones, or one of two well-known
// sequences. [UUID.IsPlaceholder] names them; [SameMachine] never matches one, because every
// board of that make would otherwise be "the same machine".
//
// The package has no dependencies and owns no state; any siteboot package may import it.
package hwid
