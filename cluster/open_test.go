package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/topicfs/topicfs/backend"
	"github.com/topicfs/topicfs/engine"
	"github.com/topicfs/topicfs/engine/record"
)

// openErr opens o and returns its *OpenError.
func openErr(t *testing.T, o Options) *OpenError {
	t.Helper()
	c, err := Open(context.Background(), o)
	if c != nil {
		c.Close()
	}
	require.Error(t, err)
	var oe *OpenError
	require.True(t, errors.As(err, &oe), "%v", err)
	assert.NotContains(t, err.Error(), "\n", "one line")
	return oe
}

func TestSASLSCRAM(t *testing.T) {
	kc := newKfake(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-256", "admin", "right-pass"))
	sec := Security{Protocol: ProtocolSASLPlaintext, Mechanism: MechanismSCRAMSHA256, Username: "admin", Password: "right-pass"}
	c, logs := openTest(t, kc, func(o *Options) { o.Security = sec })
	tp := mkTopic(t, c, "secure", 1)
	_, _, err := part(t, tp, 0).AppendEach(context.Background(), [][]record.Record{values("v", 3)})
	require.NoError(t, err)
	stats, err := part(t, tp, 0).StatsJSON(context.Background())
	require.NoError(t, err)
	text, err := tp.ConfigText(context.Background())
	require.NoError(t, err)

	o := testOptions(t, kc, logs)
	o.Security = sec
	o.Security.Password = "wrong-pass"
	oe := openErr(t, o)
	assert.Equal(t, CauseAuthentication, oe.Cause)
	assert.ErrorIs(t, oe, backend.ErrNotAuthorized)
	assert.Contains(t, oe.Error(), "authentication failed")
	assert.Contains(t, oe.Error(), kc.ListenAddrs()[0])
	for _, out := range []string{oe.Error(), logs.String(), string(stats), string(text)} {
		assert.NotContains(t, out, "right-pass")
		assert.NotContains(t, out, "wrong-pass")
	}
	assert.Contains(t, logs.String(), "sasl.username=admin")

	// No SASL at all against brokers that require it.
	o.Security = Security{}
	oe = openErr(t, o)
	assert.Equal(t, CauseAuthentication, oe.Cause, "%v", oe)
}

// TestOpenWaitsForTheCluster: a cluster that starts listening after the
// mount began (both started together) is connected to: refused
// connections are asked again within the request timeout.
func TestOpenWaitsForTheCluster(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	logs := &logBuf{}
	o := Options{Bootstrap: []string{ln.Addr().String()}, StateDir: t.TempDir(), CacheDir: t.TempDir(),
		RequestTimeout: time.Minute, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	type opened struct {
		c   *Cluster
		err error
	}
	done := make(chan opened, 1)
	go func() {
		c, err := Open(context.Background(), o)
		done <- opened{c, err}
	}()
	select {
	case r := <-done:
		t.Fatalf("Open returned before any broker listened: %v", r.err)
	case <-time.After(300 * time.Millisecond):
	}
	newKfake(t, kfake.NumBrokers(1), kfake.Ports(port))
	r := <-done
	require.NoError(t, r.err)
	require.NoError(t, r.c.Close())
}

// TestUnreachable: bootstrap servers that refuse connections, and one
// that accepts and never answers, fail Open within the request timeout
// (the client's own retry timeout, 30 s, is far above the bound checked),
// and log nothing above debug: the error alone says why.
func TestUnreachable(t *testing.T) {
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refusedAddr := refused.Addr().String()
	refused.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	for _, addrs := range [][]string{{refusedAddr}, {silent.Addr().String()}, {refusedAddr, silent.Addr().String()}} {
		logs := &logBuf{}
		o := Options{Bootstrap: addrs, StateDir: t.TempDir(), RequestTimeout: 500 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		start := time.Now()
		oe := openErr(t, o)
		assert.Less(t, time.Since(start), 15*time.Second, "bounded by the request timeout, not the client's retries")
		assert.Equal(t, CauseUnreachable, oe.Cause, "%v", oe)
		assert.ErrorIs(t, oe, backend.ErrUnavailable)
		assert.Contains(t, oe.Error(), "no broker reachable at "+strings.Join(addrs, ","))
		assert.NotContains(t, logs.String(), "level=WARN")
		assert.NotContains(t, logs.String(), "level=ERROR")
	}
}

func TestOpenOptionsChecked(t *testing.T) {
	_, err := Open(context.Background(), Options{})
	assert.ErrorIs(t, err, backend.ErrInvalidConfig)
	for _, o := range []Options{
		{Bootstrap: []string{"x:1"}, ReplicationFactor: -2},
		{Bootstrap: []string{"x:1"}, NumPartitions: -1},
		{Bootstrap: []string{"x:1"}, Security: Security{Protocol: "SASL_SSL"}},
		{Bootstrap: []string{"x:1"}, Security: Security{Protocol: "SSL", CAFile: "/nonexistent/ca.pem"}},
	} {
		o.StateDir = t.TempDir()
		_, err := Open(context.Background(), o)
		assert.ErrorIs(t, err, backend.ErrInvalidConfig, "%+v", o)
	}
}

func TestDefaultStateDir(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", "/state")
	dir, err := defaultStateDir()
	require.NoError(t, err)
	assert.Equal(t, "/state/topicfs", dir)
	t.Setenv("XDG_STATE_HOME", "")
	t.Setenv("HOME", "/home/u")
	dir, err = defaultStateDir()
	require.NoError(t, err)
	assert.Equal(t, "/home/u/.local/state/topicfs", dir)
	assert.Equal(t, "kfake", safeName("kfake"))
	assert.Equal(t, "x-2e2e", safeName(".."))
	assert.Equal(t, "x-612f62", safeName("a/b"))
	long := strings.Repeat("b", 249) // the longest topic name
	assert.LessOrEqual(t, len(safeName(long)+".json"), 255, "a file name")
	assert.NotEqual(t, safeName(long), safeName(strings.Repeat("b", 248)+"c"))
	assert.Equal(t, safeName(long), safeName(long))
}

// TestKgoLoggerRepeats: a kgo warning repeated within kgoRepeat is a debug
// line; the next warning of it says how many it stood for.
func TestKgoLoggerRepeats(t *testing.T) {
	logs := &logBuf{}
	var quiet atomic.Bool
	l := newKgoLogger(slog.New(slog.NewTextHandler(logs, nil)), &quiet)
	for range 100 {
		l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "x")
	}
	l.Log(kgo.LogLevelWarn, "another message")
	assert.Equal(t, 1, strings.Count(logs.String(), "unable to open connection"), logs.String())
	assert.Equal(t, 1, strings.Count(logs.String(), "another message"))
	l.repeat["unable to open connection to broker"].at = time.Now().Add(-kgoRepeat)
	l.Log(kgo.LogLevelWarn, "unable to open connection to broker", "addr", "x")
	assert.Contains(t, logs.String(), "repeated_since_last_warning=99")
}

// testCA makes a CA and a certificate it signs for 127.0.0.1 (server or
// client use), written as PEM files into dir.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	file := filepath.Join(dir, name+".pem")
	require.NoError(t, os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	return &testCA{cert: cert, key: key, file: file}
}

// issue returns a key pair signed by ca and its PEM files.
func (ca *testCA) issue(t *testing.T, dir, name string) (tls.Certificate, string, string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	require.NoError(t, os.WriteFile(certFile, certPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, keyPEM, 0o600))
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err)
	return pair, certFile, keyFile
}

// TestTLS: brokers that require a client certificate; the right CA and
// certificate connect, a wrong CA or no certificate fail Open with the
// TLS cause.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "ca")
	other := newTestCA(t, dir, "other-ca")
	serverPair, _, _ := ca.issue(t, dir, "server")
	_, certFile, keyFile := ca.issue(t, dir, "client")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	kc := newKfake(t, kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverPair},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}))

	good := Security{Protocol: ProtocolSSL, CAFile: ca.file, CertFile: certFile, KeyFile: keyFile}
	c, _ := openTest(t, kc, func(o *Options) { o.Security = good })
	_, err := c.Topics(context.Background())
	require.NoError(t, err)

	for name, sec := range map[string]Security{
		"unknown CA":     {Protocol: ProtocolSSL, CAFile: other.file, CertFile: certFile, KeyFile: keyFile},
		"no client cert": {Protocol: ProtocolSSL, CAFile: ca.file},
		"plaintext":      {},
	} {
		o := testOptions(t, kc, &logBuf{})
		o.Security, o.RequestTimeout = sec, 2*time.Second
		oe := openErr(t, o)
		assert.Equal(t, CauseTLS, oe.Cause, "%s: %v", name, oe)
		assert.Contains(t, oe.Error(), "TLS handshake failed", name)
	}

	// TLS to a plaintext listener.
	plain := newKfake(t)
	o := testOptions(t, plain, &logBuf{})
	o.Security, o.RequestTimeout = Security{Protocol: ProtocolSSL, CAFile: ca.file}, 2*time.Second
	oe := openErr(t, o)
	assert.Equal(t, CauseTLS, oe.Cause, "%v", oe)
}

// TestSecondMountSameCache: a second Open of the same cluster with the
// same cache directory fails at once, naming the cause, instead of
// failing every read later (the copies' directory is locked).
func TestSecondMountSameCache(t *testing.T) {
	kc := newKfake(t)
	first, _ := openTest(t, kc, nil)
	o := testOptions(t, kc, &logBuf{})
	o.CacheDir = first.opts.CacheDir
	c, err := Open(context.Background(), o)
	if c != nil {
		c.Close()
	}
	require.ErrorIs(t, err, engine.ErrLocked)
	assert.Contains(t, err.Error(), "another mount of cluster kfake uses the cache directory")
	o.CacheDir = t.TempDir()
	c, err = Open(context.Background(), o)
	require.NoError(t, err, "with a cache of its own")
	require.NoError(t, c.Close())
}
