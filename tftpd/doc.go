// Package tftpd implements a read-only TFTP server (RFC 1350, with the option extension of
// RFC 2347, blksize of RFC 2348, tsize of RFC 2349 and windowsize of RFC 7440) that serves
// the files of one root to network-booting firmware, with limits on concurrent transfers
// that a flood of spoofed requests cannot hold.
//
// # Wiring
//
// A Server serves a directory (Dir, opened through os.Root so that nothing outside it can be
// reached) or any fs.FS (FS, e.g. an embed.FS holding iPXE builds). Serve takes a UDP socket
// the caller bound (port 69 in production, any port in tests); ListenAndServe binds Addr.
// Shutdown stops accepting requests and waits for running transfers; Close also aborts them.
//
//	srv := &tftpd.Server{Addr: ":69", Dir: "/srv/tftp", Logger: logger, OnTransfer: record}
//	go srv.ListenAndServe()
//	...
//	srv.Shutdown(ctx)
//
// Package tftpdtest runs a Server on loopback and fetches from it as firmware does, for a
// host's own tests.
//
// The Server reads every request on the listening socket itself: it parses it, answers
// refusals from there and opens a UDP socket (the transfer identifier of RFC 1350) only for a
// request it admitted. Each transfer's socket is bound to port 0 of the address the request
// came to: the listening address when the socket is bound to one, else the destination the
// kernel reports for each datagram (IP_PKTINFO, IPV6_PKTINFO; on Linux). So on a host with
// several addresses on the boot segment (a floating address for the boot service, or a
// loopback lab where every agent has an address of 127.0.0.0/8) the client hears from the
// address it asked, as firmware (EDK2) and most clients require.
//
// The transfers run on the package's own sender, not on github.com/pin/tftp/v3, for two
// reasons: pin/tftp binds every transfer socket to the wildcard address (it learns a
// request's local address only from a *net.UDPConn it reads itself, and the admission above
// must read the listening socket first), so replies left from whatever address the routing
// picked; and its stop-and-wait loop parks and wakes a goroutine per block, which cost 1.3 to
// 3.2 times tftpd-hpa's CPU per byte. The sender runs one goroutine per transfer, sends each
// window of blocks from pooled buffers and waits for its acknowledgement on the same
// goroutine; while the acknowledgement is on its way it reads the block after the window
// into a spare buffer, so an acknowledgement that came meanwhile is read without a wait.
// On Linux a regular file of up to 4 MiB (an iPXE build, shim, GRUB) is not read at all:
// the transfers that send it share one read-only mapping of it, and each datagram goes to
// the kernel as its header and a pointer into the mapping, so a window costs one
// sendmsg(2) and no read (in a boot storm every machine fetches the same build). The
// process never reads the mapping itself; a file cut short under it fails the transfers
// that send it ("read file"), where a read by the process would crash it. Other files are
// read straight into the datagrams, the blocks a window needs with one preadv(2) (Linux,
// a file of Dir), or at offsets (an FS whose files are io.ReaderAt, as embed.FS and
// fstest.MapFS are): a transfer holds no buffer but its window's. The rest are read in
// sequence, small blocks through a pooled 128 KiB buffered reader.
//
// How a transfer waits depends on how many run. A transfer that starts while at most half
// the scheduler's Ps (GOMAXPROCS/2, at least one) transfers run gets, on Linux, a socket
// outside Go's network poller and waits for its client in recvfrom(2) on its own thread, as
// tftpd-hpa's process waits in select(2): a socket in the poller wakes the poller's thread
// at every acknowledgement and every time the client's kernel frees a datagram, on top of
// the transfer's own wake-up, which for blocks of 64 KiB cost about a fifth more CPU per
// byte. The other transfers wait in the poller, which serves many of them from one thread
// for less than a thread each would cost; on Linux such a transfer sends each window from
// inside its socket's RawConn.Read and parks at once, so that the read after its wake-up
// finds the acknowledgement (net's ReadFrom would first try a read that, right after a send,
// all but always finds nothing). Its socket does not block, so its window's send (where it
// goes in one gathered call: a window of several blocks, or a block from a mapping) and the
// read are raw system calls that do not tell the scheduler: the first call that did after
// the process was idle would wake Go's sysmon thread, which then polls for a while, at
// nearly every window of a lightly loaded server. Either way a transfer can be evicted and
// aborted as described below.
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
// found", "access violation"); the detail goes to the Logger and to the OnTransfer hook. An
// FS that is a PeerFS is opened with OpenFrom and the request's source, so a host can serve
// a file only to the machine it belongs to.
//
// Options: blksize is granted up to MaxBlockSize (values under 512 are ignored, so the
// transfer uses 512); tsize is answered with the file's size; windowsize (1 to 65535) is
// granted up to MaxWindow and up to MaxWindowBytes of data in flight (4 blocks of 65464
// bytes, 64 of 1468). Other options (timeout) are not acknowledged, so a client falls back to
// their defaults. UEFI firmware (EDK2/OVMF) asks "tsize 0 blksize 1468 windowsize 4", aborts
// with error 8 after the option acknowledgement and asks again: both requests are served as
// two transfers, and the second runs in windows of 4.
//
// # Limits
//
// A host whose configuration file sets them carries them as a [Limits], whose Validate
// holds them to the bounds a site may set and whose Apply puts them on the Server.
//
// At most MaxTransfers transfers run at once, and at most MaxPerSource from one source
// address. A read request beyond MaxPerSource is read from the listening socket and dropped
// without an answer: no socket is opened and no file is touched for it, and it is counted in
// Stats. When MaxTransfers are running, the oldest transfer whose client has not acknowledged
// anything yet, if it has waited EvictAfter (50 ms) since its first datagram, gives its slot
// to the new request: it is evicted (its socket closed, nothing more sent, reported as
// OutcomeEvicted and counted). Otherwise the request waits in a queue (of at most MaxQueued,
// 1,024, across the sockets; its source's queued requests count against MaxPerSource) and
// is served as soon as a slot frees up, oldest first, without a socket or an open file
// until then (a held request takes only a free slot: it evicts nothing). In a boot storm
// firmware is so served within a round trip of a free slot instead of after its
// retransmission time-out (EDK2 waits 4 s, six times, before it gives up). A
// request sent again while it waits keeps its place (the same datagram from the same
// address and port), and, sent again as a client retransmits (250 ms or more after it was
// last received), takes a slot at once if a transfer may be evicted then, as a new request
// would (so a client queued under a flood is not held behind the requests queued before
// it); one not sent again within QueueWait (5 s) is dropped, as is one that
// finds the queue full. A client evicted after it saw its first datagram is lost (it sends
// its acknowledgement again, not its request), which is why a transfer gets EvictAfter, many
// round trips of a boot segment, before it can be evicted, and why the next transfer of a
// source that has just answered one (acknowledged it to the end, or sent the error with
// which EDK2 aborts its size request before it asks for the file) is spared once: on a
// loaded server its first acknowledgement may come later than EvictAfter, and a spoofed
// source never answers, so it cannot earn the same.
//
// So requests with spoofed sources, which are never acknowledged, cannot hold the table
// (they fill the queue, but a new request evicts as if the queue were not there): at
// 1,000 of them a second each lives about 64 ms before the next takes its slot (64 slots
// turn over at up to 1,280 a second at 50 ms), and a real client, which acknowledges within
// a round trip, keeps the slot it got (a test floods 1,000 requests a second from 200
// loopback sources: the client has a slot at its first request). What a spoofed request gets
// back is bounded too: a transfer's first datagram (the OACK alone when options were
// granted, else DATA block 1, never a window) goes to a source that has not acknowledged
// any earlier transfer FirstRetries+1 times (once by default) instead of Retries+1, and no
// time-out error follows; the transfer still waits FirstWait (3 Timeouts) for the
// acknowledgement, so a client whose acknowledgement was lost sends it again and goes on,
// and one whose first datagram was lost sends its request again, which is answered as a
// new one. A 17-byte request without options gets 30 times its bytes back, against
// tftpd-hpa's 182 (6 sends), measured side by side in TestReflectionBesideTFTPDHPA (12x and
// 72x counting the IPv4 and UDP headers; 92x and 37x before, with three sends and the
// error); a request with options gets its OACK, smaller than the request. The server
// remembers the last 4,096 sources that acknowledged.
//
// Refusals are answered from the listening socket and open no socket: write requests, other
// modes and bad names before the limits are looked at; a missing or refused file after a slot
// was taken for the lookup (and given back), so that when every slot is busy such a request
// waits (or is dropped) like any other.
//
// A transfer whose client goes silent ends after Timeout*(Retries+1), 6 s by default (3 s
// before its first acknowledgement from a source never seen to acknowledge), and holds its
// slot until then unless a new request evicts it first. Close, and Shutdown whose context
// ends, make every running transfer stop at its next block; a transfer whose client has gone
// silent still runs out its time, so both return within Timeout*(Retries+1).
//
// The messages a transfer sends when it stops on the server's side are generic too: "server
// shutting down", "timed out", "read error".
//
// # Protocol
//
// A transfer sends an option acknowledgement only when the client asked an option that was
// granted (tsize of an empty file is left out: curl refuses a size of 0), then DATA blocks a
// window at a time (one block without windowsize): the window is sent without waiting, then
// the transfer waits for an acknowledgement of one of its blocks, and goes on from the block
// after the one acknowledged, sending the window from there (RFC 7440: a short
// acknowledgement, of a block before the window's last, says the blocks after it were lost).
// Without an acknowledgement within Timeout the window is sent again from its first block,
// up to Retries times. Never more than the window's blocks are in flight. An acknowledgement
// of a block outside the window (a duplicate of an earlier one) is ignored, so no block is
// sent twice for it; a datagram from another port than the client's is answered with error 5
// (unknown transfer id) and otherwise ignored; an ERROR from the client ends the transfer as
// aborted. Block numbers wrap from 65535 to 0, and a file of a whole number of blocks ends
// with an empty block.
//
// A window goes to the kernel in as few system calls as it allows (on Linux): with UDP
// generic segmentation offload (UDP_SEGMENT), one sendmsg carries the whole window when its
// datagrams fit 64 KiB (up to 44 blocks of 1468 bytes); otherwise, or when the path refuses
// GSO (a datagram over the route's MTU), one sendmmsg. Elsewhere each datagram is one call.
//
// # Hooks and stats
//
// OnTransfer receives a Transfer for every request that got an answer: file, peer, size,
// bytes sent, block size, window, start, duration, an Outcome and the detailed error. Stats
// returns totals a host exports (requests, transfers, completions, failures, bytes, refusals
// by kind, drops by limit, evictions, windowed transfers, requests queued, malformed
// datagrams, transfers running and requests waiting). Time comes from Clock, so tests move it.
package tftpd
