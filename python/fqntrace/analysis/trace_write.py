"""Writing trace files: a whole file replaced at once (never half written, gzip when the name
ends in .gz), and events in the core's layout (one line each, times in microseconds with three
decimals)."""

import json
import os
import tempfile
import time
import zlib

from fqntrace.analysis.errors import TraceError
from fqntrace.analysis.trace_events import format_us
from fqntrace.analysis.trace_format import is_gzip


def write_atomic(path, text, like=None):
    """Writes text to path through a temporary file in the same folder and a rename, so readers
    never see half a file. ``like``: copy that file's permission bits."""
    write_atomic_chunks(path, [text], like)


def write_atomic_chunks(path, chunks, like=None):
    """write_atomic for text made piece by piece (an iterable of str or UTF-8 bytes): never all
    in memory.
    The temporary file has no name while it is written (O_TMPFILE), so a writer killed midway
    leaves nothing behind; where the file system cannot do that, a named one is used, and stale
    ones (.fqntrace-*.tmp not modified for STALE_TMP_S: their writer is gone) are removed first.
    A path ending in .gz is written gzip-compressed. An exception raised by the iterable (a
    TraceError) removes the temporary file."""
    folder = os.path.dirname(os.path.abspath(path))
    _remove_stale_temporaries(folder)
    tmp = None
    try:
        fd = os.open(folder, os.O_TMPFILE | os.O_WRONLY, 0o600)
    except (OSError, AttributeError):
        fd = None
    try:
        if fd is None:
            fd, tmp = tempfile.mkstemp(prefix=".fqntrace-", suffix=".tmp", dir=folder)
    except OSError as error:
        raise TraceError(f"{path}: cannot write in {folder} ({error.strerror or error})") from None
    try:
        gzipped = is_gzip(path)
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31) if gzipped else None  # 31: gzip
        with os.fdopen(fd, "wb") as f:
            for text in chunks:  # str, or bytes already encoded (merge's native blocks)
                data = (
                    text if type(text) is bytes else text.encode("utf-8", errors="surrogateescape")
                )
                f.write(compressor.compress(data) if gzipped else data)
            if gzipped:
                f.write(compressor.flush())
            f.flush()
            os.fsync(f.fileno())
            mode = 0o644 & ~_umask()
            if like is not None:
                try:
                    mode = os.stat(like).st_mode & 0o7777
                except OSError:
                    pass
            os.fchmod(f.fileno(), mode)
            if tmp is None:  # give the finished file a name for the rename (microseconds)
                tmp = os.path.join(folder, f".fqntrace-{os.getpid()}-{os.urandom(4).hex()}.tmp")
                _link_unnamed(f.fileno(), folder, tmp)
        os.replace(tmp, path)
    except BaseException as error:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        if isinstance(error, OSError):
            raise TraceError(f"{path}: cannot write ({error.strerror or error})") from None
        raise


def _link_unnamed(fd, folder, name):
    """linkat(AT_SYMLINK_FOLLOW) of an O_TMPFILE file: os.link() calls plain link(), which does
    not follow /proc/self/fd's link, unless a dir_fd is given."""
    folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.link(
            f"/proc/self/fd/{fd}",
            os.path.basename(name),
            src_dir_fd=folder_fd,
            dst_dir_fd=folder_fd,
            follow_symlinks=True,
        )
    finally:
        os.close(folder_fd)


STALE_TMP_S = 60


def _remove_stale_temporaries(folder):
    """A writer killed while writing a named temporary left it; one that nobody has written to
    for a minute has no writer any more."""
    now = time.time()
    try:
        names = [n for n in os.listdir(folder) if n.startswith(".fqntrace-") and n.endswith(".tmp")]
    except OSError:
        return
    for name in names:
        tmp = os.path.join(folder, name)
        try:
            if now - os.stat(tmp).st_mtime > STALE_TMP_S:
                os.unlink(tmp)
        except OSError:
            pass


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


class Micros(int):
    """Integer nanoseconds that serialize as microseconds with three decimals."""


def dump_event(event):
    """One event as one line of JSON, key order kept, Micros values as the core writes times."""
    parts = []
    for key, value in event.items():
        if isinstance(value, Micros):
            text = format_us(int(value))
        else:
            text = json.dumps(value, ensure_ascii=False)
        parts.append(json.dumps(key, ensure_ascii=False) + ": " + text)
    return "{" + ", ".join(parts) + "}"
