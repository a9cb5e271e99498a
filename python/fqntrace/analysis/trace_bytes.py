"""A trace file's bytes, for every reader of it (the stream, the whole-file helpers, the follower
of a growing file): opened with a one-line error, gzip inflated as it is read, turned into text.

gzip (either format; any file starting with gzip's magic bytes) is inflated with zlib as it is
read, member after member. The core sync-flushes the compressor at every periodic flush, so a
gzip stream cut off by a crash ends where its data ends, and is then read as any cut-off text
(GzipFile would raise EOFError and lose the last read instead).
"""

import os
import zlib

from fqntrace.analysis.errors import TraceError

GZIP_MAGIC = b"\x1f\x8b"
CHUNK_BYTES = 1 << 22  # 4 MiB per read


def as_text(data):
    """Bytes as text. Invalid UTF-8 is kept byte-exact (surrogateescape), so a repair writes back
    exactly what it read; a character cut in half at the end lands in the dropped line."""
    return data.decode("utf-8", errors="surrogateescape")


def check_not_binary(path, start):
    """Raises TraceError when the (decompressed) start of a file holds a NUL byte."""
    if b"\x00" in start[:4096]:
        raise TraceError(f"{path}: binary data, not a trace (fqntrace writes .json or .jsonl text)")


def open_trace(path):
    """The file opened for binary reading; a TraceError whose one line says what to do when it
    cannot be."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, not a trace file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied (check the file's permissions)") from None
    except OSError as error:
        raise TraceError(f"{path}: cannot read ({error.strerror or error})") from None


class GzipInflater:
    """gzip data inflated as it comes, one member after another (a writer may close a member and
    start the next). ``pending`` holds the compressed bytes given and not inflated yet."""

    def __init__(self):
        self._member = zlib.decompressobj(wbits=31)
        self.pending = b""
        self.inflated_any = False

    def inflate(self, limit=0):
        """Text of the pending bytes from the current member: at most `limit` bytes (0: all of
        it); a member that ends makes way for the next. Raises zlib.error on damaged data."""
        out = self._member.decompress(self.pending, limit)
        self.inflated_any = True
        if self._member.eof:
            self.pending = self._member.unused_data
            self._member = zlib.decompressobj(wbits=31)
        else:
            self.pending = self._member.unconsumed_tail
        return out


class ByteSource:
    """A file's bytes in chunks; a gzip file (by its first bytes, whatever its name) inflated as
    it is read, so a gzip stream cut off by a crash gives every byte that was written."""

    def __init__(self, path):
        self.path = path
        self._file = open_trace(path)
        self._inflater = None
        self._first = True
        self._done = False

    def read(self):
        """The next chunk of bytes (at most CHUNK_BYTES, inflated ones too), b'' at the end."""
        while True:
            if self._inflater is not None and self._inflater.pending:  # not inflated yet
                data = self._inflate_some()
                if data:
                    return data
                continue
            if self._done:
                return b""
            try:
                data = self._file.read(CHUNK_BYTES if self._inflater is None else CHUNK_BYTES >> 3)
            except OSError as error:
                raise TraceError(f"{self.path}: cannot read ({error.strerror or error})") from None
            if not data:
                self._done = True
                return b""
            if self._first:
                self._first = False
                if data.startswith(GZIP_MAGIC):
                    self._inflater = GzipInflater()
            if self._inflater is None:
                return data
            self._inflater.pending = data

    def read_again(self, back):
        """The last `back` bytes read and the chunk after them, read from the file once more:
        the caller's unconsumed bytes come back at the start of a fresh chunk, where joining
        them to the next chunk would copy the chunk. None where a file is not read twice
        (gzip, a pipe)."""
        if self._inflater is not None or self._first or self._done:
            return None
        try:
            if not self._file.seekable():
                return None
            self._file.seek(-back, os.SEEK_CUR)
            data = self._file.read(back + CHUNK_BYTES)
        except OSError as error:
            raise TraceError(f"{self.path}: cannot read ({error.strerror or error})") from None
        if len(data) <= back:
            self._done = True
        return data

    def _inflate_some(self):
        """Inflates the pending bytes, at most CHUNK_BYTES of output."""
        try:
            return self._inflater.inflate(CHUNK_BYTES)
        except zlib.error as error:
            if not self._inflater.inflated_any:
                raise TraceError(
                    f"{self.path}: damaged gzip data ({error}); the file was not "
                    "written by fqntrace or was overwritten"
                ) from None
            self._inflater.pending = b""
            self._done = True  # damaged compressed data: keep what was decoded
            return b""

    def close(self):
        self._file.close()
