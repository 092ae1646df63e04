package cluster

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/topicfs/topicfs/backend"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Security is how the client authenticates and encrypts: the keys of a
// --command-config file (Kafka's CLI tools take the same file; the
// librdkafka/kcat names stand where Java's JAAS and keystores have no Go
// equivalent). The zero value is PLAINTEXT without SASL.
type Security struct {
	Protocol  string // security.protocol: PLAINTEXT (""), SSL, SASL_PLAINTEXT, SASL_SSL
	Mechanism string // sasl.mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
	Username  string // sasl.username
	Password  Secret // sasl.password
	CAFile    string // ssl.ca.location: PEM CA certificates (default: the system's)
	CertFile  string // ssl.certificate.location: PEM client certificate (mutual TLS)
	KeyFile   string // ssl.key.location: PEM key of CertFile
	ClientID  string // client.id (default "topicfs")
}

// Secret is a string that never prints: String, GoString, Format, LogValue
// and MarshalText all show "[redacted]" (or nothing, if it is empty).
type Secret string

const redacted = "[redacted]"

func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return redacted
}

// GoString keeps %#v from printing the value.
func (s Secret) GoString() string { return fmt.Sprintf("%q", s.String()) }

// Format applies to every verb (%x and %q included), so no verb prints it.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue keeps slog from printing the value.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalText keeps encoding/json and friends from printing the value.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Security protocols and SASL mechanisms, as Kafka spells them.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"

	MechanismPlain       = "PLAIN"
	MechanismSCRAMSHA256 = "SCRAM-SHA-256"
	MechanismSCRAMSHA512 = "SCRAM-SHA-512"
)

var (
	protocols  = []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL}
	mechanisms = []string{MechanismPlain, MechanismSCRAMSHA256, MechanismSCRAMSHA512}
)

// String shows every field but the password, which reads [redacted].
func (s Security) String() string {
	return fmt.Sprintf("security.protocol=%s sasl.mechanism=%s sasl.username=%s sasl.password=%s "+
		"ssl.ca.location=%s ssl.certificate.location=%s ssl.key.location=%s client.id=%s",
		s.protocol(), s.Mechanism, s.Username, s.Password, s.CAFile, s.CertFile, s.KeyFile, s.ClientID)
}

// GoString keeps %#v from printing the password.
func (s Security) GoString() string { return "cluster.Security{" + s.String() + "}" }

// Format makes every verb print String: %+v and %x of the struct never
// reach the password field.
func (s Security) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.String()) }

// LogValue logs every field but the password, which reads [redacted].
func (s Security) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("security.protocol", s.protocol()),
		slog.String("sasl.mechanism", s.Mechanism),
		slog.String("sasl.username", s.Username),
		slog.String("sasl.password", s.Password.String()),
		slog.String("ssl.ca.location", s.CAFile),
		slog.String("ssl.certificate.location", s.CertFile),
		slog.String("ssl.key.location", s.KeyFile),
		slog.String("client.id", s.ClientID))
}

func (s Security) protocol() string {
	if s.Protocol == "" {
		return ProtocolPlaintext
	}
	return s.Protocol
}

func (s Security) usesSASL() bool {
	p := s.protocol()
	return p == ProtocolSASLPlaintext || p == ProtocolSASLSSL
}

func (s Security) usesTLS() bool {
	p := s.protocol()
	return p == ProtocolSSL || p == ProtocolSASLSSL
}

// Validate checks that the fields agree with each other: a SASL protocol
// needs a mechanism, a username and a password; SASL or TLS settings with
// a protocol that does not use them are a mistake (the connection would
// silently go without them), as is a certificate without its key. Errors
// wrap backend.ErrInvalidConfig.
func (s Security) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", backend.ErrInvalidConfig, fmt.Sprintf(format, args...))
	}
	if !slices.Contains(protocols, s.protocol()) {
		return bad("security.protocol=%s: must be one of %s", s.Protocol, strings.Join(protocols, ", "))
	}
	if s.Mechanism != "" && !slices.Contains(mechanisms, s.Mechanism) {
		return bad("sasl.mechanism=%s: must be one of %s", s.Mechanism, strings.Join(mechanisms, ", "))
	}
	sasl := s.Mechanism != "" || s.Username != "" || s.Password != ""
	switch {
	case s.usesSASL() && s.Mechanism == "":
		return bad("security.protocol=%s needs sasl.mechanism (%s)", s.protocol(), strings.Join(mechanisms, ", "))
	case s.usesSASL() && (s.Username == "" || s.Password == ""):
		return bad("security.protocol=%s needs sasl.username and sasl.password", s.protocol())
	case !s.usesSASL() && sasl:
		return bad("sasl.* is set but security.protocol=%s does not use SASL (SASL_PLAINTEXT or SASL_SSL does)", s.protocol())
	case !s.usesTLS() && (s.CAFile != "" || s.CertFile != "" || s.KeyFile != ""):
		return bad("ssl.* is set but security.protocol=%s does not use TLS (SSL or SASL_SSL does)", s.protocol())
	case (s.CertFile == "") != (s.KeyFile == ""):
		return bad("ssl.certificate.location and ssl.key.location go together (mutual TLS needs both)")
	}
	return nil
}

