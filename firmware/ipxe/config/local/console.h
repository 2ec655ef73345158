/* siteboot iPXE builds: consoles on top of iPXE's defaults. */

/*
 * The syslog console, on every platform (iPXE leaves it out of BIOS builds): a script's
 * "set syslog <address>" sends everything iPXE prints to the boot server's syslog receiver,
 * while the screen keeps showing it.
 *
 * No serial console of iPXE's own: a server's BIOS (and SeaBIOS's sercon) already copies the
 * screen to its serial port, and iPXE writing there too interleaves every character twice;
 * on UEFI the firmware's console reaches the serial port.
 */
#undef CONSOLE_SYSLOG
#define CONSOLE_SYSLOG
