package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Keys. API keys are random strings "sk-citizen-<43 base64url chars>"; only
// their SHA-256 is stored. Keys live in one JSON file (by default
// <data dir>/keys.json, mode 0600) written atomically (temp file + rename):
// they are configuration, not history, so they are not events. The `citizen
// keys create|list|revoke` commands call CreateKey, ListKeys and RevokeKey on
// that file; a running gateway notices the change within a second (see
// FileKeys).

// DevKey is the development key, accepted only when Config.DevMode enables
// it (by default: when the gateway listens on a loopback address). It maps
// to tenant DevTenant.
const (
	DevKey    = "sk-citizen-dev"
	DevTenant = "dev"
)

// Errors of the key store.
var (
	// ErrKeyNotFound: no key with that id.
	ErrKeyNotFound = errors.New("gateway: key not found")
	// ErrBadKeySpec: a KeySpec without tenant, or with negative limits.
	ErrBadKeySpec = errors.New("gateway: bad key spec")
)

// Key is a stored API key (without the secret).
type Key struct {
	ID      string    `json:"id"`   // "key_" + first 12 hex digits of the hash
	Hash    string    `json:"hash"` // hex SHA-256 of the secret
	Name    string    `json:"name,omitempty"`
	Tenant  string    `json:"tenant"`
	User    string    `json:"user,omitempty"`
	Created time.Time `json:"created"`
	Revoked time.Time `json:"revoked,omitzero"`
	// Per-key limits; 0 means the gateway's default (Config.Limits).
	RequestsPerMinute int `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int `json:"tokens_per_minute,omitempty"`
}

// Active reports whether the key is not revoked.
func (k Key) Active() bool { return k.Revoked.IsZero() }

// KeySpec describes a key to create.
type KeySpec struct {
	Name              string
	Tenant            string
	User              string
	RequestsPerMinute int
	TokensPerMinute   int
}

// KeyStore resolves presented API keys. Lookup gets the hex SHA-256 of the
// presented secret and returns the active key with that hash. Safe for
// concurrent use.
type KeyStore interface {
	Lookup(hash string) (Key, bool)
}

// KeysFileName is the key file's name inside the data directory.
const KeysFileName = "keys.json"

// DefaultKeysFile returns the key file of a data directory.
func DefaultKeysFile(dataDir string) string { return filepath.Join(dataDir, KeysFileName) }

// HashKey returns the hex SHA-256 of an API key secret.
func HashKey(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// NewKeySecret returns a fresh random API key secret.
func NewKeySecret() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("gateway: key entropy: %w", err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, 11+len(b))
	out = append(out, "sk-citizen-"...)
	for _, c := range b {
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out), nil
}

type keyFile struct {
	Keys []Key `json:"keys"`
}

var fileLocks sync.Map // path -> *sync.Mutex: serialises writers in one process

func lockFile(path string) func() {
	m, _ := fileLocks.LoadOrStore(filepath.Clean(path), &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

func readKeyFile(path string) ([]Key, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: reading keys: %w", err)
	}
	var f keyFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("gateway: parsing %s: %w", path, err)
	}
	return f.Keys, nil
}

func writeKeyFile(path string, keys []Key) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("gateway: keys dir: %w", err)
	}
	b, err := json.MarshalIndent(keyFile{Keys: keys}, "", "  ")
	if err != nil {
		return fmt.Errorf("gateway: encoding keys: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".keys-*.json")
	if err != nil {
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gateway: writing keys: %w", err)
	}
	return nil
}

// CreateKey adds a key to the key file at path (created if missing) and
// returns its secret, which is shown once and never stored.
func CreateKey(path string, spec KeySpec) (secret string, key Key, err error) {
	if spec.Tenant == "" || spec.RequestsPerMinute < 0 || spec.TokensPerMinute < 0 {
		return "", Key{}, fmt.Errorf("%w: tenant is required and limits must be >= 0", ErrBadKeySpec)
	}
	defer lockFile(path)()
	keys, err := readKeyFile(path)
	if err != nil {
		return "", Key{}, err
	}
	secret, err = NewKeySecret()
	if err != nil {
		return "", Key{}, err
	}
	h := HashKey(secret)
	key = Key{ID: "key_" + h[:12], Hash: h, Name: spec.Name, Tenant: spec.Tenant, User: spec.User,
		Created: time.Now().UTC().Truncate(time.Second), RequestsPerMinute: spec.RequestsPerMinute, TokensPerMinute: spec.TokensPerMinute}
	keys = append(keys, key)
	if err := writeKeyFile(path, keys); err != nil {
		return "", Key{}, err
	}
	return secret, key, nil
}

// ListKeys returns the keys in the file at path (revoked ones included),
// oldest first. A missing file has no keys.
func ListKeys(path string) ([]Key, error) {
	keys, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(keys, func(i, j int) bool { return keys[i].Created.Before(keys[j].Created) })
	return keys, nil
}

// RevokeKey marks the key with the given id revoked. Revoking a revoked key
// succeeds; an unknown id gives ErrKeyNotFound.
func RevokeKey(path, id string) error {
	defer lockFile(path)()
	keys, err := readKeyFile(path)
	if err != nil {
		return err
	}
	for i := range keys {
		if keys[i].ID == id {
			if keys[i].Active() {
				keys[i].Revoked = time.Now().UTC().Truncate(time.Second)
				return writeKeyFile(path, keys)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrKeyNotFound, id)
}

// FileKeys is a KeyStore backed by a key file. It reloads the file when its
// modification time or size changes, checking at most once per
// RecheckEvery (default 500 ms), so keys created or revoked by the CLI take
// effect within half a second. Safe for concurrent use.
type FileKeys struct {
	path         string
	RecheckEvery time.Duration

	mu      sync.RWMutex
	byHash  map[string]Key
	modTime time.Time
	size    int64
	checked time.Time
}

// OpenFileKeys loads the key file at path (a missing file is an empty store).
func OpenFileKeys(path string) (*FileKeys, error) {
	f := &FileKeys{path: path, RecheckEvery: 500 * time.Millisecond}
	if err := f.reload(); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *FileKeys) reload() error {
	st, err := os.Stat(f.path)
	var mod time.Time
	var size int64
	if err == nil {
		mod, size = st.ModTime(), st.Size()
	}
	keys, err := readKeyFile(f.path)
	if err != nil {
		return err
	}
	m := make(map[string]Key, len(keys))
	for _, k := range keys {
		if k.Active() {
			m[k.Hash] = k
		}
	}
	f.mu.Lock()
	f.byHash, f.modTime, f.size, f.checked = m, mod, size, time.Now()
	f.mu.Unlock()
	return nil
}

// Lookup implements KeyStore.
func (f *FileKeys) Lookup(hash string) (Key, bool) {
	f.mu.RLock()
	stale := time.Since(f.checked) >= f.RecheckEvery
	f.mu.RUnlock()
	if stale {
		f.maybeReload()
	}
	f.mu.RLock()
	k, ok := f.byHash[hash]
	f.mu.RUnlock()
	return k, ok
}

func (f *FileKeys) maybeReload() {
	f.mu.Lock()
	if time.Since(f.checked) < f.RecheckEvery {
		f.mu.Unlock()
		return
	}
	f.checked = time.Now()
	mod, size := f.modTime, f.size
	f.mu.Unlock()
	st, err := os.Stat(f.path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil && st.ModTime().Equal(mod) && st.Size() == size {
		return
	}
	if err != nil && mod.IsZero() {
		return
	}
	_ = f.reload() // keep the old keys if the file is being rewritten badly
}

// StaticKeys is an in-memory KeyStore (tests, benchmarks, embedding).
type StaticKeys struct {
	mu     sync.RWMutex
	byHash map[string]Key
}

// NewStaticKeys returns an empty in-memory key store.
func NewStaticKeys() *StaticKeys { return &StaticKeys{byHash: map[string]Key{}} }

// Add registers secret with the given tenant, user and limits and returns
// the key.
func (s *StaticKeys) Add(secret string, spec KeySpec) Key {
	h := HashKey(secret)
	k := Key{ID: "key_" + h[:12], Hash: h, Name: spec.Name, Tenant: spec.Tenant, User: spec.User, Created: time.Now().UTC(),
		RequestsPerMinute: spec.RequestsPerMinute, TokensPerMinute: spec.TokensPerMinute}
	s.mu.Lock()
	s.byHash[h] = k
	s.mu.Unlock()
	return k
}

// Remove forgets a secret.
func (s *StaticKeys) Remove(secret string) {
	s.mu.Lock()
	delete(s.byHash, HashKey(secret))
	s.mu.Unlock()
}

// Lookup implements KeyStore.
func (s *StaticKeys) Lookup(hash string) (Key, bool) {
	s.mu.RLock()
	k, ok := s.byHash[hash]
	s.mu.RUnlock()
	return k, ok && k.Active()
}