// tlsConfig builds the client's TLS configuration from the PEM files, or
// returns nil for a protocol without TLS.
func (s Security) tlsConfig() (*tls.Config, error) {
	if !s.usesTLS() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.ca.location: %w", backend.ErrInvalidConfig, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: ssl.ca.location=%s: no PEM certificate in it", backend.ErrInvalidConfig, s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: ssl.certificate.location=%s, ssl.key.location=%s: %w",
				backend.ErrInvalidConfig, s.CertFile, s.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// mechanism returns the SASL mechanism, or nil for a protocol without SASL.
func (s Security) mechanism() sasl.Mechanism {
	if !s.usesSASL() {
		return nil
	}
	switch s.Mechanism {
	case MechanismPlain:
		return plain.Auth{User: s.Username, Pass: string(s.Password)}.AsMechanism()
	case MechanismSCRAMSHA256:
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha256Mechanism()
	default: // MechanismSCRAMSHA512; Validate allows nothing else
		return scram.Auth{User: s.Username, Pass: string(s.Password)}.AsSha512Mechanism()
	}
}

// handshakeError is a TLS handshake that failed or did not finish on a
// connection that was made: the listener is not TLS, or refuses us.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "TLS handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// tlsDialer dials like kgo's TLS dialer but marks a failed handshake, so
// that Open can say TLS rather than unreachable when the TCP connection
// was made and the handshake was not (a plaintext listener never answers
// a ClientHello).
func tlsDialer(cfg *tls.Config, timeout time.Duration) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, host string) (net.Conn, error) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		raw, err := (&net.Dialer{}).DialContext(ctx, network, host)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		if c.ServerName == "" {
			if h, _, err := net.SplitHostPort(host); err == nil {
				c.ServerName = h
			}
		}
		conn := tls.Client(raw, c)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return nil, &handshakeError{err}
		}
		return conn, nil
	}
}

