"""Settings read once from the environment at start (SageMaker's names).

| variable | default | meaning |
| --- | --- | --- |
| SAGEMAKER_BIND_TO_PORT | 8080 | the only port the container listens on |
| SAGEMAKER_PROGRAM | inference.py | the user's module under the code directory |
| SAGEMAKER_SUBMIT_DIRECTORY | /opt/ml/model/code | the code directory (a local path; a URL is refused) |
| SAGEMAKER_MODEL_SERVER_WORKERS | CPU count | worker processes (single-model mode) / threads (multi-model) |
| SAGEMAKER_MODEL_SERVER_TIMEOUT | 60 | seconds a request may take before its worker is replaced |
| SAGEMAKER_MAX_PAYLOAD_IN_MB | 6 | request body cap in MiB (413 beyond) |
| SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT | application/json | Accept used when missing or */* |
| SAGEMAKER_MULTI_MODEL | false | serve the multi-model container API |
| SAGEMAKER_CONTAINER_LOG_LEVEL | 20 | Python logging level |
| MCE_MODEL_MEMORY_MB | 80% of the memory limit | multi-model memory budget (507 beyond) |
| MCE_MODEL_GPU_MEMORY_MB | 90% of each device's memory | multi-model GPU budget, per CUDA device (507 beyond) |
| MCE_FRAMEWORK | set by the image | sklearn or pytorch: the default hooks |
| MCE_MODELS_DIR | /opt/ml/models | multi-model: the folder load requests' "url" must be under |
| MCE_BIND_HOST | 0.0.0.0 | the address to listen on (127.0.0.1 for a plain process on a host) |
| MCE_SERVING_SERVER | gunicorn (werkzeug without it) | gunicorn, or werkzeug: one process, threads |
"""

import os


class SettingsError(ValueError):
    """An environment variable has a value that cannot be used."""


def _int(env, name, default, lo, hi):
    raw = env.get(name, "").strip()
    if raw == "":
        return default
    try:
        v = int(raw)
    except ValueError:
        raise SettingsError("%s=%r is not an integer" % (name, raw)) from None
    if not lo <= v <= hi:
        raise SettingsError("%s=%d is outside %d..%d" % (name, v, lo, hi))
    return v


def memory_limit_bytes():
    """The container's memory limit (cgroup v2 or v1) or, without one, the machine's RAM."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                raw = f.read().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < (1 << 60):  # "max" or a huge number: no limit
            return int(raw)
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 1 << 30


class Settings:
    """The serving settings; build with ``Settings.from_env()``."""

    def __init__(self, env=None):
        env = os.environ if env is None else env
        self.port = _int(env, "SAGEMAKER_BIND_TO_PORT", 8080, 1, 65535)
        self.program = env.get("SAGEMAKER_PROGRAM", "").strip() or "inference.py"
        self.code_dir = env.get("SAGEMAKER_SUBMIT_DIRECTORY", "").strip() or "/opt/ml/model/code"
        if "://" in self.code_dir:
            # The SDK may give s3://…/sourcedir.tar.gz. This container has no
            # AWS credentials and downloads nothing: mce fetches the archive
            # on the host, mounts it at /opt/ml/code and sets the variable to
            # that folder, so a URL here means nobody fetched it.
            raise SettingsError(
                "SAGEMAKER_SUBMIT_DIRECTORY=%r: this container does not download code; mce fetches an s3:// "
                "archive and sets the variable to /opt/ml/code. Elsewhere set it to a folder in the container "
                "(default /opt/ml/model/code)" % self.code_dir[:200])
        self.model_dir = env.get("MCE_MODEL_DIR", "").strip() or "/opt/ml/model"
        self.workers = _int(env, "SAGEMAKER_MODEL_SERVER_WORKERS", os.cpu_count() or 1, 1, 256)
        self.timeout = _int(env, "SAGEMAKER_MODEL_SERVER_TIMEOUT", 60, 1, 3600)
        self.max_payload = _int(env, "SAGEMAKER_MAX_PAYLOAD_IN_MB", 6, 1, 1024) << 20
        self.default_accept = env.get("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT", "").strip() or "application/json"
        self.multi_model = env.get("SAGEMAKER_MULTI_MODEL", "").strip().lower() == "true"
        self.log_level = _int(env, "SAGEMAKER_CONTAINER_LOG_LEVEL", 20, 0, 50)
        self.framework = env.get("MCE_FRAMEWORK", "").strip() or "sklearn"
        if self.framework not in ("sklearn", "pytorch"):
            raise SettingsError("MCE_FRAMEWORK=%r: want sklearn or pytorch" % self.framework)
        mb = _int(env, "MCE_MODEL_MEMORY_MB", 0, 0, 1 << 30)
        self.memory_budget = mb << 20 if mb else int(memory_limit_bytes() * 0.8)
        # Per CUDA device; 0: 90 % of the device's total memory (read when a model is loaded on it).
        self.gpu_memory_budget = _int(env, "MCE_MODEL_GPU_MEMORY_MB", 0, 0, 1 << 30) << 20
        self.models_dir = env.get("MCE_MODELS_DIR", "").strip() or "/opt/ml/models"
        self.host = env.get("MCE_BIND_HOST", "").strip() or "0.0.0.0"
        self.server = env.get("MCE_SERVING_SERVER", "").strip().lower()
        if self.server not in ("", "gunicorn", "werkzeug"):
            raise SettingsError("MCE_SERVING_SERVER=%r: want gunicorn or werkzeug" % self.server)

    @classmethod
    def from_env(cls):
        return cls()
