// Package secureboot serves the UEFI Secure Boot chain of a site agent (DESIGN.md SB1):
// Debian's signed shim, then Debian's signed network GRUB, then the machine's own GRUB
// configuration, spelled by package grubcfg from the same boot decision iPXE gets, with the
// kernel and initrd over TFTP from the image cache under the machine's grant. It delivers
// the chain over proxy DHCP answers, TFTP and HTTP, hands each machine a boot key, and
// builds the FAT RAM disk that UEFI HTTP boot mounts. See package grubcfg for what the
// signed GRUB can do and why the chain has the shape it has.
//
// # Wiring
//
// A host builds a [Chain] from a [Config] with [New] and wires it beside the other
// packages:
//
//   - proxy DHCP: for a machine the host decided boots with Secure Boot (its own rule: an
//     entry's word, a site default for x86-64 UEFI machines), and only after its own checks
//     (a live entry, the fence), its proxydhcp.Handler returns [Chain.AnswerDHCP]. iPXE is
//     never named to such a machine: the firmware would refuse it.
//   - TFTP: tftpd.Server.FS is [Chain.FS] (shim, GRUB, the Chain GRUB reads first, the key
//     files, the machines' configurations, the image cache under its grants, and
//     Config.Root for every other name), and tftpd.Server.OnTransfer calls
//     [Chain.OnTransfer], which binds nonces and activates keys from what tftpd delivered.
//   - HTTP: the Chain is mounted at [PathSB] and [PathConfig].
//   - The decision: Config.Decider is the boot handler (*ipxe.Handler has Decide). The
//     Chain asks it with [LoaderName] as the query's Loader and the address the key was
//     delivered to as its Remote; a host whose entry rule binds iPXE requests to their boot
//     nonce lets [LoaderName] requests through, or asks [Chain.Bind].
//   - Nonces and keys come from package bootbind: Config.Nonces is the store proxy DHCP
//     binds its answers to iPXE with; Config.Keys, when nil, is the Chain's own.
//   - Stop it with [Chain.Shutdown] (or [Chain.Close]) after the TFTP and HTTP servers.
//
// Beside bootserver: the chain's Nonces are the Server's (bootserver.Server.Nonces, or
// the store given as its Config.Nonces); its Decider is the Server's boot handler
// (bootserver.Server.Boot, through a DeciderFunc when the chain is built first); and
// bootserver.Config.SecureBoot does the rest: it mounts the chain's TFTP names
// ([Chain.Mounts]) and the cache's grants under [Chain.TFTPCacheDir], binds LoaderName
// with the chain's Keys, serves PathSB and PathConfig with the Chain, and reports TFTP's
// transfers to [Chain.OnTransfer].
//
// # Threat model
//
// The boot key stands in, for GRUB, for the boot nonce iPXE presents (bootbind's S1
// binding): a machine's configuration, which carries its discovery token, cache grant and a
// signed assertion, goes only to the address its key was delivered to, presenting that key,
// within the key's window. A key reaches a machine two ways. After PXE, the key file
// (sb/key?mac=MAC) is handed out only for a MAC whose shim was fetched under one of its
// nonces, and the key becomes active only when tftpd reports the key file's transfer
// complete to the address that owns that nonce (the address the unicast 4011 answer went
// to); fetched by anyone else, it is dropped. After UEFI HTTP boot, the RAM disk carries the
// key, active at once for the connection that fetched the image first under the offer's
// nonce; another address fetching under the same nonce gets 404. So the exposure is
// bootbind's and no more: a host on the machine's segment that spoofs its MAC (and for PXE
// its address) and wins the race can take its configuration; a host elsewhere, a bystander
// that reads the broadcast offer without the machine's MAC (when bootbind.Nonces.Neighbor
// is set), a guesser (128-bit keys) or a replay after the window cannot. Every refusal is
// counted by reason ([Stats]) and answered "file not found" (TFTP) or 404 (HTTP), and no
// refused request reaches the Decider. (A refused key may be one whose file's transfer is
// not yet reported: the Chain's back-off asks again, and after its last attempt gives up
// and boots the local disk, as every give-up does: the Decider's "no" and a query no Chain
// sends get the exit configuration, the fenced answer the fenced one, which boot the ESP's
// own configuration, else its loader through shim, and exit only without a disk; see
// grubcfg.Exit. A reboot would come back to the same network boot, and Debian 12's GRUB
// hands the firmware success for any exit, on which OVMF opens its menu.) Names from the
// network are parsed by [ParseName] and
// ipxe.ParseQuery, bounded, and never reflected into a configuration: the configuration
// URLs are rebuilt from parsed values, and every value goes through grubcfg's checks.
//
// Shim, GRUB and the RAM disk are public (signed binaries anyone may have); sb/NONCE/
// names only tell the Chain where the machine is.
//
// # Limits
//
// x86-64 UEFI over IPv4 only (Debian's signed GRUB's network is IPv4). At most MaxRenders
// configurations are in the making at once. A TFTP request waits at most RenderWait for its
// decision, then gets a configuration that waits RetryDelay and asks again. Shim and GRUB
// are read once, when the first machine asks ([Chain.Load] reads them at start).
package secureboot
