//! Kubernetes' built-in controllers for tests: [`TestEnv::start_controllers`] runs kore's
//! controller manager (ReplicaSet, Deployment, Job) against the server, so that with
//! [`TestEnv::start_simulation`] a Deployment gets its ReplicaSet, its pods run and its status
//! reports them available — nothing written by the test.

use kore_controller_manager::{ControllerManager, Options};
use kore_runtime::Manager;
use kore_runtime::manager::ShutdownHandle;
use kore_runtime::metrics::Metrics;

use crate::TestEnv;

/// Running controllers; they stop when this is dropped (or, waiting for them, at
/// [`Controllers::stop`]).
#[derive(Debug)]
pub struct Controllers {
    stop: ShutdownHandle,
    task: Option<tokio::task::JoinHandle<Result<(), kore_runtime::manager::Error>>>,
}

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
        let cm = ControllerManager::new(options.leader_elect(false))?;
        let mut manager = Manager::builder(self.client())
            .handle_signals(false)
            .build();
        let metrics = Metrics::new();
        metrics.register(manager.registry_mut());
        cm.register(&mut manager, &metrics);
        let stop = manager.shutdown_handle();
        let task = tokio::spawn(manager.run());
        Ok(Controllers {
            stop,
            task: Some(task),
        })
    }
}

impl Controllers {
    /// Stops the controllers and waits until they have.
    pub async fn stop(mut self) {
        self.stop.shutdown();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for Controllers {
    fn drop(&mut self) {
        self.stop.shutdown();
    }
}
