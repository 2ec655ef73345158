// Package bootscript is the renderer core that siteboot's boot-script renderers share: ipxe
// writes iPXE scripts with it and grubcfg GRUB configurations. What is the same whatever
// language a script is written in is written here once: the kernel command line (its
// [Param]s, the bytes a word may hold, its assembly and its cap), the bounded back-off of a
// fetch ([Retry]) and the plan of the scripts that retry, wait or are fenced, and the typed
// refusal ([ValueError]).
//
// # What each renderer keeps
//
// A renderer describes its language in a [Lang]: its name, its own ErrUnsafe and ErrInvalid
// sentinels (made with [NewSentinel], so a [ValueError] names the renderer's package), the
// bytes its syntax gives a meaning to inside a command-line word, and the whole tokens it
// reads as syntax. It writes the plans through a [Writer] of its own. URLs, quoting, the
// script's header and every command's spelling stay in the renderer, as do its grammar
// checker, its golden files and its fuzz targets; ipxe and grubcfg export the shared types
// under their own names (type aliases), so their callers see no difference.
//
// # Security
//
// Nothing is escaped or trimmed: a value that its language or the Linux kernel would read as
// syntax is refused with the renderer's ErrUnsafe, and a [ValueError]'s reason never echoes
// the value.
package bootscript
