package cli

import (
	"net"
	"os"
)

// sdNotify sends state ("READY=1", "STOPPING=1") to systemd when topicfs runs
// as a Type=notify service ($NOTIFY_SOCKET set); otherwise it does nothing.
// Failures are ignored: notification is a courtesy, never a reason to fail.
func sdNotify(state string) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return
	}
	if sock[0] == '@' { // abstract namespace
		sock = "\x00" + sock[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}
