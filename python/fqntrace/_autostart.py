"""Run at interpreter start-up by fqntrace-autostart.pth. With FQNTRACE unset it does nothing.
With it set, it waits until the program imports torch (processes that never do pay nothing),
then loads fqntrace, which starts the session and installs the module hooks."""

import os
import sys


def _is_launcher():
    # torchrun's own process only spawns the workers; tracing it would clobber rank 0's file.
    argv0 = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return argv0 == "torchrun" or sys.argv[0].endswith(
        os.path.join("torch", "distributed", "run.py")
    )


def _activate():
    if _is_launcher():
        return
    try:
        import fqntrace._activate  # noqa: F401
    except Exception as error:  # never break the user's program
        # NotLoadable says what fixes it (e.g. a build for another torch: the rebuild command).
        reason = (
            getattr(error, "reason", None) or f"{error}; reinstall fqntrace into this environment"
        )
        sys.stderr.write(f"fqntrace: FQNTRACE is set but tracing is off: {reason}\n")


# FQNTRACE_AUTOSTART=0 leaves starting to the program (torch.ops.load_library or fqntrace.profile).
if os.environ.get("FQNTRACE") and os.environ.get("FQNTRACE_AUTOSTART", "1") != "0":
    # Imported here, not above: with FQNTRACE unset the start-up hook imports nothing.
    from fqntrace._on_import import when_imported

    when_imported("torch", lambda torch: _activate())
