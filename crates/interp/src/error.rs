//! [`InterpError`]: what went wrong while running IR, with the op it happened at.
//!
//! Kernels return errors with a message only; the executor adds the op's name
//! and its location text, so every error a user sees names the op, e.g.
//! `error at loc("conv1") ('fp.conv2d'): input has 4 channels, weight expects 3`.

use std::fmt;

/// An error while executing IR: a message, and where it happened when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterpError {
    /// What went wrong.
    pub message: String,
    /// The op's location as `.qir` spells it (`loc("conv1")`), or `line L:C` of
    /// the parsed input when the op has no location.
    pub location: Option<String>,
    /// The op's name (`fp.conv2d`), when the error belongs to an op.
    pub op: Option<String>,
}

impl InterpError {
    /// An error with a message only.
    pub fn new(message: impl Into<String>) -> InterpError {
        InterpError { message: message.into(), location: None, op: None }
    }

    /// Attaches the op name and location text unless the error already names an op.
    pub fn at(mut self, op: &str, location: Option<String>) -> InterpError {
        if self.op.is_none() {
            self.op = Some(op.to_string());
            self.location = location;
        }
        self
    }
}

impl fmt::Display for InterpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.location, &self.op) {
            (Some(loc), Some(op)) => write!(f, "error at {loc} ('{op}'): {}", self.message),
            (None, Some(op)) => write!(f, "error in '{op}': {}", self.message),
            (Some(loc), None) => write!(f, "error at {loc}: {}", self.message),
            (None, None) => write!(f, "error: {}", self.message),
        }
    }
}

impl std::error::Error for InterpError {}

impl From<String> for InterpError {
    fn from(message: String) -> InterpError {
        InterpError::new(message)
    }
}

impl From<&str> for InterpError {
    fn from(message: &str) -> InterpError {
        InterpError::new(message)
    }
}

/// Returns early with an [`InterpError`] built from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::InterpError::new(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;
    use qopt_dialect_fp::op_names as fp_op;

    #[test]
    fn display() {
        let e = InterpError::new("bad").at(fp_op::CONV2D, Some("loc(\"conv1\")".into()));
        assert_eq!(e.to_string(), "error at loc(\"conv1\") ('fp.conv2d'): bad");
        assert_eq!(InterpError::new("bad").at(fp_op::ADD, None).to_string(), "error in 'fp.add': bad");
        assert_eq!(InterpError::new("bad").to_string(), "error: bad");
        // The innermost op wins.
        let inner = InterpError::new("x").at(fp_op::ADD, None).at("func.call", None);
        assert_eq!(inner.op.as_deref(), Some(fp_op::ADD));
    }
}
