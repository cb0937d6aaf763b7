//! kore-testenv: a real kore-apiserver for tests, started in milliseconds.
//!
//! [`TestEnv::start`] runs the server in-process and returns a `kube::Client` wired straight to
//! its router (no socket, no TLS), so every test can have its own server. When a test needs
//! what users meet — a TCP socket, TLS, a kubeconfig file for kubectl or another process — ask
//! for it with [`TestEnv::builder`] and [`Builder::tcp`].
//!
//! [`TestEnv::client`] is the administrator (`system:masters`, never checked by RBAC). To prove
//! that an operator's Roles and bindings suffice, run it with
//! [`TestEnv::service_account_client`] instead: every request is then authorized by RBAC
//! exactly as the ServiceAccount's would be on a cluster, 403s included;
//! [`operator::install`] sets an operator up that way from its own description, and
//! [`operator::assert_least_privilege`] then checks that its RBAC grants nothing it did not
//! use.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! let env = kore_testenv::TestEnv::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("demo".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! # Ok(()) }
//! ```

mod controllers;
pub mod kubectl;
mod nodes;
pub mod operator;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use kore_apiserver::server::{ApiServer, Config, Endpoint};

pub use controllers::Controllers;
pub use kore_apiserver;
pub use kore_nodes::{NodeConfig, NodeSet};

/// Options of a [`TestEnv`].
#[derive(Debug, Default)]
#[must_use]
pub struct Builder {
    config: Config,
    tcp: bool,
    insecure: bool,
    data_dir: Option<PathBuf>,
    port: u16,
}

impl Builder {
    /// Also serve on a TCP socket on 127.0.0.1 (HTTPS unless [`Builder::insecure_http`]) and
    /// write a kubeconfig file for it.
    pub fn tcp(mut self) -> Self {
        self.tcp = true;
        self
    }

    /// Listens on this port of 127.0.0.1 instead of a free one (with [`Builder::tcp`]), so a
    /// test can restart a server where its clients expect it.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// No `kube-root-ca.crt` ConfigMap in every namespace (as under envtest, whose bare
    /// kube-apiserver runs no root CA publisher): for tests that count every ConfigMap.
    pub fn without_root_ca(mut self) -> Self {
        self.config = self.config.publish_root_ca(false);
        self
    }

    /// Serve the socket over plain HTTP (anonymous requests act as the administrator).
    pub fn insecure_http(mut self) -> Self {
        self.insecure = true;
        self
    }

    /// Keep state durably in `dir` (to test restarts).
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Sets how many changes the watch history keeps (small values make 410s easy to reach).
    pub fn history_capacity(mut self, n: usize) -> Self {
        self.config = self.config.history_capacity(n);
        self
    }

    /// Sets how many bytes of changes the watch history keeps.
    pub fn history_bytes(mut self, n: usize) -> Self {
        self.config = self.config.history_bytes(n);
        self
    }

    /// Sets how many watches one user may have open at once.
    pub fn max_watches_per_user(mut self, n: usize) -> Self {
        self.config = self.config.max_watches_per_user(n);
        self
    }

    /// Sets the bookmark interval of quiet watches.
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.config = self.config.bookmark_interval(d);
        self
    }

    /// Starts the server.
    pub async fn start(self) -> anyhow::Result<TestEnv> {
        let mut config = self.config.record_authorizations(true);
        if let Some(dir) = &self.data_dir {
            config = config.data_dir(dir);
        }
        let server = ApiServer::start(config)
            .await
            .context("starting kore-apiserver")?;
        let client = kube::Client::new(server.router(), "default");
        let (endpoint, kubeconfig, dir) = if self.tcp {
            let endpoint = server
                .listen(([127, 0, 0, 1], self.port).into(), self.insecure)
                .await
                .context("listening on 127.0.0.1")?;
            let dir = tempfile::tempdir().context("creating a temporary directory")?;
            let path = dir.path().join("kubeconfig");
            ApiServer::write_kubeconfig(&endpoint, &path).context("writing the kubeconfig")?;
            (Some(endpoint), Some(path), Some(dir))
        } else {
            (None, None, None)
        };
        Ok(TestEnv {
            server: Some(server),
            client,
            endpoint,
            kubeconfig,
            _dir: dir,
        })
    }
}

