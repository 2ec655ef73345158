// This directory is its own module so that the pinned iPXE source archive stays out of the
// siteboot module's zip. It holds no Go code.
module github.com/bettercompute/siteboot/firmware/ipxe

go 1.26.0
