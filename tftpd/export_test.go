package tftpd

// PollerOnly makes every transfer of s wait in the network poller, as transfers do when
// many run at once, so that tests cover that path with one transfer at a time.
func PollerOnly(s *Server) { s.pollerOnly = true }

// Mapped is how many files s holds mapped for its transfers.
func Mapped(s *Server) int { return s.maps.mapped() }

// MaxMapped is the largest file a transfer sends from a mapping.
const MaxMapped = maxMapped
