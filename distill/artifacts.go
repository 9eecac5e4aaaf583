package distill

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"citizen/events"
	"citizen/model"
)

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// loadArtifact loads a PEFT adapter after checking its sha256.
func loadArtifact(dir, sum string, base model.Config) (*model.Adapter, error) {
	got, err := fileSHA256(filepath.Join(dir, "adapter_model.safetensors"))
	if err != nil {
		return nil, err
	}
	if sum != "" && got != sum {
		return nil, fmt.Errorf("%s: sha256 %s, lineage says %s", dir, got, sum)
	}
	a, err := model.LoadPEFT(dir, base)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// LoadVersion loads a trained version's adapter from its weights.trained
// lineage, checking the artifact's sha256: how a serving engine gets the
// weights of a version it is told to serve. root is the distiller's data
// directory, against which a relative artifact path resolves.
func LoadVersion(wt events.WeightsTrained, root string, base model.Config) (*model.Adapter, error) {
	if wt.Artifact == nil {
		return nil, fmt.Errorf("distill: version %s has no artifact", wt.Version)
	}
	a, err := loadArtifact(ArtifactDir(root, wt.Artifact.Path), wt.Artifact.SHA256, base)
	if err != nil {
		return nil, err
	}
	a.Name = wt.Version
	return a, nil
}

// ArtifactDir resolves an artifact path recorded in weights.trained: a
// relative path is under root (the distiller's data directory), an
// absolute one (older events) is used as it is.
func ArtifactDir(root, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(root, path)
}

// artifactPath is the path recorded for an artifact written at dir:
// relative to root when dir is under it.
func artifactPath(root, dir string) string {
	if rel, err := filepath.Rel(root, dir); err == nil && !strings.HasPrefix(rel, "..") {
		return filepath.ToSlash(rel)
	}
	return dir
}
