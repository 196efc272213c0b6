import os
import subprocess
import sys
import tempfile
import unittest
import zipfile

from mce_serving import usercode
from mce_serving.errors import ModelLoadError

from .helpers import ModelDir


def make_wheel(folder, name, source, requires=()):
    """A minimal pure-Python wheel of package name."""
    info = "%s-1.0.dist-info" % name
    path = os.path.join(folder, "%s-1.0-py3-none-any.whl" % name)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("%s/__init__.py" % name, source)
        z.writestr("%s/METADATA" % info, "Metadata-Version: 2.1\nName: %s\nVersion: 1.0\n" % name
                   + "".join("Requires-Dist: %s\n" % r for r in requires))
        z.writestr("%s/WHEEL" % info, "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr("%s/RECORD" % info, "")
    return path


class PrivateImportTest(unittest.TestCase):
    def test_two_models_do_not_clash(self):
        a = {"code/inference.py": "from helper import VALUE\ndef model_fn(d):\n    return VALUE\n",
             "code/helper.py": "VALUE = 'a'\n"}
        b = {"code/inference.py": "from helper import VALUE\ndef model_fn(d):\n    return VALUE * 2\n",
             "code/helper.py": "VALUE = 'b'\n"}
        with ModelDir(a) as da, ModelDir(b) as db:
            ma = usercode.import_private(os.path.join(da, "code"), "inference.py", "mce_model_a")
            mb = usercode.import_private(os.path.join(db, "code"), "inference.py", "mce_model_b")
            self.assertEqual((ma.model_fn(None), mb.model_fn(None)), ("a", "bb"))
            self.assertNotIn("helper", sys.modules)
            self.assertNotIn(os.path.join(da, "code"), sys.path)
            self.assertIs(sys.modules["mce_model_a"], ma)

    def test_missing_script(self):
        with ModelDir({"model.bin": b""}) as d:
            self.assertIsNone(usercode.import_private(os.path.join(d, "code"), "inference.py", "mce_model_x"))

    def test_failed_import_leaves_nothing(self):
        with ModelDir({"code/inference.py": "raise RuntimeError('bad script')\n"}) as d:
            with self.assertRaisesRegex(RuntimeError, "bad script"):
                usercode.import_private(os.path.join(d, "code"), "inference.py", "mce_model_bad")
            self.assertNotIn("mce_model_bad", sys.modules)


class RequirementsTest(unittest.TestCase):
    def test_comments_only_install_nothing(self):
        with ModelDir({"code/requirements.txt": "# nothing\n\n"}) as d:
            self.assertIsNone(usercode.install_requirements(os.path.join(d, "code")))

    def test_without_wheels_fails_naming_the_file(self):
        with ModelDir({"code/requirements.txt": "notinthisimage==2.0\n"}) as d, tempfile.TemporaryDirectory() as site:
            with self.assertRaises(ModelLoadError) as cm:
                usercode.install_requirements(os.path.join(d, "code"), site_root=site)
        msg = str(cm.exception)
        self.assertIn("code/requirements.txt", msg)
        self.assertIn("code/wheels/", msg)
        self.assertIn("notinthisimage==2.0", msg)

    def test_without_wheels_the_image_may_suffice(self):
        with ModelDir({"code/requirements.txt": "numpy\nscikit-learn>=1.0\n"}) as d, \
                tempfile.TemporaryDirectory() as site:
            self.assertIsNotNone(usercode.install_requirements(os.path.join(d, "code"), site_root=site))

    def test_installs_from_shipped_wheels_offline(self):
        with ModelDir({"code/requirements.txt": "mcetestpkg\n"}) as d, tempfile.TemporaryDirectory() as site:
            os.makedirs(os.path.join(d, "code", "wheels"))
            make_wheel(os.path.join(d, "code", "wheels"), "mcetestpkg", "ANSWER = 42\n")
            got = usercode.install_requirements(os.path.join(d, "code"), site_root=site)
            out = subprocess.run([sys.executable, "-c", "import mcetestpkg; print(mcetestpkg.ANSWER)"],
                                 env=dict(os.environ, PYTHONPATH=got), capture_output=True, text=True)
            self.assertEqual(out.stdout.strip(), "42", out.stderr)
            # A second start finds the installation done.
            self.assertEqual(usercode.install_requirements(os.path.join(d, "code"), site_root=site), got)

    def test_image_packages_satisfy_dependencies(self):
        # The wheel needs numpy, which the image has and the wheel folder does not.
        with ModelDir({"code/requirements.txt": "mcedep\nnumpy\n"}) as d, tempfile.TemporaryDirectory() as site:
            os.makedirs(os.path.join(d, "code", "lib"))
            make_wheel(os.path.join(d, "code", "lib"), "mcedep", "import numpy\nN = numpy.int64(3)\n", ["numpy"])
            got = usercode.install_requirements(os.path.join(d, "code"), site_root=site)
            out = subprocess.run([sys.executable, "-c", "import mcedep; print(mcedep.N)"],
                                 env=dict(os.environ, PYTHONPATH=got), capture_output=True, text=True)
            self.assertEqual(out.stdout.strip(), "3", out.stderr)

    def test_missing_wheel_fails(self):
        with ModelDir({"code/requirements.txt": "notshipped\n", "code/lib/README": "no wheels here\n"}) as d, \
                tempfile.TemporaryDirectory() as site:
            with self.assertRaisesRegex(ModelLoadError, "code/requirements.txt.*failed"):
                usercode.install_requirements(os.path.join(d, "code"), site_root=site)


if __name__ == "__main__":
    unittest.main()
