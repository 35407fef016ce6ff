//! The one boundary where text from the engine enters odek: every
//! [`DockerApi`] a [`crate::Client`] uses is wrapped in [`Foreign`], which
//! passes each call through and makes what odek will show of its answer
//! safe with [`crate::text::foreign`] — the daemon's and the registry's
//! error messages, the lines a pull or a build streams (what a
//! `Dockerfile.odek` `RUN` step prints), create's warnings and a stopped
//! container's `State.Error`. Each becomes one line with every control,
//! escape and bidirectional character escaped, so none can clear the
//! screen, set the title, write the clipboard (OSC 52) or start a line that
//! reads as odek's own. Streamed lines are labelled `build | …` and
//! `pull | …` for the same reason.
//!
//! Data odek compares or verifies (names, labels, IDs, the process list)
//! passes unchanged: it is sanitised where it is shown
//! ([`crate::text::sanitize_name`], [`crate::text::shown`]). A
//! command's own output ([`OutputSink`]) passes through as the command
//! wrote it.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    ContainerInfo, ContainerSpec, ContainerSummary, Created, DockerApi, Endpoint, EngineError,
    EngineInfo, EngineSecurity, ExecExit, ExecSpec, ExitWait, ImageInfo, NetworkFilter,
    NetworkInfo, NetworkSpec, OutputSink, PathStat, ProgressSink, StdinHold,
};
use crate::text::foreign;

/// A [`DockerApi`] whose answers carry no raw foreign text (module doc).
pub(crate) struct Foreign(pub(crate) Arc<dyn DockerApi>);

impl EngineError {
    /// This error with its message made one safe line
    /// ([`crate::text::foreign`]).
    pub(crate) fn made_safe(mut self) -> EngineError {
        if let std::borrow::Cow::Owned(m) = foreign(&self.message) {
            self.message = m;
        }
        self
    }
}

/// `r` with its error made safe.
fn safe<T>(r: Result<T, EngineError>) -> Result<T, EngineError> {
    r.map_err(EngineError::made_safe)
}

#[async_trait]
impl DockerApi for Foreign {
    fn endpoint(&self) -> &Endpoint {
        self.0.endpoint()
    }

    fn no_supervisor(&self) -> Option<&'static str> {
        self.0.no_supervisor()
    }

    async fn version(&self) -> Result<EngineInfo, EngineError> {
        safe(self.0.version().await)
    }

    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError> {
        safe(self.0.list_networks(filter).await)
    }

    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError> {
        safe(self.0.inspect_network(id).await)
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        safe(self.0.inspect_image(reference).await)
    }

    async fn registry_digest(&self, reference: &str) -> Result<Option<String>, EngineError> {
        safe(self.0.registry_digest(reference).await)
    }

    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError> {
        let labelled = |line: &str| progress(&format!("pull | {}", foreign(line)));
        safe(self.0.pull_image(reference, &labelled).await)
    }

    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError> {
        let labelled = |line: &str| progress(&format!("build | {}", foreign(line)));
        safe(
            self.0
                .build_image(context_tar, dockerfile, tag, labels, &labelled)
                .await,
        )
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError> {
        safe(self.0.create_container(spec).await).map(|mut c| {
            for w in &mut c.warnings {
                *w = foreign(w).into_owned();
            }
            c
        })
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        safe(self.0.start_container(id).await)
    }

    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError> {
        safe(
            self.0
                .connect_network(network_id, container_id, aliases)
                .await,
        )
    }

    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError> {
        safe(self.0.disconnect_network(network_id, container_id).await)
    }

    async fn create_network(&self, spec: &NetworkSpec) -> Result<String, EngineError> {
        safe(self.0.create_network(spec).await)
    }

    async fn remove_network(&self, id: &str) -> Result<bool, EngineError> {
        safe(self.0.remove_network(id).await)
    }

    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<ContainerSummary>, EngineError> {
        safe(self.0.list_network_members(names, all).await)
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError> {
        safe(self.0.inspect_container(id).await).map(|info| {
            info.map(|mut i| {
                if let Some((_, error)) = &mut i.exit {
                    *error = foreign(error).into_owned();
                }
                i
            })
        })
    }

    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError> {
        safe(self.0.container_processes(id).await)
    }

    async fn remove_container(&self, id: &str) -> Result<bool, EngineError> {
        safe(self.0.remove_container(id).await)
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        safe(self.0.list_containers(label).await)
    }

    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError> {
        safe(self.0.exec(container_id, spec, output).await)
    }

    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError> {
        safe(self.0.attach_stdin(id).await)
    }

    async fn attach_session(&self, id: &str) -> Result<super::Link, EngineError> {
        // The stream is the supervisor's protocol, checked frame by frame.
        safe(self.0.attach_session(id).await)
    }

    async fn exec_session(&self, id: &str, spec: &ExecSpec) -> Result<super::Link, EngineError> {
        safe(self.0.exec_session(id, spec).await)
    }

    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError> {
        // The wait's own answer is made safe in ExitWait::code.
        safe(self.0.wait_removed(id).await)
    }

    async fn security(&self) -> Result<EngineSecurity, EngineError> {
        safe(self.0.security().await)
    }

    // The log is the egress proxy's text: only its lines odek parses
    // (policy::ready_hash, policy::denied_in_log) are used, never echoed.
    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError> {
        safe(self.0.container_logs(id, max).await)
    }

    // A symlink's target is the image's text: shown only quoted
    // (crate::text::quote) where a refusal names it.
    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError> {
        safe(self.0.stat_path(id, path).await)
    }

    // The content is data odek merges (the image's /etc/passwd), never shown.
    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        safe(self.0.read_file(id, path, max).await)
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError> {
        safe(self.0.upload_archive(id, path, archive).await)
    }

    // The archive is the sandbox's workspace, written back by the filter
    // of `workspace_copy::unpack`, never shown.
    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        safe(self.0.download_archive(id, path, max).await)
    }
}
