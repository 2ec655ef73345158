// Package syslogd is a syslog receiver (RFC 5424 and the BSD form of RFC 3164, over UDP
// as RFC 5426 carries them) that puts a machine's own console, iPXE's syslog output, into
// its boot timeline.
//
// iPXE sends every console line as one datagram when its script sets ${syslog} (or DHCP
// option 7 names a log server): "<PRI>[HOSTNAME ]ipxe: LINE" (src/net/udp/syslog.c), with
// the console's colour sequences in it. A [Server] parses each datagram ([Parse]),
// removes escape sequences and everything that is not printable text ([CleanText]), and
// hands the line to its Sink as a bootevents.StageConsole event from the sender's address;
// a bootevents.Timeline puts it in the timeline of the machine that address was last
// answered at, bounded by its LinesPerBoot and MaxLine.
//
// # Wiring
//
// Nothing listens unless a host starts a Server: Serve on a UDP socket the host bound
// (UDP 514 is a privileged port), ListenAndServe on Addr. Shutdown and Close stop it and
// make Serve return ErrServerClosed. One goroutine reads; a datagram is handled in place,
// at most MaxMessage bytes, so a flood costs one core's reading and no memory beyond the
// timeline's bound.
//
// # Security
//
// Syslog over UDP is unauthenticated: any host on the segment can write lines under any
// source address it can spoof. The lines are shown as the machine's console, never acted
// upon, and kept only for addresses the host answered (an unknown source is counted by
// the timeline, not kept). iPXE prints every URL it fetches, and a boot's URLs carry its
// secrets (the boot nonce in a query, a cache grant in a path): each line is kept with its
// URLs redacted ([RedactURLs]), so that no secret reaches the timeline, its JSON or a log.
package syslogd
