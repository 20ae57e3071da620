package cassandra

import (
	"errors"
	"strings"
	"testing"
)

// connectError names the likely cause and its remedy from the driver's flattened text.
func TestConnectErrorSaysWhatToCheck(t *testing.T) {
	const startup = "gocql: unable to create session: unable to connect to initial hosts: gocql: no response to connection startup within timeout"
	tlsNoCert := Config{Hosts: []string{"db:9042"}, TLS: &TLSConfig{CAFile: "ca.pem"}}
	withCert := Config{Hosts: []string{"db:9042"}, TLS: &TLSConfig{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}}
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
		want string
	}{
		{"certificate required", tlsNoCert, "remote error: tls: certificate required", "the cluster requires a client certificate: give --tls-cert and --tls-key"},
		{"start-up unanswered over TLS without a certificate", tlsNoCert, startup, "if the cluster requires a client certificate, give --tls-cert and --tls-key"},
		{"start-up unanswered with a certificate", withCert, startup, "is it running and reachable? see --hosts"},
		{"closed at once without TLS", Config{Hosts: []string{"db:9042"}}, "EOF", "does the cluster require TLS"},
	} {
		got := connectError(tc.cfg, errors.New(tc.err)).Error()
		if !strings.Contains(got, tc.want) || !strings.Contains(got, "db:9042") {
			t.Errorf("%s: %q, want it to name db:9042 and say %q", tc.name, got, tc.want)
		}
	}
	if got := connectError(withCert, errors.New(startup)).Error(); strings.Contains(got, "client certificate") {
		t.Errorf("with a client certificate given: %q blames a missing one", got)
	}
}
