// Package tftpd implements a read-only TFTP server (RFC 1350, with the option extension of
// RFC 2347, blksize of RFC 2348 and tsize of RFC 2349) that serves the files of one root to
// network-booting firmware, with limits on concurrent transfers.
//
// # Wiring
//
// A Server serves a directory (Dir, opened through os.Root so that nothing outside it can be
// reached) or any fs.FS (FS, e.g. an embed.FS holding iPXE builds). Serve takes a UDP socket
// the caller bound (port 69 in production, any port in tests); ListenAndServe binds one.
// Shutdown stops accepting requests and waits for running transfers; Close also aborts them.
//
//	srv := &tftpd.Server{Dir: "/srv/tftp", Logger: logger, OnTransfer: record}
//	go srv.ListenAndServe(":69")
//	...
//	srv.Shutdown(ctx)
//
// Package tftpdtest runs a Server on loopback and fetches from it as firmware does, for a
// host's own tests.
//
// The transfers themselves run on github.com/pin/tftp/v3, which opens one UDP socket per
// transfer (the transfer identifier of RFC 1350). The Server sits in front of it on the
// listening socket: it parses every request there, answers refusals itself and hands on
// only requests it admitted.
//
// # What is served
//
// Read requests (RRQ) in octet mode only. Write requests are refused with error 2 (access
// violation); netascii and mail mode with error 0. Names are taken relative to the root: leading
// slashes are dropped and backslashes read as slashes (as firmware of the Windows world sends
// them); a name that is then not a valid fs path (an element "." or "..", an empty element,
// a control character, more than MaxNameLen bytes) is refused with error 2, and so is a file
// that is not a regular file or that the root refuses (a symbolic link leading out of Dir).
// A missing file is answered with error 1. The messages on the wire are generic ("file not
// found", "access violation"); the detail goes to the Logger and to the OnTransfer hook.
//
// Options: blksize is granted up to MaxBlockSize (values under 512 are ignored, so the
// transfer uses 512); tsize is answered with the file's size. Other options (windowsize of
// RFC 7440, timeout) are not acknowledged, so a client falls back to their defaults. UEFI
// firmware (EDK2/OVMF) asks "tsize 0 blksize 1468 windowsize 4", aborts with error 8 after the
// option acknowledgement and asks again: both requests are served as two transfers.
//
// # Limits
//
// At most MaxTransfers transfers run at once, and at most MaxPerSource from one source
// address. A read request beyond either bound is read from the listening socket and dropped
// without an answer: no socket is opened and no file is touched for it, and it is counted in
// Counters. Firmware retransmits its request, and the retry is served once a slot is free.
// Refusals are answered from the listening socket and open no socket: write requests, other
// modes and bad names before the limits are looked at; a missing or refused file after a slot
// was taken for the lookup (and given back), so that when every slot is busy such a request is
// dropped like any other.
//
// A transfer whose client goes silent ends after Timeout*(Retries+1), 6 s by default, and
// holds its slot until then. Close, and Shutdown whose context ends, make every running
// transfer stop at its next block; a transfer whose client has gone silent still runs out its
// time, so both return within Timeout*(Retries+1).
//
// Each transfer's socket is bound to the wildcard address: its datagrams leave from the
// address the kernel's routing picks for the client, which is the listening address on a
// segment where the host has one address. (pin/tftp learns the address a request came to
// only from a *net.UDPConn it reads itself; it reads ours through the admission layer.)
// pin/tftp reports a client's own error message back
// to it when the client aborts a transfer, and a time-out as the text of the socket error;
// neither carries a path or any other detail of the host.
//
// # Hooks and counters
//
// OnTransfer receives a Transfer for every request that got an answer: file, peer, size,
// bytes sent, block size, start, duration, an Outcome and the detailed error. Counters returns
// totals a host exports (requests, transfers, completions, failures, bytes, refusals by kind,
// drops by limit, malformed datagrams, transfers running). Time comes from Now, so tests set
// it.
package tftpd
