//! The Job controller.

/// The controller's name.
pub const NAME: &str = "job-controller";
