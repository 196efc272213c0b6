package httpc

import (
	"net"
	"syscall"
)

// alive reports whether an idle connection still looks usable: the
// container has not closed it and has sent nothing unasked. It peeks
// without blocking (one recvfrom).
func alive(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	ok = false
	var b [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read (EAGAIN) is the healthy case; EOF, unsolicited
		// bytes or a socket error are not.
		ok = rerr == syscall.EAGAIN || rerr == syscall.EWOULDBLOCK || rerr == syscall.EINTR
		return true
	})
	return ok && err == nil
}
