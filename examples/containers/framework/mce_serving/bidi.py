"""Bidirectional streaming: InvokeEndpointWithBidirectionalStream reaches a container as a WebSocket
at /invocations-bidirectional-stream on its port, each client message one WebSocket message (text
for UTF8 parts, binary for BINARY ones), each message of the container one part (or several) back.

When the user's script defines ``bidi_fn(model, message[, context])``, this server accepts that
WebSocket and calls bidi_fn once per complete client message (``str`` for a text message,
``bytes`` for a binary one), with ``context.stream`` a dict that lives as long as the stream (what
a conversation keeps between its messages). What it returns is the answer: a ``str`` or ``bytes`` is one message,
an iterator (a generator) one message per piece as it is produced, ``None`` nothing. A failure of
bidi_fn closes the WebSocket with 1011 and its message, which mce reports as a ModelStreamError.
Pings are answered; a client message over MAX_MESSAGE is refused with 1009; a connection silent
for IDLE_TIMEOUT seconds (mce pings every 30) is closed. The image carries the label
``com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true``: a script without bidi_fn
answers the path with 404, which mce reports as ModelError.

The WebSocket protocol is wsproto's (Debian's python3-wsproto, sans-I/O) on the connection gunicorn
hands over in ``environ["gunicorn.socket"]``. Each stream runs in a thread of its own (at most
MAX_STREAMS a worker process), so bidi_fn runs beside the worker's calls: it must be as safe to
run concurrently with predict_fn as the model is.
"""

import collections.abc
import logging
import socket
import threading

from wsproto import ConnectionType, WSConnection
from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Ping, Request,
                            TextMessage)
from wsproto.utilities import LocalProtocolError, RemoteProtocolError

log = logging.getLogger("mce_serving")

PATH = "/invocations-bidirectional-stream"
MAX_MESSAGE = 16 << 20
IDLE_TIMEOUT = 120
MAX_STREAMS = 64  # open at once, per worker process


class _Closed(Exception):
    """The WebSocket is closed (by either side)."""


class Stream:
    """One WebSocket on sock, once accepted."""

    def __init__(self, sock, ws):
        self.sock, self.ws = sock, ws
        self.parts, self.size, self.text = [], 0, None

    def send(self, event):
        self.sock.sendall(self.ws.send(event))

    def close(self, code, reason=""):
        try:
            self.send(CloseConnection(code=code, reason=reason[:120]))
        except (OSError, LocalProtocolError):
            pass
        raise _Closed()

    def messages(self):
        """Yields each complete client message; answers pings; ends when the client closes."""
        while True:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                self.close(1001, "no frame for %d s" % IDLE_TIMEOUT)
            self.ws.receive_data(data or None)
            try:
                for ev in self.ws.events():
                    if isinstance(ev, Ping):
                        self.send(ev.response())
                    elif isinstance(ev, CloseConnection):
                        try:
                            self.send(ev.response())
                        except LocalProtocolError:
                            pass
                        raise _Closed()
                    elif isinstance(ev, (TextMessage, BytesMessage)):
                        self.text = isinstance(ev, TextMessage)
                        self.parts.append(ev.data)
                        self.size += len(ev.data)
                        if self.size > MAX_MESSAGE:
                            self.close(1009, "a message over %d bytes" % MAX_MESSAGE)
                        if ev.message_finished:
                            msg = ("" if self.text else b"").join(self.parts)
                            self.parts, self.size = [], 0
                            yield msg
            except RemoteProtocolError as e:
                self.close(1002, str(e))
            if not data:
                raise _Closed()

    def answer(self, out):
        """Sends what bidi_fn returned."""
        if out is None:
            return
        if isinstance(out, (str, bytes, bytearray)):
            out = [out]
        elif not isinstance(out, collections.abc.Iterable):
            raise TypeError("bidi_fn returned %s: want str, bytes, an iterator of them, or None" % type(out).__name__)
        for piece in out:
            if isinstance(piece, str):
                self.send(TextMessage(data=piece))
            elif isinstance(piece, (bytes, bytearray)):
                self.send(BytesMessage(data=bytes(piece)))
            else:
                raise TypeError("bidi_fn yielded %s: want str or bytes" % type(piece).__name__)


def serve(handler, environ, start_response, respond_error):
    """Answers a request on PATH: a WebSocket served by handler's bidi_fn, or an error."""
    if handler.bidi_fn is None:
        return respond_error(start_response, 404, "this model takes no bidirectional stream: its script defines no bidi_fn")
    if environ.get("REQUEST_METHOD") != "GET" or environ.get("HTTP_UPGRADE", "").lower() != "websocket":
        return respond_error(start_response, 400, "%s takes a WebSocket (GET with Upgrade: websocket)" % PATH)
    sock = environ.get("gunicorn.socket")
    if sock is None:
        return respond_error(start_response, 501, "this server cannot hand its connection over to a WebSocket")
    ws = WSConnection(ConnectionType.SERVER)
    headers = [(k[5:].replace("_", "-").lower().encode("latin-1"), v.encode("latin-1"))
               for k, v in environ.items() if k.startswith("HTTP_")]
    try:
        ws.initiate_upgrade_connection(headers, environ.get("PATH_INFO", PATH))
        if not any(isinstance(ev, Request) for ev in ws.events()):
            raise RemoteProtocolError("no WebSocket request", event_hint=None)
    except RemoteProtocolError as e:
        return respond_error(start_response, 400, "not a WebSocket handshake: %s" % e)
    with _lock:
        if len(_streams) >= MAX_STREAMS:
            return respond_error(start_response, 503, "%d bidirectional streams are open in this worker" % MAX_STREAMS)
        # The stream runs in a thread of its own on a copy of the connection: the worker's thread
        # (gunicorn's gthread worker has one) goes back to serving calls, and gunicorn closes only
        # its own copy.
        conn = sock.dup()
        t = threading.Thread(target=_run, args=(handler, conn, ws, environ), name="mce-bidi", daemon=True)
        _streams.add(t)
    try:
        conn.settimeout(IDLE_TIMEOUT)
        conn.sendall(ws.send(AcceptConnection()))
    except OSError:
        with _lock:
            _streams.discard(t)
        conn.close()
        raise
    t.start()
    # The connection is the WebSocket's now: gunicorn closes its copy without writing an HTTP answer.
    raise StopIteration("the connection is a WebSocket's")


_lock = threading.Lock()
_streams = set()  # the threads of the open streams


def _run(handler, conn, ws, environ):
    """Serves one accepted WebSocket until either side closes it."""
    st = Stream(conn, ws)
    served, state = 0, {}
    hdrs = {k[5:].replace("_", "-").title(): v for k, v in environ.items() if k.startswith("HTTP_")}
    try:
        for msg in st.messages():
            served += 1
            try:
                out = handler.bidi_message(msg, hdrs, state)
                st.answer(out)
            except OSError:
                raise
            except Exception as e:
                log.warning("model %s: bidi_fn failed on message %d: %s", handler.model_name, served, e)
                st.close(1011, "%s: %s" % (type(e).__name__, e))
    except (_Closed, OSError) as e:
        log.info("model %s: bidirectional stream ended after %d messages%s", handler.model_name, served,
                 "" if isinstance(e, _Closed) else " (%s)" % e)
    except Exception:
        log.exception("model %s: bidirectional stream failed", handler.model_name)
    finally:
        conn.close()
        with _lock:
            _streams.discard(threading.current_thread())


def wait_streams(timeout):
    """Waits for the open streams to end (tests)."""
    with _lock:
        ts = list(_streams)
    for t in ts:
        t.join(timeout)
