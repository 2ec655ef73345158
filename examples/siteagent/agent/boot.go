package agent

import "net/http"

// bootHandler is the /boot/ handler: chain, scripts and the iPXE builds.
func (a *Agent) bootHandler() (http.Handler, error) {
	return http.NotFoundHandler(), nil
}
