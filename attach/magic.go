package attach

import "bytes"

// magic maps the first bytes of an encoded image to the extension both DALI's
// fn.readers.file and torchvision's ImageFolder accept for it.
var magic = []struct {
	prefix []byte
	ext    string
}{
	{[]byte{0xFF, 0xD8, 0xFF}, ".jpg"},
	{[]byte("\x89PNG\r\n\x1a\n"), ".png"},
	{[]byte("II*\x00"), ".tif"},
	{[]byte("MM\x00*"), ".tif"},
	{[]byte("BM"), ".bmp"},
	{[]byte("P5"), ".pgm"},
	{[]byte("P6"), ".ppm"},
}

// Extension returns the file extension (with the dot) of the image data encodes, found from
// its first bytes, or "" if it is none the readers decode.
func Extension(data []byte) string {
	if len(data) >= 12 && bytes.Equal(data[:4], []byte("RIFF")) && bytes.Equal(data[8:12], []byte("WEBP")) {
		return ".webp"
	}
	for _, m := range magic {
		if bytes.HasPrefix(data, m.prefix) {
			return m.ext
		}
	}
	return ""
}
