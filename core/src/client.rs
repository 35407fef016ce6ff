//! The odek client: one Docker engine (or the reason there is none) and its
//! construction. Each verb is an `impl` block beside its work: resolve
//! (resolve.rs), launch and destroy (launch.rs), describe (describe.rs),
//! exec (exec/run.rs), attach and list (inventory.rs), view (view.rs), approve
//! (approve.rs).

use std::sync::Arc;

use crate::config::advice::Surface;
use crate::engine::{BollardEngine, DockerApi, Endpoint, EndpointEnv, EndpointError, Foreign};
use crate::error::{Error, Result};
use crate::sandbox::Sandbox;

/// The odek client: one Docker engine (or the reason there is none) and the
/// verbs resolve → launch → describe, exec, destroy.
#[derive(Clone)]
pub struct Client {
    /// Always wrapped in [`Foreign`]: the one boundary where the engine's
    /// text (messages, build and pull output) is made safe to show.
    pub(crate) engine: std::result::Result<Arc<dyn DockerApi>, EndpointError>,
    surface: Surface,
    /// Relay sessions with the supervisors of sandboxes this process does
    /// not own, by container ID, kept for the client's life.
    pub(crate) relays: crate::supervisor::Relays,
    /// Planned networks recreated since launch whose new IDs this process
    /// accepted ([`Client::relink`]).
    pub(crate) links: crate::network::AcceptedNetworks,
    /// Link-network endpoints whose aliases this process has checked
    /// ([`Client::relink`]'s member check, SPEC §4.4).
    pub(crate) checked: crate::network::Checked,
}

impl Client {
    /// A client for the daemon chosen by SPEC §6.2 from the process
    /// environment. Never fails: an unusable endpoint is reported by
    /// [`Client::resolve`], where the sandbox mode decides what it means.
    pub fn from_env() -> Client {
        Client {
            engine: Endpoint::resolve(&EndpointEnv::from_process()).map(|ep| {
                Arc::new(Foreign(Arc::new(BollardEngine::new(ep)))) as Arc<dyn DockerApi>
            }),
            surface: Surface::Cli,
            relays: Default::default(),
            links: Default::default(),
            checked: Default::default(),
        }
    }

    /// A client over a given engine (tests, fault injection), wrapped like
    /// every engine in the boundary that makes its text safe to show.
    pub fn with_engine(engine: Arc<dyn DockerApi>) -> Client {
        Client {
            engine: Ok(Arc::new(Foreign(engine))),
            surface: Surface::Cli,
            relays: Default::default(),
            links: Default::default(),
            checked: Default::default(),
        }
    }

    /// This client, its messages' advice worded for `surface` (default
    /// [`Surface::Cli`]; libodek's clients are [`Surface::Library`]).
    pub fn with_surface(mut self, surface: Surface) -> Client {
        self.surface = surface;
        self
    }

    /// Who reads this client's messages.
    pub fn surface(&self) -> Surface {
        self.surface
    }

    /// An error's message with its advice in this client's terms
    /// ([`Error::render`]): `--sandbox-image` for the CLI, the
    /// `sandbox_image` setting for a binding.
    pub fn message(&self, e: &Error) -> String {
        e.render(self.surface)
    }

    /// The engine, or the endpoint error as an [`Error`].
    pub fn engine(&self) -> Result<&Arc<dyn DockerApi>> {
        self.engine.as_ref().map_err(|e| Error::Endpoint(e.clone()))
    }

    /// The endpoint for messages (`unix:///…`, or what was tried).
    pub fn endpoint_display(&self) -> String {
        match &self.engine {
            Ok(e) => e.endpoint().to_string(),
            Err(e) => e.to_string(),
        }
    }
}

impl Client {
    /// True when `sandbox`'s container is known to be gone: removed
    /// (`docker rm -f`), stopped, or lost with a daemon restart. An owned
    /// sandbox whose supervisor session is alive is not gone (no engine
    /// call); otherwise the container is inspected: absent or not running
    /// is gone. The host is never gone, and an engine that does not answer
    /// says nothing (false): the caller's next call reports the engine's
    /// own error. For `odek mcp`'s recovery of the conversation's sandbox
    /// (docs/MCP.md, "When the sandbox vanished").
    pub async fn is_gone(&self, sandbox: &Sandbox) -> bool {
        let Some(id) = &sandbox.container_id else {
            return false;
        };
        if sandbox.owner.session().is_some() {
            return false;
        }
        let Ok(engine) = self.engine() else {
            return false;
        };
        match engine.inspect_container(id).await {
            Ok(None) => true,
            Ok(Some(c)) => !c.running,
            Err(_) => false,
        }
    }
}

impl Client {
    /// What the daemon and the registry say now of `plan`'s image, without
    /// pulling or building it ([`crate::image::ImageCheck`]). A host plan's
    /// image is checked as any other (the caller decides whether it
    /// matters). An endpoint that cannot be used is
    /// [`crate::image::ImageCheck::Unknown`].
    pub async fn image_check(&self, plan: &crate::plan::Plan) -> crate::image::ImageCheck {
        match self.engine() {
            Ok(engine) => crate::image::check(engine.as_ref(), &plan.image).await,
            Err(e) => crate::image::ImageCheck::Unknown {
                reference: plan.image.reference.create_ref(),
                why: crate::text::foreign(&e.to_string()).into_owned(),
            },
        }
    }
}
