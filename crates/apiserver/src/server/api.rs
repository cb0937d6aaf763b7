//! [`ApiServer`]: storage, registry, controllers and the HTTP router, started together.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::kubeconfig::{Credential, kubeconfig_yaml, kubeconfig_yaml_for, write_kubeconfig};
use crate::auth::rbac::RbacIndex;
use crate::auth::sa_token::TokenSigner;
use crate::auth::tls::{CertificateAuthority, KeyedCertificate, TlsMaterial};
use crate::auth::token::AdminToken;
use crate::auth::x509::ClientCertAuthenticator;
use crate::http::{self, App};
use crate::registry::Registry;
use crate::registry::admission::{
    Admission, escalation, limit_ranger, priority, service_account, storage_class, tolerations,
};
use crate::storage::{
    Backend, BackendError, MemoryBackend, Store, StoreConfig, WalBackend, WalConfig,
};

/// [`ApiServer::router_with_token`]: the router with a bearer token on every request.
pub type RouterWithToken = tower_http::set_header::SetRequestHeader<Router, ::http::HeaderValue>;

/// The user of [`ApiServer::client_certificate_kubeconfig`]'s certificate, as kubeadm names its
/// administrator.
pub const ADMIN_CERTIFICATE_USER: &str = "kubernetes-admin";

/// Settings of an [`ApiServer`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Where durable state, TLS material and the admin token live; `None` keeps everything in
    /// memory.
    pub data_dir: Option<PathBuf>,
    /// How the write-ahead log in `data_dir` is opened: whether a damaged or missing log is
    /// repaired (accepting the loss) instead of refused, and when it is compacted.
    pub wal: WalConfig,
    /// How many recent changes the watch history keeps.
    pub history_capacity: usize,
    /// How many bytes of recent changes the watch history keeps.
    pub history_bytes: usize,
    /// How many watches one user may have open at once (429 beyond).
    pub max_watches_per_user: usize,
    /// How often a quiet watch that allows bookmarks gets one.
    pub bookmark_interval: Duration,
    /// How long in-flight requests may run after shutdown starts.
    pub shutdown_grace: Duration,
    /// Whether to tally RBAC decisions per user and permission
    /// ([`ApiServer::authorizations`]).
    pub record_authorizations: bool,
    /// Whether the root CA publisher runs (`kube-root-ca.crt` in every namespace; on by
    /// default). Kubernetes runs it in kube-controller-manager, so a bare kube-apiserver, as
    /// envtest starts it, has none; tests that count every ConfigMap turn it off.
    pub publish_root_ca: bool,
    /// A PEM bundle of further CAs whose client certificates authenticate users (as
    /// kube-apiserver's `--client-ca-file`); kore's own CA is always trusted.
    pub client_ca_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            data_dir: None,
            wal: WalConfig::default(),
            history_capacity: StoreConfig::default().history_capacity,
            history_bytes: StoreConfig::default().history_bytes,
            max_watches_per_user: 2_000,
            bookmark_interval: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(5),
            record_authorizations: false,
            publish_root_ca: true,
            client_ca_file: None,
        }
    }
}

impl Config {
    /// Keeps state durably in `dir`.
    #[must_use]
    pub fn data_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(dir.into());
        self
    }

    /// Sets how the write-ahead log is opened ([`WalConfig::repair`] starts on a damaged log,
    /// accepting the loss).
    #[must_use]
    pub fn wal(mut self, wal: WalConfig) -> Self {
        self.wal = wal;
        self
    }

    /// Sets the size of the watch history, in events.
    #[must_use]
    pub fn history_capacity(mut self, n: usize) -> Self {
        self.history_capacity = n;
        self
    }

    /// Sets how many watches one user may have open at once.
    #[must_use]
    pub fn max_watches_per_user(mut self, n: usize) -> Self {
        self.max_watches_per_user = n;
        self
    }

    /// Sets the size of the watch history, in bytes.
    #[must_use]
    pub fn history_bytes(mut self, n: usize) -> Self {
        self.history_bytes = n;
        self
    }

    /// Runs the root CA publisher or not (see [`Config::publish_root_ca`]).
    #[must_use]
    pub fn publish_root_ca(mut self, on: bool) -> Self {
        self.publish_root_ca = on;
        self
    }

    /// Also trusts the client certificates of the CAs in the PEM file `path` (see
    /// [`Config::client_ca_file`]).
    #[must_use]
    pub fn client_ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_ca_file = Some(path.into());
        self
    }

    /// Tallies every RBAC decision per user and permission, for
    /// [`ApiServer::authorizations`] (tests use it to prove a ServiceAccount's least
    /// privilege).
    #[must_use]
    pub fn record_authorizations(mut self, on: bool) -> Self {
        self.record_authorizations = on;
        self
    }

    /// Sets the bookmark interval of quiet watches.
    #[must_use]
    pub fn bookmark_interval(mut self, d: Duration) -> Self {
        self.bookmark_interval = d;
        self
    }
}

