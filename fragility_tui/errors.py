"""Errors the CLI turns into exit codes (2 = bad input, 1 = internal failure)."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a file, a row, a column or a flag. Exit code 2.

    The message must name where the problem is (file, line, column or field) so the user
    can fix it without reading a traceback.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None):
        where = []
        if path is not None:
            where.append(str(path) + (f":{line}" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field!r}")
        self.path, self.line, self.field = path, line, field
        super().__init__((", ".join(where) + ": " if where else "") + message)

    def __reduce__(self):
        # picklable with its message as shown (a log read in a second process raises it
        # in this one: imports/worker.py)
        return (_restored, (type(self), self.args, self.path, self.line, self.field))


def _restored(cls, args, path, line, field):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.path, error.line, error.field = path, line, field
    return error


class StoreBusyError(Exception):
    """The store stayed locked by another process for longer than the retry budget."""