/// A running kore-apiserver and a client for it. Stops when dropped.
pub struct TestEnv {
    server: Option<ApiServer>,
    client: kube::Client,
    endpoint: Option<Endpoint>,
    kubeconfig: Option<PathBuf>,
    _dir: Option<tempfile::TempDir>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl TestEnv {
    /// Starts an in-process server with in-memory storage.
    pub async fn start() -> anyhow::Result<TestEnv> {
        Self::builder().start().await
    }

    /// Options for the server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// A client talking to the server in-process, as the administrator; its default namespace
    /// is `default`.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// The server.
    pub fn server(&self) -> &ApiServer {
        match &self.server {
            Some(s) => s,
            None => unreachable!("the server is only taken when the environment is stopped"),
        }
    }

    /// The socket endpoint, if one was asked for.
    pub fn endpoint(&self) -> Option<&Endpoint> {
        self.endpoint.as_ref()
    }

    /// The kubeconfig file of the socket endpoint, if one was asked for.
    pub fn kubeconfig_path(&self) -> Option<&Path> {
        self.kubeconfig.as_deref()
    }

    /// A client that connects over the socket through the kubeconfig, as users do.
    pub async fn socket_client(&self) -> anyhow::Result<kube::Client> {
        let path = self
            .kubeconfig
            .as_ref()
            .context("no socket: build the TestEnv with .tcp()")?;
        let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        Ok(kube::Client::try_from(config)?)
    }

    /// Mints a token for ServiceAccount `namespace`/`name` through the TokenRequest API (one
    /// hour, the server's default audience), as the administrator. The account must exist.
    pub async fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<String> {
        use k8s_openapi::api::authentication::v1::TokenRequest;
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(self.client(), namespace);
        let request = TokenRequest::default();
        let answer = accounts
            .create_token_request(name, &kube::api::PostParams::default(), &request)
            .await
            .with_context(|| format!("requesting a token for serviceaccount {namespace}/{name}"))?;
        answer
            .status
            .map(|s| s.token)
            .filter(|t| !t.is_empty())
            .context("the TokenRequest answer holds no token")
    }

    /// A client talking to the server in-process that presents `token` as its bearer token;
    /// its default namespace is `namespace`. A token the server does not accept gets 401.
    pub fn client_with_token(&self, token: &str, namespace: &str) -> anyhow::Result<kube::Client> {
        let service = ApiServer::router_with_token(self.server().router(), token)
            .context("the token is not a valid header value")?;
        Ok(kube::Client::new(service, namespace))
    }

    /// A client acting as ServiceAccount `namespace`/`name` (in-process, with a token minted
    /// through TokenRequest): every request it makes is authorized by RBAC, as the account's
    /// would be on a cluster. Its default namespace is `namespace`.
    ///
    /// ```no_run
    /// # async fn demo() -> anyhow::Result<()> {
    /// use k8s_openapi::api::core::v1::ConfigMap;
    /// let env = kore_testenv::TestEnv::start().await?;
    /// // ... create the ServiceAccount `op` in `demo` and its RoleBindings ...
    /// let op = env.service_account_client("demo", "op").await?;
    /// let cms: kube::Api<ConfigMap> = kube::Api::default_namespaced(op);
    /// cms.list(&Default::default()).await?; // 403 unless a binding allows it
    /// # Ok(()) }
    /// ```
    pub async fn service_account_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<kube::Client> {
        let token = self.service_account_token(namespace, name).await?;
        self.client_with_token(&token, namespace)
    }

    /// Like [`TestEnv::service_account_client`], over the TCP socket (needs [`Builder::tcp`]).
    pub async fn service_account_socket_client(
        &self,
        namespace: &str,
        name: &str,
    ) -> anyhow::Result<kube::Client> {
        let token = self.service_account_token(namespace, name).await?;
        self.socket_client_with_token(&token, namespace).await
    }

    /// A client over the TCP socket presenting `token` instead of the admin token (needs
    /// [`Builder::tcp`]); its default namespace is `namespace`.
    pub async fn socket_client_with_token(
        &self,
        token: &str,
        namespace: &str,
    ) -> anyhow::Result<kube::Client> {
        let path = self
            .kubeconfig
            .as_ref()
            .context("no socket: build the TestEnv with .tcp()")?;
        let kubeconfig = kube::config::Kubeconfig::read_from(path)?;
        let mut raw = serde_json::to_value(&kubeconfig)?;
        if let Some(users) = raw.get_mut("users").and_then(|u| u.as_array_mut()) {
            for user in users {
                user["user"] = serde_json::json!({ "token": token });
            }
        }
        let kubeconfig: kube::config::Kubeconfig = serde_json::from_value(raw)?;
        let mut config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await?;
        config.default_namespace = namespace.to_string();
        Ok(kube::Client::try_from(config)?)
    }

    /// Stops the server and waits for its tasks.
    pub async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        if let Some(server) = &self.server {
            server.stopped().cancel();
        }
    }
}

/// Polls `check` every 10 ms until it returns `Some`, or fails after `timeout`.
pub async fn wait_for<T, F, Fut>(timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("condition not met within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
