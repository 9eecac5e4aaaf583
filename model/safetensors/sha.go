package safetensors

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// FileSHA256 returns the lowercase hex SHA-256 digest of the file at path,
// the form recorded as an artifact digest (weights.trained events).
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("safetensors: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
