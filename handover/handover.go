// Package handover is the protocol by which a privileged mounter (the CSI node plugin,
// package csi) hands a mounted FUSE connection to the unprivileged daemon that serves it
// (cassfs serve).
//
// # Protocol
//
// The daemon listens on a Unix socket of type SOCK_SEQPACKET (Listen). For each volume,
// the mounter connects (Send) and sends one message: a JSON Request body (the protocol
// version, the Volume, how long the mounter waits for an answer) with exactly one
// descriptor attached (SCM_RIGHTS), the /dev/fuse connection it has mounted at
// Volume.Mountpoint. The daemon answers with one JSON message: serving, or why not (Reply).
// Then both close the connection. Sequenced packets keep messages whole: a descriptor
// arrives with its description or not at all.
//
// # Deadlines
//
// Every step has one. Send's whole exchange is bounded by its context, or by
// DefaultTimeout when the context has none, so a daemon that never answers costs the
// mounter that long and no more. The daemon reads a request within Listener.Timeout of
// accepting it, and its Reply must reach the mounter before the mounter's own deadline
// (Request.Deadline), after which the mounter has given up and unmounted.
//
// # Ownership of the descriptor
//
// Send does not close fd: the mounter closes its copy once Send returns, whatever it
// returns, so that the daemon's copy is the only one and a dead daemon ends the
// connection (readers then get errors; they never hang). On the daemon's side a
// Request's FD is the daemon's to serve or close; Accept closes every descriptor of a
// request it refuses.
//
// # Secrets
//
// Volume.Secrets (the CSI secrets: database credentials) cross the socket in the clear,
// which only root and the socket's owner may connect to (Listen makes it 0600). They
// never appear in logs or messages: Secrets formats and logs as a count only.
package handover

import (
	"fmt"
	"log/slog"
	"time"
)

// Version is the protocol version Send speaks and Accept accepts.
const Version = 1

// DefaultTimeout bounds Send when its context has no deadline.
const DefaultTimeout = 30 * time.Second

// maxMessage bounds a message: a volume's attributes and secrets are a few hundred bytes.
const maxMessage = 64 << 10

// Volume describes the volume whose connection is handed over.
type Volume struct {
	ID string `json:"volume_id"` // the CSI volume id
	// Mountpoint is where the connection is mounted (the CSI staging path): the daemon
	// serves it there, and may only read it (it cannot unmount).
	Mountpoint string `json:"mountpoint"`
	// Attributes are the volume's attributes (the CSI volume context): which dataset and
	// how to mount it, for mount.OptionsFromAttributes.
	Attributes map[string]string `json:"attributes,omitempty"`
	Secrets    Secrets           `json:"secrets,omitempty"`
}

// LogValue shows a Volume in logs without its secrets' values.
func (v Volume) LogValue() slog.Value {
	return slog.GroupValue(slog.String("id", v.ID), slog.String("mountpoint", v.Mountpoint),
		slog.Any("attributes", v.Attributes), slog.Any("secrets", v.Secrets))
}

// Secrets are the volume's secrets. They are marshalled to JSON (that is how they cross
// the socket) but print and log as their count only: fmt's every verb, slog, errors.
type Secrets map[string]string

// String says how many secrets there are, never what they are.
func (s Secrets) String() string { return fmt.Sprintf("[%d secrets]", len(s)) }

// Format prints s as String does, whatever the verb (%v, %+v, %#v, %s, %q...).
func (s Secrets) Format(f fmt.State, _ rune) { fmt.Fprint(f, s.String()) }

// LogValue logs s as String does.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// request is the mounter's message.
type request struct {
	Version int    `json:"version"`
	Volume  Volume `json:"volume"`
	// WaitMillis is how long from sending the mounter waits for the answer.
	WaitMillis int64 `json:"wait_ms"`
}

// reply is the daemon's answer: Error empty means serving.
type reply struct {
	Version int    `json:"version"`
	Error   string `json:"error,omitempty"`
}

// RefusedError is the daemon's answer when it does not serve the volume: its message.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return "the serving daemon refused the volume: " + e.Message }
