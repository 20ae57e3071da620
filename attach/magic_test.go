package attach

import "testing"

func TestExtension(t *testing.T) {
	for _, c := range []struct {
		name string
		data string
		want string
	}{
		{"jpeg", "\xff\xd8\xff\xe0\x00\x10JFIF", ".jpg"},
		{"png", "\x89PNG\r\n\x1a\n\x00\x00", ".png"},
		{"tiff little-endian", "II*\x00\x08\x00", ".tif"},
		{"tiff big-endian", "MM\x00*\x00\x08", ".tif"},
		{"bmp", "BM\x36\x00", ".bmp"},
		{"webp", "RIFF\x10\x00\x00\x00WEBPVP8 ", ".webp"},
		{"riff but not webp", "RIFF\x10\x00\x00\x00WAVEfmt ", ""},
		{"numpy", "\x93NUMPY\x01\x00", ""},
		{"empty", "", ""},
		{"short jpeg", "\xff\xd8", ""},
	} {
		if got := Extension([]byte(c.data)); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