// clientOpts returns the kgo options for s: client id, TLS (connections
// dialed within dialTimeout), SASL.
func (s Security) clientOpts(dialTimeout time.Duration) ([]kgo.Opt, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	id := s.ClientID
	if id == "" {
		id = "topicfs"
	}
	opts := []kgo.Opt{kgo.ClientID(id)}
	tc, err := s.tlsConfig()
	if err != nil {
		return nil, err
	}
	if tc != nil {
		opts = append(opts, kgo.Dialer(tlsDialer(tc, dialTimeout)))
	} else {
		opts = append(opts, kgo.DialTimeout(dialTimeout))
	}
	if m := s.mechanism(); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// commandConfigKeys are the keys a command config may set, each with the
// function that stores a value (already unescaped and trimmed).
var commandConfigKeys = map[string]func(s *Security, v string) error{
	"security.protocol": func(s *Security, v string) error {
		return setEnum(&s.Protocol, "security.protocol", v, protocols)
	},
	"sasl.mechanism": func(s *Security, v string) error {
		return setEnum(&s.Mechanism, "sasl.mechanism", v, mechanisms)
	},
	"sasl.username":            func(s *Security, v string) error { s.Username = v; return nil },
	"sasl.password":            func(s *Security, v string) error { s.Password = Secret(v); return nil },
	"ssl.ca.location":          func(s *Security, v string) error { s.CAFile = v; return nil },
	"ssl.certificate.location": func(s *Security, v string) error { s.CertFile = v; return nil },
	"ssl.key.location":         func(s *Security, v string) error { s.KeyFile = v; return nil },
	"client.id":                func(s *Security, v string) error { s.ClientID = v; return nil },
}

// setEnum stores the allowed spelling of v (matched without regard to
// case, as Kafka's clients match security.protocol).
func setEnum(dst *string, key, v string, allowed []string) error {
	for _, a := range allowed {
		if strings.EqualFold(a, v) {
			*dst = a
			return nil
		}
	}
	return fmt.Errorf("%s=%s: must be one of %s", key, v, strings.Join(allowed, ", "))
}

// maxCommandConfigLine bounds one physical line of a command config.
const maxCommandConfigLine = 1 << 20

// ParseCommandConfig reads a command config in Java properties syntax:
// key=value, key: value or key value; # and ! start comment lines; blank
// lines are skipped; a line ending in an odd number of backslashes
// continues on the next; \t \n \r \f \uXXXX and \<char> are escapes; keys
// and values are trimmed. An unknown key, a key given twice, an empty
// value or settings that do not agree (Security.Validate) are errors that
// name the key and its line and wrap backend.ErrInvalidConfig. Error
// messages never contain a value of sasl.password.
func ParseCommandConfig(r io.Reader) (Security, error) {
	var s Security
	seen := map[string]int{}
	err := eachProperty(r, func(line int, key, value string) error {
		set, ok := commandConfigKeys[key]
		if !ok {
			known := slices.Sorted(maps.Keys(commandConfigKeys))
			return fmt.Errorf("line %d: unknown key %q (known: %s)", line, key, strings.Join(known, ", "))
		}
		if prev, dup := seen[key]; dup {
			return fmt.Errorf("line %d: %s is already set on line %d", line, key, prev)
		}
		seen[key] = line
		if value == "" {
			return fmt.Errorf("line %d: %s has an empty value", line, key)
		}
		if err := set(&s, value); err != nil {
			return fmt.Errorf("line %d: %w", line, err)
		}
		return nil
	})
	if err != nil {
		return Security{}, fmt.Errorf("%w: command config: %w", backend.ErrInvalidConfig, err)
	}
	if err := s.Validate(); err != nil {
		return Security{}, fmt.Errorf("command config: %w", err)
	}
	return s, nil
}

// eachProperty calls fn with every key and value of a properties file and
// the line its logical line starts on.
func eachProperty(r io.Reader, fn func(line int, key, value string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxCommandConfigLine)
	var (
		logical strings.Builder
		start   int
		cont    bool
	)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if cont {
			text = strings.TrimLeft(text, " \t\f")
		} else {
			text = strings.TrimLeft(text, " \t\f")
			if text == "" || text[0] == '#' || text[0] == '!' {
				continue
			}
			start = n
			logical.Reset()
		}
		text, cont = cutContinuation(text)
		logical.WriteString(text)
		if cont {
			continue
		}
		key, value, err := splitProperty(logical.String())
		if err != nil {
			return fmt.Errorf("line %d: %w", start, err)
		}
		if err := fn(start, key, value); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if cont { // the last line continued into nothing: Java takes it as it is
		key, value, err := splitProperty(logical.String())
		if err != nil {
			return fmt.Errorf("line %d: %w", start, err)
		}
		return fn(start, key, value)
	}
	return nil
}

// cutContinuation removes the backslash that continues a line (an odd
// number of trailing backslashes) and reports whether there was one.
func cutContinuation(text string) (string, bool) {
	n := 0
	for i := len(text) - 1; i >= 0 && text[i] == '\\'; i-- {
		n++
	}
	if n%2 == 1 {
		return text[:len(text)-1], true
	}
	return text, false
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// white space (then one '=' or ':' among white space) and unescapes both
// sides.
func splitProperty(line string) (key, value string, err error) {
	end := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			end = i
			break
		}
	}
	rest := strings.TrimLeft(line[min(end, len(line)):], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescape(line[:end]); err != nil {
		return "", "", err
	}
	if key = strings.TrimSpace(key); key == "" {
		return "", "", errors.New("no key before the separator")
	}
	if value, err = unescape(rest); err != nil {
		return "", "", fmt.Errorf("%s: %w", key, err)
	}
	return key, strings.TrimSpace(value), nil
}

// unescape resolves the escapes of Java properties.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			var r rune
			if i+5 > len(s) {
				return "", errors.New(`\u needs four hex digits`)
			}
			for _, h := range s[i+1 : i+5] {
				d, ok := hexDigit(h)
				if !ok {
					return "", errors.New(`\u needs four hex digits`)
				}
				r = r<<4 | d
			}
			b.WriteRune(r)
			i += 4
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func hexDigit(c rune) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
