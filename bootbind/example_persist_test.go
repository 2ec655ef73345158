package bootbind_test

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/bettercompute/siteboot/bootbind"
	"github.com/bettercompute/siteboot/hwid"
)

// A host keeps its boot nonces across a restart: LoadFile once at start, SaveFile after
// each nonce issued (and every second or so, and at the end). A machine between its chain
// and its script boots on.
func ExampleNonces_SaveFile() {
	dir, err := os.MkdirTemp("", "nonces")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "boot-nonces.json")

	before := bootbind.NewNonces(bootbind.Config{})
	mac, machine := hwid.MAC{0x52, 0x54, 0, 0, 0, 1}, netip.MustParseAddr("192.0.2.150")
	n, _ := before.Issue(mac, bootbind.KindChain, machine)
	if err := before.SaveFile(path); err != nil {
		fmt.Println(err)
		return
	}

	// The restart.
	after := bootbind.NewNonces(bootbind.Config{})
	kept, err := after.LoadFile(path)
	if d, ok := errors.AsType[*bootbind.DamagedError](err); ok {
		fmt.Println("damaged, set aside as", d.SetAside) // and log it; the host starts anyway
	}
	fmt.Println("kept:", kept)
	fmt.Println("the machine's script request:", after.Claim(n, mac, machine))
	// Output:
	// kept: 1
	// the machine's script request: bound
}
