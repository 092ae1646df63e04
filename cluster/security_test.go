package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topicfs/topicfs/backend"
)

func TestParseCommandConfig(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Security
		err      []string // substrings of the error; nil: no error
	}{
		{name: "empty", in: "", want: Security{}},
		{name: "comments and blanks", in: "# a comment\n! another\n\n   \n\t# indented\n", want: Security{}},
		{name: "plaintext", in: "security.protocol=PLAINTEXT\nclient.id=me\n",
			want: Security{Protocol: ProtocolPlaintext, ClientID: "me"}},
		{name: "separators and trimming",
			in: "security.protocol = sasl_ssl\nsasl.mechanism:SCRAM-SHA-512\nsasl.username   alice  \n" +
				"  sasl.password=  p=ss:w#rd  \nssl.ca.location=/etc/ca.pem\n",
			want: Security{Protocol: ProtocolSASLSSL, Mechanism: MechanismSCRAMSHA512, Username: "alice",
				Password: "p=ss:w#rd", CAFile: "/etc/ca.pem"}},
		{name: "escapes and continuation",
			in: "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.user\\\n   name=bob\n" +
				"sasl.password=a\\tb\\u0041\\\\\\=\n",
			want: Security{Protocol: ProtocolSASLPlaintext, Mechanism: MechanismPlain, Username: "bob",
				Password: "a\tbA\\="}},
		{name: "escaped separator in key", in: "client\\=id=x\n", err: []string{`line 1: unknown key "client=id"`}},
		{name: "crlf", in: "security.protocol=SSL\r\nssl.ca.location=ca.pem\r\n",
			want: Security{Protocol: ProtocolSSL, CAFile: "ca.pem"}},
		{name: "mutual tls", in: "security.protocol=SSL\nssl.certificate.location=c.pem\nssl.key.location=k.pem\n",
			want: Security{Protocol: ProtocolSSL, CertFile: "c.pem", KeyFile: "k.pem"}},
		{name: "unknown key", in: "# hi\nsecurity.protocol=SSL\nssl.truststore.location=x\n",
			err: []string{"line 3", `unknown key "ssl.truststore.location"`, "known: client.id"}},
		{name: "duplicate", in: "client.id=a\nclient.id=b\n", err: []string{"line 2", "client.id", "line 1"}},
		{name: "empty value", in: "client.id=\n", err: []string{"line 1", "client.id", "empty"}},
		{name: "no key", in: "=x\n", err: []string{"line 1", "no key"}},
		{name: "bad protocol", in: "security.protocol=TLS\n", err: []string{"line 1", "security.protocol=TLS", "SASL_SSL"}},
		{name: "bad mechanism", in: "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\n",
			err: []string{"line 2", "sasl.mechanism=GSSAPI"}},
		{name: "bad unicode escape", in: "client.id=\\u12\n", err: []string{"line 1", `\u`}},
		{name: "sasl without mechanism", in: "security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=b\n",
			err: []string{"needs sasl.mechanism"}},
		{name: "sasl without password", in: "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=a\n",
			err: []string{"needs sasl.username and sasl.password"}},
		{name: "sasl settings without sasl protocol", in: "sasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n",
			err: []string{"does not use SASL"}},
		{name: "ssl settings without tls", in: "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" +
			"sasl.username=a\nsasl.password=b\nssl.ca.location=x\n", err: []string{"does not use TLS"}},
		{name: "cert without key", in: "security.protocol=SSL\nssl.certificate.location=c.pem\n",
			err: []string{"go together"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCommandConfig(strings.NewReader(tc.in))
			if tc.err == nil {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.ErrorIs(t, err, backend.ErrInvalidConfig)
			for _, w := range tc.err {
				assert.Contains(t, err.Error(), w)
			}
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

// TestParseCommandConfigHidesPassword: no error shows sasl.password's value.
func TestParseCommandConfigHidesPassword(t *testing.T) {
	for _, in := range []string{
		"sasl.password=hunter2\n",                             // without SASL
		"security.protocol=SASL_SSL\nsasl.password=hunter2\n", // without a mechanism
		"sasl.password=hunter2\nsasl.password=hunter2\n",      // twice
		"sasl.password=hunter2\nbogus=1\n",                    // another line's error
	} {
		_, err := ParseCommandConfig(strings.NewReader(in))
		require.Error(t, err, in)
		assert.NotContains(t, err.Error(), "hunter2", in)
	}
}

// TestSecurityRedacted: every way of printing a Security hides the password.
func TestSecurityRedacted(t *testing.T) {
	s := Security{Protocol: ProtocolSASLSSL, Mechanism: MechanismPlain, Username: "alice", Password: "hunter2", ClientID: "x"}
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("connect", "security", s, "password", s.Password)
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("connect", "security", s)
	js, err := json.Marshal(s)
	require.NoError(t, err)
	for _, out := range []string{
		s.String(), fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s),
		fmt.Sprintf("%v %+v %#v %s %q %x %d", s.Password, s.Password, s.Password, s.Password, s.Password, s.Password, s.Password),
		fmt.Sprintf("%+v", struct{ S Security }{s}), logs.String(), string(js),
	} {
		assert.NotContains(t, out, "hunter2")
		assert.NotContains(t, out, fmt.Sprintf("%x", "hunter2"))
	}
	assert.Contains(t, s.String(), "sasl.username=alice")
	assert.Contains(t, s.String(), "sasl.password=[redacted]")
	assert.Contains(t, logs.String(), "alice")
	assert.Equal(t, "", Secret("").String())
}

func FuzzParseCommandConfig(f *testing.F) {
	for _, seed := range []string{
		"", "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n",
		"a\\\n b=c\\", "k=\\u00", "#x\n!y\n  z : w  \n", "ssl.ca.location=\\t\\n\\r\\f\\\\\\=",
		"client.id=\\", "\\", "=", ":", " = ", "client.id x\nclient.id y\n", "security.protocol\\\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseCommandConfig(strings.NewReader(in))
		if err != nil {
			require.ErrorIs(t, err, backend.ErrInvalidConfig)
			require.Equal(t, Security{}, s)
			require.NotContains(t, err.Error(), "\n")
			return
		}
		require.NoError(t, s.Validate(), "what parses validates")
		if s.Password != "" {
			other := s
			other.Password = "something else"
			require.Equal(t, s.String(), other.String(), "the password does not show")
		}
	})
}
