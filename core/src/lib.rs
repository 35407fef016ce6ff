//! odek core: Docker sandboxes for AI coding agents that reach the services a
//! developer runs with Docker Compose by service name, with every setup
//! decision failing closed and visible.
//!
//! The verbs (SPEC §1): [`Client::resolve`] merges and validates configuration
//! and resolves networks and image into a [`Plan`]; [`Client::launch`] creates,
//! attaches and verifies a container (or refuses, leaving nothing behind);
//! [`Client::describe`] tells the agent what it runs in; [`Client::exec`] runs
//! commands; [`Client::destroy`] removes the container.
//!
//! Docker is reached only through [`engine::DockerApi`] (SPEC §2).

pub mod account;

pub mod api;
pub mod approval;
pub mod approve;
pub mod audit;
pub mod cancel;
mod claims;
pub(crate) mod client;
pub mod config;
pub mod describe;
pub mod dns;
pub mod egress;
pub mod engine;
pub mod error;
pub mod exec;
pub(crate) mod failure;
pub mod files;
pub(crate) mod hardening;
pub mod host_files;
pub mod image;
pub(crate) mod image_ref;
pub mod image_tools;
pub mod inventory;
pub mod labels;
pub mod launch;
pub mod link;
pub(crate) mod mounts;
pub mod narrow;
pub mod network;
pub(crate) mod ownership;
pub mod plan;
pub mod pool;
pub(crate) mod resolve;
pub(crate) mod safe_open;
pub mod sandbox;
pub mod secret;
pub mod signals;
pub mod stderr;
pub mod supervisor;
pub mod text;
pub mod verify;
pub mod view;
pub(crate) mod warning;
pub mod workdir;
pub mod workspace_copy;

pub use cancel::CancellationToken;
pub use client::Client;
/// Where a fix an error names is worded per surface (`config::advice`).
pub use config::advice;
pub use error::{Error, Result};
pub use exec::{Command, ExecIo, ExecOptions, ExecOutcome, ExecRequest, WinSize};
pub use failure::{ErrorClass, FailureClass, Step};
pub use launch::LaunchOptions;
pub use plan::{Isolation, Plan};
pub use resolve::{Reporter, Silent};
pub use sandbox::Sandbox;
pub use warning::{Warning, WarningKind};

/// The odek release (crate version).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
