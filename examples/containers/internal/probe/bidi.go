package probe

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"
)

// bidirectional serves the probe's WebSocket for bidirectional streams
// (InvokeEndpointWithBidirectionalStream): every message comes back with
// its type, as "<tag>:<message>" (binary messages as they are, without the
// tag, so a byte-for-byte echo can be checked); a text message
// "close:<code>" closes the WebSocket with that status, and
// "sleep:<duration>" waits before answering the next message.
func bidirectional(tag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
		if err != nil {
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(32 << 20)
		ctx := r.Context()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if typ == websocket.MessageText {
				if code, ok := bytes.CutPrefix(b, []byte("close:")); ok {
					n, _ := strconv.Atoi(string(code))
					c.Close(websocket.StatusCode(n), "asked to")
					return
				}
				if d, ok := bytes.CutPrefix(b, []byte("sleep:")); ok {
					if pause, err := time.ParseDuration(string(d)); err == nil && pause <= time.Minute {
						time.Sleep(pause)
					}
					continue
				}
				b = append([]byte(tag+":"), b...)
			}
			if err := c.Write(ctx, typ, b); err != nil {
				return
			}
		}
	})
}
