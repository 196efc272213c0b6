"""Decoding request bodies and encoding predictions: JSON, CSV and NPY (and NPZ on the way in).

``negotiate`` picks the response type from an Accept header: the list is split on commas,
parameters are ignored, and the first supported type wins; a missing Accept or ``*/*``
means the default (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT).
"""

import io
import json
import zipfile

import numpy as np

from .errors import InferenceError, UnsupportedAccept, UnsupportedContentType

JSON = "application/json"
CSV = "text/csv"
NPY = "application/x-npy"
NPZ = "application/x-npz"
# Bodies of these types reach input_fn as str, as in the SageMaker toolkits.
UTF8_TYPES = (JSON, CSV)
ENCODABLE = (JSON, CSV, NPY)


def media_type(header):
    """The media type of a Content-Type or Accept element, lower-cased, without parameters."""
    return (header or "").split(";", 1)[0].strip().lower()


def negotiate(accept, default):
    """The first type of the Accept header we can encode; raises UnsupportedAccept."""
    if not accept or not accept.strip():
        accept = default
    for item in accept.split(","):
        t = media_type(item)
        if t in ("*/*", ""):
            t = media_type(default)
        if t in ENCODABLE:
            return t
    raise UnsupportedAccept(accept)


def _bad(kind, err):
    return InferenceError(400, "cannot decode the %s body: %s" % (kind, err))


def decode(data, content_type):
    """A numpy array from a request body (str or bytes) of content_type."""
    t = media_type(content_type)
    if t == JSON:
        try:
            obj = json.loads(data)
        except ValueError as e:
            raise _bad("JSON", e) from None
        # {"instances": [...]} and {"inputs": [...]} are common request envelopes.
        if isinstance(obj, dict):
            for key in ("instances", "inputs"):
                if key in obj:
                    obj = obj[key]
                    break
            else:
                raise InferenceError(400, "a JSON object body needs an \"instances\" or \"inputs\" member")
        try:
            arr = np.array(obj)
        except ValueError as e:
            raise _bad("JSON", e) from None
        if arr.dtype == object:
            raise InferenceError(400, "the JSON body is not a rectangular array of numbers")
        return arr
    if t == CSV:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        if not text.strip():
            raise InferenceError(400, "the CSV body is empty")
        try:
            arr = np.genfromtxt(io.StringIO(text), delimiter=",", ndmin=2, dtype=float)
        except ValueError as e:
            raise _bad("CSV", e) from None
        if np.isnan(arr).any() and "nan" not in text.lower():
            raise InferenceError(400, "the CSV body holds values that are not numbers")
        return arr
    if t == NPY:
        raw = _bytes(data)
        try:
            _check_npy_size(raw)
            return np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError) as e:
            raise _bad("NPY", e) from None
    if t == NPZ:
        raw = _bytes(data)
        try:
            _check_npz_size(raw)
            import scipy.sparse
            return scipy.sparse.load_npz(io.BytesIO(raw))
        except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile) as e:
            raise _bad("NPZ", e) from None
    raise UnsupportedContentType(content_type)


def _check_npy_size(raw):
    """Refuses an NPY file whose header announces more data than it holds: numpy would allocate
    the announced array before reading it."""
    f = io.BytesIO(raw)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    elif version in ((2, 0), (3, 0)):
        shape, _, dtype = np.lib.format.read_array_header_2_0(f)
    else:
        raise ValueError("NPY format version %s is not supported" % (version,))
    n = 1
    for d in shape:
        n *= int(d)
    if n * dtype.itemsize > len(raw) - f.tell():
        raise ValueError("the header announces %s of %s, more than the body holds" % (shape, dtype))


# An NPZ body (a zip archive) may hold at most this many bytes once decompressed.
MAX_NPZ_UNCOMPRESSED = 256 << 20


def _check_npz_size(raw):
    """Refuses an NPZ archive that would decompress to more than MAX_NPZ_UNCOMPRESSED bytes."""
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        total = sum(i.file_size for i in z.infolist())
    if total > MAX_NPZ_UNCOMPRESSED:
        raise ValueError("the archive decompresses to %d bytes, over the %d-byte limit" % (total, MAX_NPZ_UNCOMPRESSED))


def _bytes(data):
    return data.encode("utf-8") if isinstance(data, str) else bytes(data)


def _as_array(obj):
    if hasattr(obj, "detach"):  # a torch tensor
        obj = obj.detach().cpu().numpy()
    if hasattr(obj, "toarray"):  # a scipy sparse matrix
        obj = obj.toarray()
    return np.asarray(obj)


def _jsonable(obj):
    if hasattr(obj, "detach") or hasattr(obj, "toarray") or isinstance(obj, np.ndarray):
        return _as_array(obj).tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError("%s is not JSON serializable" % type(obj).__name__)


def _csv_cell(v):
    if isinstance(v, (float, np.floating)):
        return repr(float(v))  # shortest text that reads back to the same float
    if isinstance(v, (bytes, bytearray)):
        v = v.decode("utf-8", "replace")
    return str(v)


def encode(obj, accept):
    """Bytes of obj (array-like, tensor, list, scalar) in the media type accept."""
    t = media_type(accept)
    if t == JSON:
        return json.dumps(obj, default=_jsonable).encode("utf-8")
    if t == CSV:
        arr = _as_array(obj)
        if arr.ndim == 0:
            arr = arr.reshape(1)
        lines = []
        for row in arr:
            cells = row if np.ndim(row) else [row]
            lines.append(",".join(_csv_cell(v) for v in np.asarray(cells).ravel().tolist()))
        return ("\n".join(lines) + "\n").encode("utf-8")
    if t == NPY:
        buf = io.BytesIO()
        np.save(buf, _as_array(obj), allow_pickle=False)
        return buf.getvalue()
    raise UnsupportedAccept(accept)
