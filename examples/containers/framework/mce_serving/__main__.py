"""Entry point of the framework images: ``serve`` serves; any other command is run as given
(``docker run IMAGE python3 -m unittest …``)."""

import os
import sys


def main(argv):
    if not argv or argv[0] == "serve":
        from .server import main as serve
        return serve()
    if argv[0] == "train":
        print("mce_serving: this image serves models; training is not supported", file=sys.stderr)
        return 2
    try:
        os.execvp(argv[0], argv)
    except OSError as e:
        print("mce_serving: cannot run %s: %s" % (argv[0], e), file=sys.stderr)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
