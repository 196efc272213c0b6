import socket
import threading
import types
import unittest

try:
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import (AcceptConnection, BytesMessage, CloseConnection, Ping, Pong, Request,
                                TextMessage)
except ImportError:  # the framework images have it (python3-wsproto); a bare host may not
    WSConnection = None

from mce_serving.app import SingleModelApp
from mce_serving.handler import Handler

from .helpers import call, error_of


def app_with(**fns):
    m = types.ModuleType("u")
    m.model_fn = lambda d: "model"
    m.predict_fn = lambda x, model: x
    for k, v in fns.items():
        setattr(m, k, v)
    h = Handler(m, "/m")
    h.load()
    return SingleModelApp(h, 1000)


def echo(model, message):
    if message == "boom":
        raise ValueError("no boom here")
    if isinstance(message, str):
        return (c.upper() for c in message)  # one message per character, as produced
    return bytes(reversed(message))


@unittest.skipIf(WSConnection is None, "wsproto is not installed")
class BidiTest(unittest.TestCase):
    """The WebSocket over a socket pair: gunicorn's side is the app's, the test plays mce."""

    def open(self, app):
        server, self.sock = socket.socketpair()
        self.addCleanup(self.sock.close)
        self.sock.settimeout(10)
        self.ws = WSConnection(ConnectionType.CLIENT)
        req = self.ws.send(Request(host="c", target="/invocations-bidirectional-stream")).decode()
        key = [ln.split(":", 1)[1].strip() for ln in req.split("\r\n") if ln.lower().startswith("sec-websocket-key:")][0]
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/invocations-bidirectional-stream", "gunicorn.socket": server,
                   "HTTP_HOST": "c", "HTTP_UPGRADE": "websocket", "HTTP_CONNECTION": "Upgrade",
                   "HTTP_SEC_WEBSOCKET_KEY": key, "HTTP_SEC_WEBSOCKET_VERSION": "13"}
        self.ended = []

        try:
            app(environ, lambda *a: None)
        except StopIteration as e:  # what gunicorn takes as "close the connection": the stream goes on
            self.ended.append(e)
        finally:
            server.close()  # gunicorn's copy; the stream's thread has its own
        self.assertEqual(len(self.ended), 1)
        self.assertIsInstance(self.next_event(), AcceptConnection)

    def stream_ends(self):
        from mce_serving import bidi
        bidi.wait_streams(10)
        self.assertEqual(bidi._streams, set())

    def next_event(self):
        while True:
            for ev in self.ws.events():
                return ev
            data = self.sock.recv(65536)
            self.ws.receive_data(data or None)

    def send(self, event):
        self.sock.sendall(self.ws.send(event))

    def test_messages_pings_and_close(self):
        self.open(app_with(bidi_fn=echo))
        self.send(TextMessage(data="ab", message_finished=False))
        self.send(TextMessage(data="c"))  # one message in two fragments
        got = [self.next_event() for _ in range(3)]
        self.assertEqual([(type(e), e.data) for e in got], [(TextMessage, "A"), (TextMessage, "B"), (TextMessage, "C")])
        self.send(BytesMessage(data=b"\x00\x01\x02"))
        ev = self.next_event()
        self.assertEqual((type(ev), ev.data), (BytesMessage, b"\x02\x01\x00"))
        self.send(Ping(payload=b"hi"))
        ev = self.next_event()
        self.assertEqual((type(ev), ev.payload), (Pong, b"hi"))
        self.send(CloseConnection(code=1000))
        self.assertIsInstance(self.next_event(), CloseConnection)
        self.stream_ends()

    def test_a_failing_message_closes_with_1011(self):
        self.open(app_with(bidi_fn=echo))
        self.send(TextMessage(data="boom"))
        ev = self.next_event()
        self.assertEqual((type(ev), ev.code), (CloseConnection, 1011))
        self.assertIn("no boom here", ev.reason)
        self.stream_ends()

    def test_a_message_too_big_closes_with_1009(self):
        from mce_serving import bidi
        old, bidi.MAX_MESSAGE = bidi.MAX_MESSAGE, 1000
        self.addCleanup(setattr, bidi, "MAX_MESSAGE", old)
        self.open(app_with(bidi_fn=echo))
        self.send(BytesMessage(data=b"x" * 600, message_finished=False))
        self.send(BytesMessage(data=b"x" * 600))
        ev = self.next_event()
        self.assertEqual((type(ev), ev.code), (CloseConnection, 1009))
        self.stream_ends()

    def test_the_client_going_away_ends_it(self):
        self.open(app_with(bidi_fn=echo))
        self.sock.shutdown(socket.SHUT_WR)
        self.stream_ends()

    def test_calls_go_on_during_a_stream(self):
        app = app_with(bidi_fn=echo)
        self.open(app)
        code, _, body = call(app, "POST", "/invocations", b"[1]", {"Content-Type": "application/json"})
        self.assertEqual((code, body), (200, b"[[1.0]]"))  # the default output_fn encodes the prediction
        self.send(TextMessage(data="x"))
        self.assertEqual(self.next_event().data, "X")

    def test_streams_are_bounded(self):
        from mce_serving import bidi
        old, bidi.MAX_STREAMS = bidi.MAX_STREAMS, 1
        self.addCleanup(setattr, bidi, "MAX_STREAMS", old)
        app = app_with(bidi_fn=echo)
        self.open(app)
        server, client = socket.socketpair()
        self.addCleanup(server.close)
        self.addCleanup(client.close)
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/invocations-bidirectional-stream", "gunicorn.socket": server,
                   "HTTP_HOST": "c", "HTTP_UPGRADE": "websocket", "HTTP_CONNECTION": "Upgrade",
                   "HTTP_SEC_WEBSOCKET_KEY": "dGhlIHNhbXBsZSBub25jZQ==", "HTTP_SEC_WEBSOCKET_VERSION": "13"}
        got = {}
        out = b"".join(app(environ, lambda status, hs: got.setdefault("status", status)))
        self.assertTrue(got["status"].startswith("503"), got)
        self.assertIn(b"1 bidirectional streams are open", out)


class BidiRefusalsTest(unittest.TestCase):
    def test_without_bidi_fn_or_websocket(self):
        code, _, out = call(app_with(), "GET", "/invocations-bidirectional-stream")
        self.assertEqual((code, error_of(out)[2]), (404, "this model takes no bidirectional stream: its script defines no bidi_fn"))
        if WSConnection is None:
            return
        code, _, out = call(app_with(bidi_fn=echo), "GET", "/invocations-bidirectional-stream")
        self.assertEqual(code, 400)
        self.assertIn("takes a WebSocket", error_of(out)[2])
        code, _, out = call(app_with(bidi_fn=echo), "GET", "/invocations-bidirectional-stream", headers={"Upgrade": "websocket"})
        self.assertEqual(code, 501)  # wsgiref hands no connection over
