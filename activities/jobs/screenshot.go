package jobs

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// ScreenshotFile is the path, relative to a bodies directory, of the PNG
// of a rendered page's viewport (--render-screenshots): next to its body,
// <job>/<sha256 of the URL>.png.
func ScreenshotFile(job, url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(job, hex.EncodeToString(sum[:])+".png")
}

// writeScreenshot writes a page's screenshot under the bodies directory
// and returns its ScreenshotFile, or "not stored: " and why (the page is
// recorded all the same).
func writeScreenshot(root, dir, job, url string, png []byte) string {
	rel := ScreenshotFile(job, url)
	if err := writeUnder(root, dir, rel, png); err != nil {
		return "not stored: " + err.Error()
	}
	return rel
}
