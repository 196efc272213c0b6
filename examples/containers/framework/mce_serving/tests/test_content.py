import io
import json
import unittest

import numpy as np

from mce_serving import content
from mce_serving.errors import InferenceError, UnsupportedAccept, UnsupportedContentType


class NegotiateTest(unittest.TestCase):
    def test_table(self):
        cases = [
            (None, "application/json", "application/json"),
            ("", "text/csv", "text/csv"),
            ("*/*", "text/csv", "text/csv"),
            ("text/csv", "application/json", "text/csv"),
            ("image/png, text/csv;q=0.9, application/json", "application/json", "text/csv"),
            ("image/png,*/*", "application/x-npy", "application/x-npy"),
            ("Application/JSON; charset=utf-8", "text/csv", "application/json"),
        ]
        for accept, default, want in cases:
            with self.subTest(accept=accept):
                self.assertEqual(content.negotiate(accept, default), want)

    def test_unsupported(self):
        with self.assertRaises(UnsupportedAccept) as cm:
            content.negotiate("image/png, text/html", "application/json")
        self.assertEqual(cm.exception.status_code, 406)


class DecodeTest(unittest.TestCase):
    def test_json(self):
        np.testing.assert_array_equal(content.decode("[[1, 2], [3, 4]]", "application/json"), [[1, 2], [3, 4]])
        np.testing.assert_array_equal(content.decode('{"instances": [1, 2]}', "application/json"), [1, 2])

    def test_csv_keeps_rows_and_columns(self):
        self.assertEqual(content.decode("1,2\n3,4\n", "text/csv").shape, (2, 2))
        self.assertEqual(content.decode("1\n2\n3", "text/csv").shape, (3, 1))
        self.assertEqual(content.decode("1,2,3", "text/csv; charset=utf-8").shape, (1, 3))

    def test_npy(self):
        buf = io.BytesIO()
        np.save(buf, np.arange(6, dtype=np.int16).reshape(2, 3))
        got = content.decode(buf.getvalue(), "application/x-npy")
        self.assertEqual(got.dtype, np.int16)
        np.testing.assert_array_equal(got, [[0, 1, 2], [3, 4, 5]])

    def test_bad_bodies_are_400(self):
        for body, ct in [("[1, 2", "application/json"), ('{"a": 1}', "application/json"),
                         ("[[1, 2], [3]]", "application/json"), ("a,b\n", "text/csv"), ("", "text/csv"),
                         (b"not npy", "application/x-npy"), (b"\x93NUMPY\x01\x00\xff\xff{'descr': '|O'", "application/x-npy")]:
            with self.subTest(body=body):
                with self.assertRaises(InferenceError) as cm:
                    content.decode(body, ct)
                self.assertEqual(cm.exception.status_code, 400)

    def test_npy_announcing_more_than_it_holds(self):
        hdr = np.lib.format.header_data_from_array_1_0(np.zeros(4))
        hdr["shape"] = (10 ** 13,)
        out = io.BytesIO()
        np.lib.format.write_array_header_1_0(out, hdr)
        with self.assertRaisesRegex(InferenceError, "announces"):
            content.decode(out.getvalue() + b"\0" * 32, "application/x-npy")

    def test_npz(self):
        import scipy.sparse
        buf = io.BytesIO()
        scipy.sparse.save_npz(buf, scipy.sparse.csr_matrix(np.eye(3)))
        np.testing.assert_array_equal(content.decode(buf.getvalue(), "application/x-npz").toarray(), np.eye(3))

    def test_npz_bomb_refused(self):
        import zipfile
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("data.npy", b"\0" * (300 << 20))
        with self.assertRaisesRegex(InferenceError, "decompresses"):
            content.decode(buf.getvalue(), "application/x-npz")

    def test_pickled_npy_refused(self):
        buf = io.BytesIO()
        np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
        with self.assertRaises(InferenceError):
            content.decode(buf.getvalue(), "application/x-npy")

    def test_unsupported(self):
        with self.assertRaises(UnsupportedContentType) as cm:
            content.decode("x", "text/plain")
        self.assertEqual(cm.exception.status_code, 415)


class EncodeTest(unittest.TestCase):
    def test_json(self):
        self.assertEqual(json.loads(content.encode(np.array([1.5, 2.0]), "application/json")), [1.5, 2.0])
        self.assertEqual(json.loads(content.encode({"p": np.float32(0.5)}, "application/json")), {"p": 0.5})

    def test_csv(self):
        self.assertEqual(content.encode(np.array([1.5, 2.0]), "text/csv"), b"1.5\n2.0\n")
        self.assertEqual(content.encode([[1, 2], [3, 4]], "text/csv"), b"1,2\n3,4\n")
        self.assertEqual(content.encode(np.array([0.1]), "text/csv"), b"0.1\n")  # shortest round-trip text

    def test_npy_round_trip(self):
        a = np.arange(4.0).reshape(2, 2)
        np.testing.assert_array_equal(np.load(io.BytesIO(content.encode(a, "application/x-npy"))), a)

    def test_unsupported(self):
        with self.assertRaises(UnsupportedAccept):
            content.encode([1], "text/html")


if __name__ == "__main__":
    unittest.main()
