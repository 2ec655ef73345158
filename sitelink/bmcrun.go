package sitelink

import (
	"context"
	"strings"

	"github.com/bettercompute/siteboot/bmc"
)

// BMCImages serves the images BMCs fetch for bmc.firmware and bmc.mediaInsert: a URL
// under a grant of its own, minted only when the operation is sent.
type BMCImages interface {
	// Check says whether the image of digest sha256 (64 lower-case hex digits) can be
	// served; an error refuses the command before anything is sent.
	Check(sha256 string) error
	// Mint returns the URL of the image under a fresh grant, and the grant. The grant
	// never goes into a log, a result or an error.
	Mint(sha256 string) (url, grant string, err error)
	// Revoke ends a grant Mint returned.
	Revoke(grant string)
}

// RunBMC carries out bmc.* command c on exec and returns its result: BMCOp's typed
// operation, journalled, claimed and sent by exec.RunOp. images (nil refuses bmc.firmware
// and bmc.mediaInsert) serves the command's image under a grant minted when the
// operation is sent; the grant is revoked once a firmware update is over (the BMC has no
// more use for it; a mounted medium keeps its grant) and replaced by "GRANT" in the
// result's message, where a BMC may have echoed the URL.
func RunBMC(ctx context.Context, exec *bmc.Executor, images BMCImages, c Command) BMCResult {
	var grant string
	var image BMCImageFunc
	if images != nil {
		image = func(c Command, sum string) (bmc.ImageURL, error) {
			if err := images.Check(sum); err != nil {
				return nil, &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: err.Error()}
			}
			return func(context.Context) (string, error) {
				u, g, err := images.Mint(sum)
				if err != nil {
					return "", &bmc.OpError{Op: c.Kind, Kind: bmc.ErrInvalid, Message: "no grant for the image"}
				}
				grant = g
				return u, nil
			}, nil
		}
	}
	tg, op, err := BMCOp(c, image)
	if err != nil {
		return NotSentResult(c, err)
	}
	res := BMCResultOf(c, exec.RunOp(ctx, c.ID, tg, op))
	if grant != "" {
		if c.Kind == KindBMCFirmware {
			images.Revoke(grant)
		}
		res.Message = strings.ReplaceAll(res.Message, grant, "GRANT")
	}
	return res
}
