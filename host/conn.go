package host

import (
	"context"
	"net"
)

type connKey struct{}

// ConnContext is for http.Server.ConnContext: it gives the handlers the
// client's connection, so that a response stream cut by its time limit
// drops the connection at once, with the events still queued to a slow
// reader (InvokeEndpointWithResponseStream). Without it a cut stream ends
// with a graceful close, which the kernel delivers as slowly as the client
// reads.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// tcpConn is the client's TCP connection that ConnContext recorded, nil
// when there is none.
func tcpConn(ctx context.Context) *net.TCPConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok { // TLS
		c = tc.NetConn()
	}
	tc, _ := c.(*net.TCPConn)
	return tc
}
