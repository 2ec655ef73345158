// Package ipxe renders iPXE scripts that no value can subvert, and serves them, with the
// iPXE builds, as the boot HTTP endpoint of a site agent: GET /boot/chain.ipxe?n=..,
// /boot/ipxe?mac=..&uuid=..&ip=..&n=.. and /boot/files/NAME.
//
// # Scripts
//
// The renderer is pure: [Boot] (kernel, initrds, kernel command line), [Chain], [Exit],
// [Fenced] (wait, exit 1), [Wait] (sleep, chain again), [LocalBoot] and [Sanboot]
// (sanboot --no-describe URL) each have a Render method that returns the script or a
// [*ValueError]. Scripts that fetch retry with a bounded back-off ([Retry]); what they do
// when every attempt failed is in "Giving up" below. Package grubcfg, which
// renders GRUB configurations for Secure Boot machines, shares the renderer's core: the
// kernel command line's grammar, assembly and cap, [Param], [Retry] and [ValueError] are the
// same types there.
//
// With [Config.Syslog] the chain script first sets iPXE's ${syslog} to the host's syslog
// receiver, so an iPXE built with its syslog console (CONSOLE_SYSLOG) sends its console
// lines there, into the machine's timeline (package syslogd). Debian's iPXE
// 1.0.0+git-20190125 is built without it (its ipxe.efi holds no syslog setting) and ignores
// the line.
//
// # What cannot be injected
//
// iPXE's own parser (src/image/script.c, src/core/exec.c, src/core/settings.c) splits a
// script into lines at '\n' and joins a line that ends in a backslash with the next; strips one
// '\r'; treats a line starting with ':' as a label; splits a line into tokens at white
// space, with no quoting of any kind; ends a command at a token "||", "&&" or ";"; starts a
// comment at a token beginning with '#'; and expands "${name}" inside every token, repeatedly.
// Options are read only before the first argument, so an argument after a URL cannot become
// an option. Linux then splits the kernel command line at white space (including byte 0xa0)
// and lets '"' join words.
//
// So every value the renderer places is checked against that grammar: a kernel parameter
// value is printable ASCII without space, '"', backslash or '$'; a parameter name is
// [A-Za-z0-9][A-Za-z0-9._-]*; a site command-line token also may not start with '#', be a
// separator, or set a bc.* parameter; a URL is http, https or tftp with only the characters
// RFC 3986 allows, less '$', or a path "/..." without ':' (iPXE's parse_uri takes whatever
// precedes the first ':' anywhere in a URL as its scheme). Anything else is refused with [ErrUnsafe] (or [ErrInvalid] for
// well-formed but wrong settings); nothing is escaped, trimmed or silently dropped. The
// only "${...}" in any script are the ones the chain script writes on purpose.
//
// # The boot endpoint
//
// [NewHandler] takes a [Config] naming the host's small interfaces: [Entries] (the live boot
// entry of the machine asking, from its [Query]; the host decides whether the machine's arch
// and UUID match the entry), [Fence] (active, epoch), [Tokens] (the discovery token, asked
// once per entry and reused), [Signer] (a signed discovery assertion for [Claims]; the host
// signs with package assertion, which owns the assertion's lifetime), optionally [Cache]
// (bc.cache and sanboot grant URLs, minted by package imagecache) and OnDiscovered. An
// [Entry] carries the host's own reference ([Entry.Ref]) back to Tokens and Cache.
// /boot/ipxe answers:
//
//   - 200 with the boot script: the site's kernel and initrds, then on the kernel command
//     line initrd=..., the host's bc.* parameters, bc.token, bc.assertion, bc.cache (when the
//     cache gives a URL), then the site's cmdline;
//   - 200 with a sanboot script for an entry with a sanboot digest whose ISO is pinned and
//     cached; otherwise 503 with a wait script (sleep 30 s, chain again), never the ramdisk;
//   - 503 with a wait script while the discovery token is not available;
//   - 200 with the exit script (exit 1) for a MAC without a live entry, reported to OnDiscovered
//     (the host keeps its own rule of what counts, e.g. only MACs proxy DHCP saw);
//   - 200 with the exit script, and no secret, when the host says the machine does not
//     match its entry ([ErrMismatch]), counted as Mismatched;
//   - 200 with the exit script, and no secret, when the host says the requester is not
//     bound to its DHCP answer to the machine ([ErrUnbound]; see Boot nonces), counted as
//     Unbound, the host's reason logged;
//   - 200 with the exit script, and no secret, when the query's ip is not the connection's
//     address (IPRefused) or its uuid is another machine's than the entry's UUID, in
//     whichever spellings the two are ([hwid.DifferentMachines]; UUIDRefused), whatever the
//     host checked;
//   - 503 with the fenced script while this agent is not the active boot server;
//   - 200 with the exit script for a query that does not parse (of /boot/ipxe or of the
//     chain script), 405 for methods other than GET and HEAD and for
//     HEAD /boot/ipxe, 431 for a header over 8 KiB, 500 with a wait script when a host
//     interface fails.
//
// Every answer that gives up on the machine is a 200 whose script ends in "exit 1": iPXE
// runs no body of a 4xx answer (its chain command fails instead, and the chain script
// would back off through its attempts first), and a plain "exit" returns success, on
// which UEFI opens its Boot Manager instead of booting its next Boot#### entry. A
// [Loader] answers with [Answer.Status] (404 and 400 for these); package secureboot's GRUB
// configuration answers them as a 200 with GRUB's own give-up configuration, for the same
// reason.
//
// # Giving up
//
// Every path on which a machine's network boot gives up ends so that the firmware boots
// something else, normally the next Boot#### entry, the local disk (tinkerbell/tinkerbell
// #984; Sidero Metal's notes): a reboot would bring it back to the same network boot, and
// where the site's own DHCP server names the chain URL, or no agent is active for a while,
// it would loop there and never reach its disk.
//
//   - Unknown, refused or unparsable: the exit script at once (200, "exit 1").
//   - Fenced: 503, whose body iPXE does not run, and no Retry-After (iPXE would ask again
//     for ever). The chain script's fetch fails and it backs off through its attempts
//     ([Config.Retry]: by default 4 tries, 2 + 4 + 8 s apart), so an agent that takes over
//     within that wait (a failover where the chain URL follows the active agent, or this
//     agent fenced for a moment) still boots the machine from the network; then it says
//     "giving up after N attempts" and runs "exit 1". The [Fenced] script itself (the
//     body, for people and for a loader that runs it) waits [Config.FencedDelay] and ends
//     in "exit 1" too.
//   - The chain script's fetch failing for any other reason (the agent unreachable, a 4xx
//     or 5xx without Retry-After): the same back-off, then "exit 1".
//
// "reboot" is left in one place: a script that boots what the server told it to ([Boot],
// [Sanboot]) or waits to ask again ([Wait]) chains to its fallback (/boot/chain.ipxe) when
// its own attempts failed, and only when that chain fails too, so the server is gone in
// the middle of a boot the machine has an entry for, waits 10 s and reboots. That reboot
// is what reaches whichever agent is active now (the firmware asks DHCP again); when none
// is, nobody names a boot file, or the one named cannot be fetched, and the firmware (or
// iPXE's own autoboot) moves on to the next entry by itself, so it does not loop. A
// [Boot] or [Sanboot] without a fallback gives up with "exit 1".
//
// HEAD of the chain script and of the files is answered as GET without the body (UEFI HTTP
// boot sends HEAD before GET). HEAD /boot/ipxe is 405 with "Allow: GET": the headers of a
// script (its length) would need the script, so a token and a fresh signed assertion, and
// no firmware sends one there; a HEAD asks the host nothing, signs nothing and hands out
// nothing. The chain script sends the MAC and IP of "netX", the NIC
// iPXE booted from (a machine with two NICs boots from the second), the MAC as
// ${netX/mac:hexhyp} (see [Chain] for why not ${netX/mac} or ":uristring"), and the
// firmware's ${platform} and ${buildarch}, read as the option 93 arch ([Query.Arch]).
//
// iPXE runs the body of a 2xx answer only. A waiting answer therefore also carries
// Retry-After, which iPXE honours by asking the same URL again after that many seconds; the
// fenced answer makes the chain script's fetch fail, and its own back-off then ends in
// "exit 1" (see Giving up). The bodies say the same for people and tools reading them.
//
// Every script answer has Content-Type text/plain and Cache-Control: no-store.
//
// # What the assertion states
//
// [Claims] holds what the server knows, not what the query claims (S2): the IP is the
// connection's address, and a query ip that differs gets no secret; the UUID is the
// entry's when it has one, in the spelling the entry holds (a firmware placeholder counts as
// none), and a query uuid that is not the same machine ([hwid.SameMachine]: any spelling of
// it against any other) gets no secret; only an entry without a UUID takes the query's. A
// host behind a NAT or a proxy that knows its clients' addresses sets the request's
// RemoteAddr before the handler runs (the QEMU tests do, for QEMU's user-mode network).
//
// # Boot nonces
//
// A host that answers the machine's iPXE by proxy DHCP can bind its secrets to that answer
// (S1): it names a one-time boot nonce in the chain URL (/boot/chain.ipxe?n=NONCE; a nonce is
// 1 to [MaxNonceLen] of [A-Za-z0-9_-], anything else is 400). The chain script carries it
// into /boot/ipxe as &n=NONCE ([Chain.Nonce]), and every URL a script chains to for a fresh
// answer keeps it: the token and sanboot waits, the fallback after failed fetches, the wait
// after a host error; iPXE's own Retry-After asks the same URL. The handler keeps no policy:
// it hands the nonce ([Query.Nonce]) and the connection's address ([Query.Remote]) to the
// host's [Entries], which decides (package bootbind: a nonce belongs to the address its
// proxy DHCP answer went to, within a window after the answer) and says no with [ErrUnbound].
//
// A request without a nonce (a site whose own DHCP server names /boot/chain.ipxe) is left
// to the same host rule. A host that does not check the nonce trusts the network instead:
// anyone who can reach this handler and knows a MAC with a live entry (MACs are in every
// broadcast on the segment) gets that machine's discovery token, cache grant and a fresh
// assertion, bound to the requester's own address. Such a site keeps the boot network to
// the machines being booted.
//
// # Other boot loaders
//
// [Config.Loaders] names boot loaders other than iPXE that the handler answers on paths of
// their own (GRUB on a machine that boots with Secure Boot, at /boot/grub.cfg, say), GET
// only, with /boot/ipxe's decision: the same fence, Entries (told the loader in
// [Query.Loader], so the host binds such requests by its own rule), IP and UUID checks,
// token, cache grant, assertion and counters. The handler hands each outcome to the loader's
// Render as an [Answer] (boot the ramdisk with these URLs and parameters; exit; fenced; wait)
// and sends the status and body it returns; it renders no other loader's language itself.
// A loader never gets a sanboot (an ISO is booted by iPXE): its machine gets the wait
// answer of a server error, and no secret. [Config.Validate] renders each kind of answer
// once through each loader.
//
// # The decision without HTTP
//
// [Handler.Decide] is the decision itself, for a host that answers a machine over another
// protocol: a GRUB configuration asked over TFTP, say. The host parses the machine's query
// ([ParseQuery]), sets [Query.Remote] to the address the request came from and
// [Query.Loader] to its loader, and spells the [Answer]; its Reason names why a machine
// does not boot now, in the words of the counters. The handler's paths answer with Decide's
// answer, so every protocol gets one decision.
//
// # Files by role
//
// The pure renderer is in render_*.go (render_script.go: the line builder and [Retry];
// render_boot.go: [Boot], [Sanboot]; render_chain.go: [Chain]; render_fallback.go: [Exit],
// [Fenced], [Wait]; render_check.go: the value grammar). The boot handler is in handler*.go
// (handler.go: [Config], [Handler] and /boot/ipxe; handler_host.go: the host's interfaces;
// handler_query.go: [ParseQuery]; decide.go: [Handler.Decide]; handler_tokens.go: the token cache; handler_loader.go:
// [Loader]; handler_files.go:
// /boot/files/; handler_stats.go: [Stats]). server.go holds the limits every HTTP path of a
// boot server gets ([MaxHeaderBytes], [ReadHeaderTimeout], [ReadTimeout], [IdleTimeout]):
// [NewServer] applies them all, [LimitHeaders] the exact header cap to any handler.
//
// # Tested against real iPXE
//
// Tests named TestQEMU_* boot a QEMU machine whose NIC ROM is Debian's iPXE
// (1.0.0+git-20190125) on QEMU's user-mode network, so no root is needed: the chain script
// reports the machine's MAC, SMBIOS UUID and IP; a 503 with Retry-After is asked again by
// iPXE itself; Debian's kernel boots with a busybox initramfs and /proc/cmdline holds
// exactly the rendered parameters; a fenced agent makes iPXE back off, give up and hand
// the firmware back a failure, on which SeaBIOS moves on (TestQEMU_RealIPXEFencedGivesUp;
// e2e TestE2E_OVMFFencedFallsThrough shows OVMF booting its disk after it); a sanboot
// entry waits, then boots the ISO by HTTP ranges. They skip when qemu-system-x86_64
// (qemu-system-x86), busybox (busybox-static), the iPXE ROM (ipxe-qemu) or a kernel in
// /boot is missing, and fail instead under SITEBOOT_REQUIRE_PEERS=1.
//
// # Testing
//
// Package ipxetest serves fixed iPXE scripts on loopback to a test, recording what was
// asked for.
//
// # Limits
//
// Query strings are at most [MaxQueryLen] bytes; URLs [MaxURLLen]; values [MaxValueLen];
// the kernel command line [DefaultMaxCmdline] unless [Boot.MaxCmdline] says otherwise; the
// handler keeps at most [Config.MaxTokens] tokens, each until its entry's not-after.
package ipxe
