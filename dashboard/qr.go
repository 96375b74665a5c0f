package dashboard

import (
	"image/color"
	"strconv"
	"strings"

	"github.com/boombuler/barcode/qr"
)

// qrCode is a QR code drawn as one SVG path of its dark modules, with the
// quiet zone of four modules the standard asks for.
type qrCode struct {
	Size int    // modules across, quiet zone included
	Path string // the dark modules
}

// newQR encodes text at error correction level M.
func newQR(text string) (*qrCode, error) {
	code, err := qr.Encode(text, qr.M, qr.Auto)
	if err != nil {
		return nil, err
	}
	const quiet = 4
	b := code.Bounds()
	var p strings.Builder
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if c := color.GrayModel.Convert(code.At(x, y)).(color.Gray); c.Y < 128 {
				p.WriteString("M" + strconv.Itoa(x-b.Min.X+quiet) + " " + strconv.Itoa(y-b.Min.Y+quiet) + "h1v1h-1z")
			}
		}
	}
	return &qrCode{Size: b.Dx() + 2*quiet, Path: p.String()}, nil
}
