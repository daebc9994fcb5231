//! error.rs - the error every fallible call returns: a status code and Sinter's message.
//!
//! The codes are absl::StatusCode's (sinter.h's SINTER_* values); the message is the one the C
//! ABI keeps per thread (`sinter_last_error`), read right after the failing call, e.g.
//! "free: buffer 7 is not allocated".
use std::ffi::CStr;
use std::fmt;

use crate::ffi;

/// absl::StatusCode, as sinter.h numbers it. `Ok` never appears inside an [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusCode {
    Ok,
    Cancelled,
    Unknown,
    InvalidArgument,
    DeadlineExceeded,
    NotFound,
    AlreadyExists,
    PermissionDenied,
    ResourceExhausted,
    FailedPrecondition,
    Aborted,
    OutOfRange,
    Unimplemented,
    Internal,
    Unavailable,
    DataLoss,
    Unauthenticated,
    /// A value the C ABI returned that is no known code (kept, not mapped to Unknown).
    Unrecognized(i32),
}

impl StatusCode {
    /// The code of a `sinter_status` value.
    pub fn from_raw(raw: i32) -> StatusCode {
        use StatusCode::*;
        match raw {
            0 => Ok,
            1 => Cancelled,
            2 => Unknown,
            3 => InvalidArgument,
            4 => DeadlineExceeded,
            5 => NotFound,
            6 => AlreadyExists,
            7 => PermissionDenied,
            8 => ResourceExhausted,
            9 => FailedPrecondition,
            10 => Aborted,
            11 => OutOfRange,
            12 => Unimplemented,
            13 => Internal,
            14 => Unavailable,
            15 => DataLoss,
            16 => Unauthenticated,
            other => Unrecognized(other),
        }
    }

    /// The `sinter_status` value of the code.
    pub fn raw(self) -> i32 {
        use StatusCode::*;
        match self {
            Ok => 0,
            Cancelled => 1,
            Unknown => 2,
            InvalidArgument => 3,
            DeadlineExceeded => 4,
            NotFound => 5,
            AlreadyExists => 6,
            PermissionDenied => 7,
            ResourceExhausted => 8,
            FailedPrecondition => 9,
            Aborted => 10,
            OutOfRange => 11,
            Unimplemented => 12,
            Internal => 13,
            Unavailable => 14,
            DataLoss => 15,
            Unauthenticated => 16,
            Unrecognized(v) => v,
        }
    }

    /// The library's name of the code: "OK", "NOT_FOUND", ...; "UNRECOGNIZED" for other values.
    pub fn name(self) -> &'static str {
        // SAFETY: sinter_status_name returns a static NUL-terminated string, never NULL.
        let name = unsafe { CStr::from_ptr(ffi::sinter_status_name(self.raw())) };
        name.to_str().unwrap_or("UNRECOGNIZED")
    }
}

/// A failed call: the code and the library's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: StatusCode,
    message: String,
}

impl Error {
    /// An error made on the Rust side (e.g. a string with an interior NUL).
    pub fn new(code: StatusCode, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }

    /// The error of a status the C ABI just returned on this thread, with its message.
    pub(crate) fn from_last(status: ffi::sinter_status) -> Error {
        // SAFETY: sinter_last_error returns a NUL-terminated string owned by the library, valid
        // until the next failing call on this thread; it is copied at once.
        let message = unsafe { CStr::from_ptr(ffi::sinter_last_error()) }
            .to_string_lossy()
            .into_owned();
        Error::new(StatusCode::from_raw(status), message)
    }

    pub fn code(&self) -> StatusCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.name(), self.message)
    }
}

impl std::error::Error for Error {}

/// What every fallible `ComputeBackend` method returns: the shape of yule-core's
/// `yule_core::error::Result<T>`, with [`Error`] in place of its error type.
pub type Result<T> = std::result::Result<T, Error>;

/// `Ok(())` for SINTER_OK, else the error with this thread's last message.
pub(crate) fn check(status: ffi::sinter_status) -> Result<()> {
    if status == 0 {
        return Ok(());
    }
    Err(Error::from_last(status))
}
