//go:build !linux

package connlimit_test

const floodChildEnv = "SITEBOOT_CONNLIMIT_FLOOD_CHILD"

func floodChild(string) int { return 1 } // TestDescriptorFlood is Linux only