/// Why the server could not start or serve.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// Opening storage failed; check the data directory.
    #[error("opening storage failed")]
    Storage(#[source] BackendError),
    /// Creating the built-in namespaces failed.
    #[error("creating the initial namespaces failed: {0}")]
    Seed(String),
    /// TLS material or the admin token could not be loaded or created.
    #[error("preparing credentials failed: {0}")]
    Credentials(String),
    /// Binding or serving the socket failed.
    #[error("serving failed")]
    Io(#[from] std::io::Error),
}

/// How a server is exposed on a socket.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The address it listens on.
    pub addr: SocketAddr,
    /// `https://…` or `http://…`.
    pub url: String,
    /// The kubeconfig clients use.
    pub kubeconfig: String,
}

/// A running API server.
///
/// Serve it in-process through [`ApiServer::router`] (a tower `Service`, which
/// `kube::Client::new` accepts) or on a socket with [`ApiServer::listen`]. Dropping it does not
/// stop its tasks; call [`ApiServer::shutdown`].
pub struct ApiServer {
    app: Arc<App>,
    router: Router,
    tasks: TaskTracker,
    stop: CancellationToken,
    config: Config,
    /// The CA (and, for a server without a data directory, the only copy of it): published in
    /// `kube-root-ca.crt` at start, and signing the serving certificate of [`Self::listen`].
    tls: TlsMaterial,
    /// Where the `default/kubernetes` endpoints point: the address of the last
    /// [`Self::listen`].
    serving: tokio::sync::watch::Sender<SocketAddr>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ApiServer {
    /// Opens storage, creates what every server has (namespaces, default policy, system
    /// PriorityClasses, the `kubernetes` Service, `kube-root-ca.crt`; see `server/bootstrap.rs`),
    /// starts the in-server controllers and marks the server ready.
    pub async fn start(config: Config) -> Result<ApiServer, ServerError> {
        let backend: Arc<dyn Backend> = match &config.data_dir {
            Some(dir) => {
                Arc::new(WalBackend::open_with(dir, &config.wal).map_err(ServerError::Storage)?)
            }
            None => Arc::new(MemoryBackend),
        };
        Self::start_with_backend(config, backend).await
    }

    /// Like [`ApiServer::start`], over a given backend (tests inject faults this way).
    pub async fn start_with_backend(
        config: Config,
        backend: Arc<dyn Backend>,
    ) -> Result<ApiServer, ServerError> {
        let store = Store::open(
            backend,
            StoreConfig::default()
                .history_capacity(config.history_capacity)
                .history_bytes(config.history_bytes),
        )
        .map_err(ServerError::Storage)?;
        let registry = Arc::new(Registry::new(store));
        let tls = TlsMaterial::load_or_generate(config.data_dir.as_deref(), &[])
            .map_err(|e| ServerError::Credentials(e.to_string()))?;
        let ca_pem: Arc<str> = Arc::from(tls.ca_pem());
        let mut client_roots = vec![tls.ca_der().clone()];
        if let Some(path) = &config.client_ca_file {
            client_roots.extend(
                crate::auth::x509::read_ca_bundle(path)
                    .map_err(|e| ServerError::Credentials(e.to_string()))?,
            );
        }
        let client_certificates = Arc::new(
            ClientCertAuthenticator::new(&client_roots)
                .map_err(|e| ServerError::Credentials(e.to_string()))?,
        );
        let unbound = crate::controllers::kubernetes_service::UNBOUND;
        super::bootstrap::bootstrap(
            &registry,
            config.publish_root_ca.then_some(&ca_pem),
            unbound,
        )
        .await?;
        let (serving, serving_rx) = tokio::sync::watch::channel(unbound);
        let admin_token = match &config.data_dir {
            Some(dir) => AdminToken::load_or_generate(Some(dir))
                .map_err(|e| ServerError::Credentials(e.to_string()))?,
            None => AdminToken::generate(),
        };
        let signer = TokenSigner::load_or_generate(config.data_dir.as_deref())
            .map_err(|e| ServerError::Credentials(e.to_string()))?;
        let rbac = Arc::new(RbacIndex::new(registry.store().clone()));
        registry.set_admission(admission_stages(&registry, &rbac));
        let stop = CancellationToken::new();
        let app = Arc::new(App {
            registry: registry.clone(),
            admin_token: Some(admin_token),
            shutdown: stop.clone(),
            ready: Arc::new(AtomicBool::new(false)),
            bookmark_interval: config.bookmark_interval,
            signer: Arc::new(signer),
            rbac,
            authorizations: config
                .record_authorizations
                .then(|| Arc::new(crate::auth::audit::AuthorizationLog::default())),
            watches: Arc::new(crate::http::watch::WatchSlots::new(
                config.max_watches_per_user,
            )),
            metrics: Arc::default(),
            client_certificates: Some(client_certificates),
        });
        // Serve the stored CRDs before the first request.
        if let Err(e) = crate::controllers::crd::sync(&registry).await {
            tracing::warn!(error = %e, "serving the stored CRDs failed");
        }
        // The APIServices of the built-in group versions exist before the first request.
        crate::controllers::apiservices::sync(&registry).await;
        crate::controllers::componentstatuses::ensure(&registry).await;
        // Clients watch from revisions they listed, never from before the server started: a
        // watch from an earlier revision is told it expired, as a Kubernetes API server's
        // watch cache answers (client tests watch from "1" and expect a 410).
        registry.store().start_history_here();
        let tasks = TaskTracker::new();
        tasks.spawn(crate::controllers::apiservices::run(
            registry.clone(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::clusterroles::run(
            registry.clone(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::serviceaccounts::run(
            registry.clone(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::crd::run(
            registry.clone(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::namespace::run(
            registry.clone(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::kubernetes_service::run(
            registry.clone(),
            serving_rx,
            stop.child_token(),
        ));
        if config.publish_root_ca {
            tasks.spawn(crate::controllers::root_ca::run(
                registry.clone(),
                ca_pem,
                stop.child_token(),
            ));
        }
        tasks.spawn(crate::controllers::csr_signing::run(
            registry.clone(),
            tls.authority(),
            stop.child_token(),
        ));
        tasks.spawn(crate::controllers::gc::run(registry, stop.child_token()));
        app.ready.store(true, Ordering::SeqCst);
        Ok(ApiServer {
            router: http::router(app.clone()),
            app,
            tasks,
            stop,
            config,
            tls,
            serving,
        })
    }

    /// The HTTP router: a tower `Service` serving the whole API.
    pub fn router(&self) -> Router {
        self.router.clone()
    }

    /// The router, presenting `token` as every request's bearer token: an in-process
    /// client (`kube::Client::new(service, ns)`) that acts as whoever the token names — a
    /// ServiceAccount, so that RBAC decides each request as it would over a socket.
    ///
    /// # Errors
    /// When `token` cannot be a header value.
    pub fn router_with_token(
        router: Router,
        token: &str,
    ) -> Result<RouterWithToken, ::http::header::InvalidHeaderValue> {
        let value = ::http::HeaderValue::from_str(&format!("Bearer {token}"))?;
        Ok(tower_http::set_header::SetRequestHeader::overriding(
            router,
            ::http::header::AUTHORIZATION,
            value,
        ))
    }

    /// The registry (resources and storage).
    pub fn registry(&self) -> &Arc<Registry> {
        &self.app.registry
    }

    /// The RBAC decisions tallied so far (empty unless
    /// [`Config::record_authorizations`] is on). Members of `system:masters` are never
    /// checked, so never tallied.
    pub fn authorizations(&self) -> Vec<crate::auth::audit::AuthorizationSummary> {
        self.app
            .authorizations
            .as_ref()
            .map(|log| log.summaries())
            .unwrap_or_default()
    }

    /// kore's CA, which signs the serving certificate, client certificates and approved
    /// CertificateSigningRequests.
    pub fn certificate_authority(&self) -> CertificateAuthority {
        self.tls.authority()
    }

    /// A new key and client certificate for user `common_name` in group `organization`
    /// (the CN and O of its subject), signed by kore's CA, valid for `validity`.
    ///
    /// # Errors
    /// Signing failed.
    pub fn issue_client_certificate(
        &self,
        common_name: &str,
        organization: Option<&str>,
        validity: Duration,
    ) -> Result<KeyedCertificate, ServerError> {
        self.tls
            .authority()
            .issue_client(common_name, organization, validity)
            .map_err(|e| ServerError::Credentials(e.to_string()))
    }

    /// A kubeconfig for `endpoint` whose user authenticates by a new client certificate
    /// instead of the admin token: `CN=kubernetes-admin`, `O=system:masters`, valid for a
    /// year, as kubeadm's `admin.conf`. Over plain HTTP it carries no credential.
    ///
    /// # Errors
    /// Signing failed.
    pub fn client_certificate_kubeconfig(
        &self,
        endpoint: &Endpoint,
    ) -> Result<String, ServerError> {
        let issued = self.issue_client_certificate(
            ADMIN_CERTIFICATE_USER,
            Some("system:masters"),
            Duration::from_secs(365 * 24 * 60 * 60),
        )?;
        Ok(kubeconfig_yaml_for(
            &endpoint.url,
            Some(self.tls.ca_pem()),
            Credential::ClientCertificate {
                cert_pem: &issued.cert_pem,
                key_pem: &issued.key_pem,
            },
        ))
    }

    /// The administrator's bearer token.
    pub fn admin_token(&self) -> Option<&str> {
        self.app.admin_token.as_ref().map(AdminToken::as_str)
    }

    /// Binds `addr` and serves until [`ApiServer::shutdown`]: over HTTPS with a certificate
    /// from the data directory (or a fresh one), or over plain HTTP when `insecure` — allowed
    /// only on a loopback address, since anonymous requests act as the administrator there.
    pub async fn listen(&self, addr: SocketAddr, insecure: bool) -> Result<Endpoint, ServerError> {
        if insecure && !addr.ip().is_loopback() {
            return Err(ServerError::Credentials(format!(
                "plain HTTP is only served on a loopback address, not {addr}: clients send no credentials over http"
            )));
        }
        let listener = TcpListener::bind(addr).await?;
        let local = listener.local_addr()?;
        let host = if local.ip().is_unspecified() {
            "127.0.0.1".to_string()
        } else {
            match local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            }
        };
        let (tls, url, kubeconfig) = if insecure {
            let url = format!("http://{host}:{}", local.port());
            let kc = kubeconfig_yaml(&url, None, None);
            (None, url, kc)
        } else {
            let extra = vec![local.ip().to_string()];
            let material = match self.config.data_dir.as_deref() {
                Some(dir) => TlsMaterial::load_or_generate(Some(dir), &extra),
                None => self.tls.reissue(&extra),
            }
            .map_err(|e| ServerError::Credentials(e.to_string()))?;
            let server_config = material
                .server_config_with(
                    self.app
                        .client_certificates
                        .as_ref()
                        .map(|c| c.handshake_verifier()),
                )
                .map_err(|e| ServerError::Credentials(e.to_string()))?;
            let url = format!("https://{host}:{}", local.port());
            let kc = kubeconfig_yaml(&url, Some(material.ca_pem()), self.admin_token());
            (Some(server_config), url, kc)
        };
        self.serving.send_replace(local);
        crate::controllers::kubernetes_service::ensure(&self.app.registry, local).await;
        let router = self.router.clone();
        let stop = self.stop.clone();
        let grace = self.config.shutdown_grace;
        self.tasks.spawn(async move {
            if let Err(e) = crate::server::serve::serve(listener, router, tls, stop, grace).await {
                tracing::error!(error = %e, "serving failed");
            }
        });
        Ok(Endpoint {
            addr: local,
            url,
            kubeconfig,
        })
    }

    /// Writes `endpoint`'s kubeconfig to `path`.
    pub fn write_kubeconfig(endpoint: &Endpoint, path: &Path) -> Result<(), ServerError> {
        write_kubeconfig(path, &endpoint.kubeconfig).map_err(ServerError::Io)
    }

    /// Stops accepting work, ends watches, lets in-flight requests finish within the grace
    /// period, and stops the controllers.
    pub async fn shutdown(self) {
        self.app.ready.store(false, Ordering::SeqCst);
        self.stop.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(self.config.shutdown_grace * 2, self.tasks.wait()).await;
    }

    /// A token cancelled when the server stops.
    pub fn stopped(&self) -> CancellationToken {
        self.stop.clone()
    }
}

/// The admission stages of a server, in the order they run (Kubernetes' order of its default
/// plugins).
fn admission_stages(registry: &Registry, rbac: &Arc<RbacIndex>) -> Admission {
    let store = registry.store();
    let catalog = registry.catalog();
    let prefix = |group: &str, plural: &str| {
        catalog
            .find(group, "v1", plural)
            .map(|res| res.collection_prefix(None))
    };
    let mut stages = Admission::new();
    if let Some(ranges) = prefix("", "limitranges") {
        stages = stages.with_mutating(Arc::new(limit_ranger::LimitRanger::new(
            store.clone(),
            ranges,
        )));
    }
    if let Some(accounts) = prefix("", "serviceaccounts") {
        stages = stages.with_mutating(Arc::new(service_account::ServiceAccount::new(
            store.clone(),
            accounts,
        )));
    }
    if let Some(classes) = prefix("scheduling.k8s.io", "priorityclasses") {
        stages = stages.with_mutating(Arc::new(priority::Priority::new(store.clone(), classes)));
    }
    stages = stages.with_mutating(Arc::new(tolerations::DefaultTolerationSeconds));
    if let Some(classes) = prefix("storage.k8s.io", "storageclasses") {
        stages = stages.with_mutating(Arc::new(storage_class::DefaultStorageClass::new(
            store.clone(),
            classes,
        )));
    }
    stages.with_validating(Arc::new(escalation::EscalationPrevention::new(
        rbac.clone(),
    )))
}
