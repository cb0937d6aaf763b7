//! The Deployment controller.

/// The controller's name.
pub const NAME: &str = "deployment-controller";
