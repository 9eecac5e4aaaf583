package gateway

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// Config configures the gateway. Zero fields take the defaults of
// DefaultConfig when passed to New.
type Config struct {
	// Listen is the address Run listens on.
	Listen string `yaml:"listen" help:"address the gateway listens on"`
	// MaxBodyBytes bounds a request body; larger bodies get 413.
	MaxBodyBytes int64 `yaml:"max_body_bytes" help:"largest accepted request body in bytes (larger: 413)"`
	// DevMode enables the development key DevKey (tenant DevTenant):
	// "auto" (the default) enables it only when Listen is a loopback
	// address, "on" always, "off" never.
	DevMode string `yaml:"dev_mode" help:"accept the development key sk-citizen-dev: auto (only on a loopback listen address), on or off"`
	// KeysFile is the JSON key file (see CreateKey); services sets it to
	// <data dir>/keys.json. Used only when Deps.Keys is nil.
	KeysFile string `yaml:"keys_file" help:"JSON file of hashed API keys (default <data_dir>/keys.json)"`
	// Limits are the default per-key limits (a key's own limits win).
	Limits Limits `yaml:"limits"`
	// StableVersion is the version "citizen" routes to before any rollout
	// event; empty means the engine's first version. Not a key of its
	// own: services sets it from rollout.stable.
	StableVersion string `yaml:"-"`
	// ShutdownTimeout bounds the drain of in-flight requests in Run. Not
	// a key of its own: services sets it from shutdown_timeout.
	ShutdownTimeout time.Duration `yaml:"-"`
	// ReadHeaderTimeout bounds the arrival of a request's headers.
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" help:"longest wait for a request's headers"`
	// BodyReadTimeout bounds the arrival of a request's body, counted from
	// the end of its headers (a slow body gets 408 or a closed connection).
	BodyReadTimeout time.Duration `yaml:"body_read_timeout" help:"longest wait for a request's body after its headers"`
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout time.Duration `yaml:"idle_timeout" help:"close keep-alive connections idle this long"`
	// RequestTimeout bounds one generation.
	RequestTimeout time.Duration `yaml:"request_timeout" help:"longest generation"`
	// RecordTimeout bounds the append of one interaction.
	RecordTimeout time.Duration `yaml:"record_timeout" help:"longest append of one interaction to the event store"`
	// MaxFeedbackPerInteraction caps the feedback.received events one
	// interaction accepts; more get 409.
	MaxFeedbackPerInteraction int `yaml:"max_feedback_per_interaction" help:"most feedbacks one interaction accepts (more: 409)"`
	// IgnoreRollouts stops Start from following rollout.* events into the
	// router (then only Router.SetRollout changes routing).
	IgnoreRollouts bool `yaml:"ignore_rollouts" help:"do not follow rollout.* events (routing changes only through Router.SetRollout)"`
}

// Limits are per-key rate limits; 0 means unlimited.
type Limits struct {
	RequestsPerMinute int `yaml:"requests_per_minute" help:"default requests per minute per API key (0 = unlimited)"`
	TokensPerMinute   int `yaml:"tokens_per_minute" help:"default tokens per minute per API key (0 = unlimited)"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		MaxBodyBytes:      4 << 20,
		DevMode:           "auto",
		ShutdownTimeout:   30 * time.Second,
		ReadHeaderTimeout: 10 * time.Second,
		BodyReadTimeout:   10 * time.Second,
		IdleTimeout:       90 * time.Second,
		RequestTimeout:    10 * time.Minute,
		RecordTimeout:     30 * time.Second,

		MaxFeedbackPerInteraction: 100,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Listen == "" {
		c.Listen = d.Listen
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = d.MaxBodyBytes
	}
	if c.DevMode == "" {
		c.DevMode = d.DevMode
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = d.ShutdownTimeout
	}
	if c.ReadHeaderTimeout == 0 {
		c.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if c.BodyReadTimeout == 0 {
		c.BodyReadTimeout = d.BodyReadTimeout
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = d.IdleTimeout
	}
	if c.MaxFeedbackPerInteraction == 0 {
		c.MaxFeedbackPerInteraction = d.MaxFeedbackPerInteraction
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.RecordTimeout == 0 {
		c.RecordTimeout = d.RecordTimeout
	}
	return c
}

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, fmt.Errorf("gateway: max_body_bytes must be at least 1024, got %d", c.MaxBodyBytes))
	}
	switch c.DevMode {
	case "auto", "on", "off":
	default:
		errs = append(errs, fmt.Errorf("gateway: dev_mode must be auto, on or off, got %q", c.DevMode))
	}
	if c.Limits.RequestsPerMinute < 0 || c.Limits.TokensPerMinute < 0 {
		errs = append(errs, errors.New("gateway: limits must be >= 0"))
	}
	if c.ShutdownTimeout < 0 || c.RequestTimeout < 0 || c.RecordTimeout < 0 || c.ReadHeaderTimeout < 0 || c.BodyReadTimeout < 0 || c.IdleTimeout < 0 {
		errs = append(errs, errors.New("gateway: timeouts must be >= 0"))
	}
	return errors.Join(errs...)
}

// DevKeyEnabled reports whether the development key is accepted under this
// configuration.
func (c Config) DevKeyEnabled() bool {
	switch c.DevMode {
	case "on":
		return true
	case "off":
		return false
	}
	return IsLoopback(c.Listen)
}

// IsLoopback reports whether a listen address binds only loopback
// ("localhost:8080", "127.0.0.1:0", "[::1]:80"). ":8080" and "0.0.0.0"
// are not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
