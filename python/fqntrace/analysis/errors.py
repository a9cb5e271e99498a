"""The errors the analysis verbs report: each is one line for the user, saying what to do."""

import json


class TraceError(Exception):
    """A problem to report to the user as one line (the message says what to do)."""


class DamagedTrace(TraceError):
    """A Chrome trace that is neither valid JSON nor a clean prefix of a trace (damage before its
    end, or no complete header). ``json_error``: where the JSON first breaks in the file, as
    "reason: line L column C", when known (given as a function, it is found when first asked:
    that may read the file again, and only validate says it). ``header_cut``: the file is one
    partial line that starts like the core's header (the program stopped while writing it)."""

    def __init__(self, message, json_error=None, header_cut=False):
        super().__init__(message)
        self._json_error = json_error
        self.header_cut = header_cut

    @property
    def json_error(self):
        if callable(self._json_error):
            self._json_error = self._json_error()
        return self._json_error


class NotATrace(TraceError):
    """Valid JSON that is not a trace object (not an object, or no traceEvents list).
    ``document`` is the parsed JSON, for a caller that names what is missing in its own words."""

    def __init__(self, message, document):
        super().__init__(message)
        self.document = document


def describe_json_error(error):
    """A JSON error as "reason: line L column C" (a JSONDecodeError), "not JSON" for None."""
    if error is None:
        return "not JSON"
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg}: line {error.lineno} column {error.colno}"
    return str(error)


def repair_hint(path):
    return f"run: python -m fqntrace repair {path}"


class UsageError(Exception):
    """Arguments that do not go together (exit 2): the message says which and why."""
