"""`python -m fqntrace <verb>` (and the `fqntrace` command): `doctor` and `--version` are
fqntrace.doctor's (they look at torch and the build); every other verb is
fqntrace.analysis.cli's."""

import sys


def run(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] in (["doctor"], ["--version"]):
        from fqntrace.doctor import main
    else:
        from fqntrace.analysis.cli import main
    return main(argv)


if __name__ == "__main__":
    sys.exit(run())
