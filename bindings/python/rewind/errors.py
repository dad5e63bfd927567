"""Typed errors: every failing call of librewind raises a RewindError that
carries the library's status (code and name, e.g. 9 and "ERR_CONTEXT") and
its one-line message. Each status has its own subclass, so callers catch
what they can handle (``except rewind.ContextOverflowError``) or all of
them (``except rewind.RewindError``)."""


class RewindError(Exception):
    """A librewind call failed.

    status: the status name ("ERR_FORMAT"); code: its number in rw_status;
    message: the library's one-line message (the file, the offset, the
    reason)."""

    status = "ERR_INTERNAL"

    def __init__(self, message, status=None, code=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        self.code = code
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.status, self.message)


class InvalidArgumentError(RewindError, ValueError):
    status = "ERR_INVALID_ARG"


class OutOfMemoryError(RewindError, MemoryError):
    status = "ERR_NOMEM"


class IOFailureError(RewindError, OSError):
    status = "ERR_IO"


class FormatError(RewindError):
    status = "ERR_FORMAT"


class UnsupportedError(RewindError):
    status = "ERR_UNSUPPORTED"


class NotFoundError(RewindError, LookupError):
    status = "ERR_NOT_FOUND"


class RangeError(RewindError, ValueError):
    status = "ERR_RANGE"


class TemplateError(RewindError):
    status = "ERR_TEMPLATE"


class ContextOverflowError(RewindError):
    status = "ERR_CONTEXT"


class CancelledError(RewindError):
    status = "ERR_CANCELLED"


class BusyError(RewindError):
    status = "ERR_BUSY"


class InternalError(RewindError):
    status = "ERR_INTERNAL"


# status name -> class; a status a newer library adds maps to RewindError.
BY_STATUS = {
    c.status: c
    for c in (
        InvalidArgumentError,
        OutOfMemoryError,
        IOFailureError,
        FormatError,
        UnsupportedError,
        NotFoundError,
        RangeError,
        TemplateError,
        ContextOverflowError,
        CancelledError,
        BusyError,
        InternalError,
    )
}


def make(status, message, code=None):
    """The error for a status name (the class of that status)."""
    cls = BY_STATUS.get(status, RewindError)
    return cls(message, status=status, code=code)
