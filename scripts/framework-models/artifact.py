"""Writing SageMaker model artifacts (model.tar.gz) the way the SageMaker SDK repacks them.

A model.tar.gz holds the model files at its root (they land in /opt/ml/model) and the user's
script under code/ (/opt/ml/model/code). The archives are deterministic: sorted entries, mtime 0,
owner 0:0, mode 0644 (0755 for folders) and gzip without a name or a time, so the same inputs give
the same bytes.
"""
import gzip
import io
import json
import os
import tarfile


def pack(out_path, files, level=9):
    """Write out_path, a .tar.gz holding files: {name in the archive: bytes}.

    Folders named by the paths are added as entries of their own; level is gzip's (1 is fast, for
    weights that do not compress anyway). The archive is written to a
    temporary name and renamed, so a reader never sees half of one.
    """
    names = set(files)
    for name in list(files):
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            names.add("/".join(parts[:i]) + "/")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in sorted(names):
            info = tarfile.TarInfo(name.rstrip("/"))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if name.endswith("/"):
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                data = files[name]
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    tmp = out_path + ".tmp"
    with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=level) as gz:
        gz.write(buf.getvalue())
    os.replace(tmp, out_path)


def read(path):
    """The bytes of a file."""
    with open(path, "rb") as f:
        return f.read()


def code_dir(path):
    """{code/NAME: bytes} for the regular files of a user's code folder (no caches)."""
    out = {}
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if os.path.isfile(full) and not name.endswith(".pyc"):
            out["code/" + name] = read(full)
    return out


def write_json(path, value):
    """Write value as JSON to path (atomically)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(value, f, separators=(",", ":"))
    os.replace(tmp, path)
