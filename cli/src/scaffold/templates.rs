//! The template files, compiled into the binary.

/// `Cargo.toml` of a new project.
pub(crate) const CARGO_TOML: &str = include_str!("../../templates/project/Cargo.toml.tmpl");
/// `src/lib.rs`.
pub(crate) const LIB_RS: &str = include_str!("../../templates/project/lib.rs.tmpl");
/// `src/main.rs`.
pub(crate) const MAIN_RS: &str = include_str!("../../templates/project/main.rs.tmpl");
/// `src/manifests.rs`.
pub(crate) const MANIFESTS_RS: &str = include_str!("../../templates/project/manifests.rs.tmpl");
/// `tests/operator.rs`.
pub(crate) const TEST_OPERATOR_RS: &str =
    include_str!("../../templates/project/test_operator.rs.tmpl");
/// `README.md`.
pub(crate) const README_MD: &str = include_str!("../../templates/project/README.md.tmpl");
/// `Dockerfile`.
pub(crate) const DOCKERFILE: &str = include_str!("../../templates/project/Dockerfile.tmpl");
/// `.dockerignore`.
pub(crate) const DOCKERIGNORE: &str = include_str!("../../templates/project/dockerignore.tmpl");
/// `.gitignore`.
pub(crate) const GITIGNORE: &str = include_str!("../../templates/project/gitignore.tmpl");
/// `rustfmt.toml`.
pub(crate) const RUSTFMT_TOML: &str = include_str!("../../templates/project/rustfmt.toml.tmpl");
/// `clippy.toml`.
pub(crate) const CLIPPY_TOML: &str = include_str!("../../templates/project/clippy.toml.tmpl");
/// `ci.sh`.
pub(crate) const CI_SH: &str = include_str!("../../templates/project/ci.sh.tmpl");
/// `src/api/<kind>/<version>.rs`.
pub(crate) const TYPE_RS: &str = include_str!("../../templates/api/type.rs.tmpl");
/// `src/controllers/<kind>.rs`.
pub(crate) const CONTROLLER_RS: &str = include_str!("../../templates/api/controller.rs.tmpl");
/// `tests/<kind>_controller.rs`.
pub(crate) const TEST_RS: &str = include_str!("../../templates/api/test.rs.tmpl");
