package syslogd_test

import (
	"fmt"

	"github.com/bettercompute/siteboot/syslogd"
)

func ExampleParse() {
	m, err := syslogd.Parse([]byte("<11>ipxe: \x1b[31mConnection timed out (https://ipxe.org/4c0a6035)\x1b[0m\n"))
	if err != nil {
		panic(err)
	}
	fmt.Println(syslogd.SeverityName(m.Severity), m.App, syslogd.CleanText(m.Text, 160))
	// Output: err ipxe Connection timed out (https://ipxe.org/4c0a6035)
}
