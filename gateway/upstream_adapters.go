package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"
)

// Adapters on the upstream server: vLLM's runtime LoRA API
// (docs/adr/0016-inference-tier.md). A trained version is an adapter the
// server loads by name (POST /v1/load_lora_adapter); requests for the
// version name it as their model.

// resolveLocked follows fallbacks from v to a served version. u.mu is
// held.
func (u *Upstream) resolveLocked(v string) (string, bool) {
	for range 64 {
		if _, ok := u.cfg.ModelNames[v]; ok {
			return v, true
		}
		for _, x := range u.versions {
			if x.ID == v {
				return v, true
			}
		}
		next, ok := u.fallbacks[v]
		if !ok {
			return "", false
		}
		v = next
	}
	return "", false
}

// LoadAdapter serves version id (trained from parent) by a LoRA adapter
// that the upstream server loads from path, a PEFT directory as the
// server sees it: POST {base_url}/load_lora_adapter with {"lora_name": id,
// "lora_path": path}. It then verifies that the server's /models lists id
// with root path. An adapter already loaded under id (by another gateway
// on the same server, or by this one before a restart) is accepted when
// the server lists it with the same path, and refused when with another.
// Transient failures (connection errors, 408, 429, 5xx) are retried as
// generation is (MaxRetries, Backoff). Once it returns nil, requests for
// id are sent with model id; on error nothing changes.
func (u *Upstream) LoadAdapter(ctx context.Context, id, parent, path string) error {
	if id == "" || id == "base" || path == "" {
		return fmt.Errorf("gateway: upstream adapter %q at %q: a version id other than base and a path are required", id, path)
	}
	body, _ := json.Marshal(map[string]string{"lora_name": id, "lora_path": path})
	status, msg, err := u.adapterCall(ctx, "/load_lora_adapter", body)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		// vLLM answers 400 for a name already loaded: accept it if it is
		// this adapter.
		root, listed, lerr := u.listedAdapter(ctx, id)
		switch {
		case lerr != nil:
			return fmt.Errorf("gateway: upstream refused adapter %s (%d: %s); listing its models: %w", id, status, msg, lerr)
		case !listed:
			return fmt.Errorf("gateway: upstream refused adapter %s at %s: %d: %s", id, path, status, msg)
		case root != path:
			return fmt.Errorf("gateway: upstream already serves %s from %s, not %s", id, root, path)
		}
	} else if root, listed, err := u.listedAdapter(ctx, id); err != nil {
		return fmt.Errorf("gateway: verifying adapter %s upstream: %w", id, err)
	} else if !listed || root != path {
		return fmt.Errorf("gateway: upstream answered that it loaded %s but lists it with root %q (listed: %v), not %s", id, root, listed, path)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.fallbacks, id)
	for _, v := range u.versions {
		if v.ID == id {
			return nil
		}
	}
	u.versions = append(u.versions, VersionInfo{ID: id, Parent: parent, Created: time.Now().UTC()})
	return nil
}

// UnloadAdapter stops serving version id and asks the server to unload
// its adapter (POST {base_url}/unload_lora_adapter); an adapter the server
// does not have (404) counts as unloaded.
func (u *Upstream) UnloadAdapter(ctx context.Context, id string) error {
	body, _ := json.Marshal(map[string]string{"lora_name": id})
	status, msg, err := u.adapterCall(ctx, "/unload_lora_adapter", body)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNotFound {
		return fmt.Errorf("gateway: upstream refused to unload %s: %d: %s", id, status, msg)
	}
	u.mu.Lock()
	u.versions = slices.DeleteFunc(u.versions, func(v VersionInfo) bool { return v.ID == id && id != "base" })
	u.mu.Unlock()
	return nil
}

// AddFallback serves version id, whose adapter could not be loaded, with
// servedBy's model: requests for id then report servedBy as the version
// that answered, so what is recorded is what ran. servedBy must be served
// (or itself a fallback); a later LoadAdapter of id replaces the fallback.
func (u *Upstream) AddFallback(id, servedBy, reason string) error {
	if id == "" || id == "base" || id == servedBy {
		return fmt.Errorf("gateway: invalid upstream fallback %q -> %q", id, servedBy)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if _, ok := u.resolveLocked(servedBy); !ok {
		return fmt.Errorf("gateway: fallback for %s: version %q is not served", id, servedBy)
	}
	for _, v := range u.versions {
		if v.ID == id {
			return nil // loaded after all
		}
	}
	u.fallbacks[id] = servedBy
	return nil
}

// adapterCall POSTs body to the adapter endpoint and returns the status
// and the error message of a non-200 answer; transient failures are
// retried, and an error is returned when none got through.
func (u *Upstream) adapterCall(ctx context.Context, endpoint string, body []byte) (int, string, error) {
	var last error
	for attempt := 0; attempt <= u.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			wait := min(u.cfg.Backoff<<(attempt-1), 8*time.Second)
			wait = wait/2 + time.Duration(rand.Int64N(int64(wait/2)+1))
			select {
			case <-ctx.Done():
				return 0, "", ctx.Err()
			case <-time.After(wait):
			}
		}
		status, msg, err := u.do(ctx, http.MethodPost, endpoint, body)
		if err == nil && !retryable(status) {
			return status, msg, nil
		}
		if ctx.Err() != nil {
			return 0, "", ctx.Err()
		}
		last = err
		if err == nil {
			last = fmt.Errorf("gateway: upstream %s answered %d: %s", endpoint, status, msg)
		}
	}
	return 0, "", last
}

// do makes one call to the upstream API; msg is the body of a non-200
// answer (its error message when JSON) or of a 200 one.
func (u *Upstream) do(ctx context.Context, method, endpoint string, body []byte) (int, string, error) {
	actx, cancel := context.WithTimeout(ctx, u.cfg.Timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(actx, method, u.cfg.BaseURL+endpoint, rd)
	if err != nil {
		return 0, "", fmt.Errorf("gateway: upstream %s: %w", endpoint, err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if u.cfg.APIKey != "" {
		hr.Header.Set("Authorization", "Bearer "+u.cfg.APIKey)
	}
	resp, err := u.cfg.Client.Do(hr)
	if err != nil {
		return 0, "", fmt.Errorf("gateway: upstream %s unreachable: %w", endpoint, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, "", fmt.Errorf("gateway: upstream %s: reading the answer: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, upstreamMessage(b), nil
	}
	return resp.StatusCode, string(b), nil
}

// listedAdapter reports whether the server's /models lists name, and its
// root (the path it was loaded from).
func (u *Upstream) listedAdapter(ctx context.Context, name string) (root string, listed bool, err error) {
	status, msg, err := u.do(ctx, http.MethodGet, "/models", nil)
	if err != nil {
		return "", false, err
	}
	if status != http.StatusOK {
		return "", false, fmt.Errorf("gateway: upstream /models answered %d: %s", status, msg)
	}
	var list struct {
		Data []struct {
			ID   string `json:"id"`
			Root string `json:"root"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(msg), &list); err != nil {
		return "", false, errors.New("gateway: upstream /models answered malformed JSON")
	}
	for _, m := range list.Data {
		if m.ID == name {
			return m.Root, true, nil
		}
	}
	return "", false, nil
}
