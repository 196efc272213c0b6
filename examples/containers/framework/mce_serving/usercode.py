"""Finding, preparing and importing the user's code.

* ``code/requirements.txt`` is installed only from a wheel folder shipped next to it in the
  model artifact (``code/wheels/`` or ``code/lib/``), with ``pip --no-index``: the container
  never reaches the network. A requirement neither the image nor such a folder meets fails the
  load with an error naming the file.
  Packages go to a private folder under /tmp (the model directory is mounted read-only); what
  the image already has (numpy, scipy, …) satisfies requirements without a wheel.
* In single-model mode the code directory is put first on ``sys.path`` and the module imported
  by its name, as SageMaker's toolkits do.
* In multi-model mode every model brings its own ``code/inference.py``: each is imported from
  its file under a unique module name, and modules it imported from its own folders are taken
  out of ``sys.modules`` afterwards, so two models' ``inference.py`` (or ``utils.py``) never clash.
"""

import hashlib
import importlib
import importlib.util
import logging
import os
import subprocess
import sys

from .errors import ModelLoadError

log = logging.getLogger("mce_serving")

WHEEL_DIRS = ("wheels", "lib")
PIP_TIMEOUT = 600


def requirement_lines(path):
    """The requirement lines of a requirements file (comments and blanks dropped)."""
    with open(path, encoding="utf-8") as f:
        return [ln.strip() for ln in f if ln.strip() and not ln.strip().startswith("#")]


def install_requirements(code_dir, site_root="/tmp/mce-site"):
    """Installs code_dir/requirements.txt offline; returns the folder to put on sys.path
    (None when there is nothing to install). Raises ModelLoadError."""
    req = os.path.join(code_dir, "requirements.txt")
    if not os.path.isfile(req):
        return None
    rel = os.path.join("code", "requirements.txt")
    try:
        lines = requirement_lines(req)
    except (OSError, UnicodeDecodeError) as e:
        raise ModelLoadError("cannot read %s: %s" % (rel, e)) from None
    if not lines:
        return None
    wheels = [os.path.join(code_dir, d) for d in WHEEL_DIRS if os.path.isdir(os.path.join(code_dir, d))]
    h = hashlib.sha256(os.path.realpath(req).encode())
    with open(req, "rb") as f:
        h.update(f.read())
    for d in wheels:
        for name in sorted(os.listdir(d)):
            h.update(name.encode())
    # A user install under a private base: pip then counts the image's packages (numpy, scipy, …)
    # as installed, so the wheel folder needs only what the image lacks.
    base = os.path.join(site_root, h.hexdigest()[:16])
    site = os.path.join(base, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if os.path.isfile(os.path.join(base, ".mce-done")):
        return site
    cmd = [sys.executable, "-m", "pip", "install", "--user", "--break-system-packages", "--no-index",
           "--disable-pip-version-check", "--no-warn-script-location", "--no-build-isolation", "--quiet",
           "-r", req]
    for d in wheels:
        cmd += ["--find-links", d]
    log.info("installing %s from %s (offline)", rel,
             ", ".join("code/" + os.path.basename(d) for d in wheels) or "the image's own packages")
    try:
        res = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=PIP_TIMEOUT,
                             env=dict(os.environ, PYTHONUSERBASE=base, PIP_NO_INPUT="1", PIP_NO_CACHE_DIR="1",
                                      PIP_ROOT_USER_ACTION="ignore"))
    except subprocess.TimeoutExpired:
        raise ModelLoadError("installing %s took longer than %d s" % (rel, PIP_TIMEOUT)) from None
    if res.returncode != 0:
        out = res.stdout.decode("utf-8", "replace").strip()
        if not wheels:
            # Without a wheel folder only requirements the image already meets can pass.
            raise ModelLoadError(
                "%s lists %d requirement(s) (%s) that this image does not have, and the model artifact ships no "
                "wheel folder (code/wheels/ or code/lib/): this container installs nothing from the network. "
                "Put the wheels next to it, e.g. `pip download --only-binary=:all: -r requirements.txt -d "
                "code/wheels`, or remove the file. (pip: %s)"
                % (rel, len(lines), ", ".join(lines[:5]), out.splitlines()[-1] if out else ""))
        raise ModelLoadError("installing %s from the shipped wheels failed (pip exit %d): %s"
                             % (rel, res.returncode, out[-2000:]))
    os.makedirs(site, exist_ok=True)
    open(os.path.join(base, ".mce-done"), "w").close()
    return site


def module_name(program):
    """The module name for SAGEMAKER_PROGRAM ("inference.py" → "inference")."""
    p = program[:-3] if program.endswith(".py") else program
    return p.strip("/").replace("/", ".")


def program_path(code_dir, program):
    path = os.path.join(code_dir, program if program.endswith(".py") else program + ".py")
    if not os.path.isfile(path):
        return None
    return path


def import_single(code_dir, program):
    """Imports the program (single-model mode): the code folder and its installed requirements
    stay on sys.path. Returns the module, or None when there is no user script."""
    if program_path(code_dir, program) is None:
        return None
    site = install_requirements(code_dir)
    for d in (site, code_dir):
        if d and d not in sys.path:
            sys.path.insert(0, d)
    return importlib.import_module(module_name(program))


def import_private(code_dir, program, unique):
    """Imports the program from its file as module ``unique`` (multi-model mode), with the code
    folder and its installed requirements on sys.path only while it is imported; modules loaded
    from those folders leave sys.modules again. Returns the module, or None without a script."""
    path = program_path(code_dir, program)
    if path is None:
        return None
    site = install_requirements(code_dir)
    private = [d for d in (code_dir, site) if d]
    real = [os.path.realpath(d) + os.sep for d in private]
    before = set(sys.modules)
    sys.path[:0] = private
    try:
        spec = importlib.util.spec_from_file_location(unique, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[unique] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(unique, None)
            raise
        return mod
    finally:
        for d in private:
            try:
                sys.path.remove(d)
            except ValueError:
                pass
        importlib.invalidate_caches()
        for name in set(sys.modules) - before:
            f = getattr(sys.modules.get(name), "__file__", None) or ""
            if name != unique and any(os.path.realpath(f).startswith(r) for r in real):
                del sys.modules[name]
