//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cassfs/cassfs/internal/testkit"
)

// sshd is an OpenSSH server on loopback for the sshfs baseline: its own host and user keys,
// root login by key only.
type sshd struct {
	addr string
	key  string // the client's private key
}

func startSSHD(t testing.TB) *sshd {
	t.Helper()
	if out, err := exec.Command("./sshfs-env.sh").CombinedOutput(); err != nil {
		t.Fatalf("sshfs-env.sh: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for _, k := range []string{"host", "user"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub := testkit.Must(os.ReadFile(filepath.Join(dir, "user.pub")))(t)
	os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0") // find a free port
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`Port %s
ListenAddress 127.0.0.1
HostKey %s/host
AuthorizedKeysFile %s/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
StrictModes no
UsePAM no
PidFile %s/sshd.pid
Subsystem sftp internal-sftp
`, port, dir, dir, dir)
	os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600)
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sshd did not start")
		}
	}
	return &sshd{addr: addr, key: filepath.Join(dir, "user")}
}

// mountSSHFS mounts remote (a directory on this machine) through addr (sshd, or a proxy in
// front of it) read-only; call the returned function to unmount it.
func mountSSHFS(t testing.TB, s *sshd, addr, remote string) (string, func()) {
	t.Helper()
	mnt := t.TempDir()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("sshfs", "-o", "ro,port="+port+",IdentityFile="+s.key+
		",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR",
		"root@"+host+":"+remote, mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("sshfs: %v\n%s", err, out)
	}
	return mnt, func() {
		if out, err := exec.Command("fusermount3", "-u", mnt).CombinedOutput(); err != nil {
			t.Errorf("unmount sshfs: %v\n%s", err, out)
		}
	}
}
