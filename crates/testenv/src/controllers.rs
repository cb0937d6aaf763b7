//! Kubernetes' built-in controllers for tests: [`TestEnv::start_controllers`] runs kore's
//! controller manager against the server, so that with [`TestEnv::start_simulation`] a
//! Deployment gets its ReplicaSet, its pods run and its status reports them available —
//! nothing written by the test.

use kore_controller_manager::Options;

use crate::TestEnv;

/// Running controllers; they stop when this is dropped (or, waiting for them, at
/// [`Controllers::stop`](kore_controller_manager::Running::stop)).
pub type Controllers = kore_controller_manager::Running;

impl TestEnv {
    /// Runs every controller of kore's controller manager as the administrator, without
    /// leader election.
    ///
    /// # Errors
    /// Never with the default controller list; kept for a list from a test.
    pub fn start_controllers(&self) -> anyhow::Result<Controllers> {
        self.start_controllers_with(Options::default())
    }

    /// [`start_controllers`](Self::start_controllers) with `options` (which controllers run);
    /// leader election stays off.
    ///
    /// # Errors
    /// When `options` names an unknown controller.
    pub fn start_controllers_with(&self, options: Options) -> anyhow::Result<Controllers> {
        Ok(kore_controller_manager::spawn(self.client(), options)?)
    }
}
