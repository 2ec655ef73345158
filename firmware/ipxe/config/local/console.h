/* siteboot iPXE builds: consoles on top of iPXE's defaults. */

/*
 * The syslog console, on every platform (iPXE leaves it out of BIOS builds): a script's
 * "set syslog <address>" sends everything iPXE prints to the boot server's syslog receiver,
 * while the screen (and the firmware's serial console on UEFI) keeps showing it.
 */
#undef CONSOLE_SYSLOG
#define CONSOLE_SYSLOG

/*
 * BIOS builds also print on the first serial port, where a headless machine's console (or
 * serial-over-LAN) is; on UEFI the firmware's own console already reaches the serial port.
 */
#if defined ( PLATFORM_pcbios )
  #undef CONSOLE_SERIAL
  #define CONSOLE_SERIAL
#endif
