//! A [`DockerApi`] decorator that records every Engine call odek makes (op,
//! start offset, duration): the profile behind the explanations. Used only
//! in separate profiling passes, never in the measured variants.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use odek_core::engine::{
    BollardEngine, ContainerInfo, ContainerSpec, ContainerSummary, Created, DockerApi, Endpoint,
    EngineError, EngineInfo, EngineSecurity, ExecExit, ExecSpec, ExitWait, ImageInfo,
    NetworkFilter, NetworkInfo, OutputSink, PathStat, ProgressSink, StdinHold,
};

/// One recorded call.
#[derive(Clone, Debug)]
pub struct CallRecord {
    pub op: &'static str,
    pub start: Instant,
    pub took: Duration,
}

pub struct Traced {
    inner: Arc<dyn DockerApi>,
    log: Mutex<Vec<CallRecord>>,
}

impl Traced {
    pub fn new(endpoint: Endpoint) -> Traced {
        Traced {
            inner: Arc::new(BollardEngine::new(endpoint)),
            log: Mutex::new(Vec::new()),
        }
    }

    /// Takes the calls recorded so far.
    pub fn take(&self) -> Vec<CallRecord> {
        std::mem::take(&mut *self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn record(&self, op: &'static str, start: Instant) {
        let took = start.elapsed();
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(CallRecord { op, start, took });
    }
}

/// Calls of one traced operation, summed per op, plus the wall time the
/// calls covered (their union) — the rest of the wall time is odek's own
/// work between calls.
#[derive(Clone, Debug, Default)]
pub struct Breakdown {
    pub per_op_ms: BTreeMap<&'static str, f64>,
    pub per_op_count: BTreeMap<&'static str, usize>,
    pub engine_union_ms: f64,
}

pub fn breakdown(calls: &[CallRecord]) -> Breakdown {
    let mut b = Breakdown::default();
    let mut spans: Vec<(Instant, Instant)> = Vec::new();
    for c in calls {
        *b.per_op_ms.entry(c.op).or_default() += c.took.as_secs_f64() * 1e3;
        *b.per_op_count.entry(c.op).or_default() += 1;
        spans.push((c.start, c.start + c.took));
    }
    spans.sort();
    let mut total = Duration::ZERO;
    let mut cur: Option<(Instant, Instant)> = None;
    for (s, e) in spans {
        cur = match cur {
            Some((cs, ce)) if s <= ce => Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                Some((s, e))
            }
            None => Some((s, e)),
        };
    }
    if let Some((cs, ce)) = cur {
        total += ce - cs;
    }
    b.engine_union_ms = total.as_secs_f64() * 1e3;
    b
}

macro_rules! traced {
    ($self:ident, $op:literal, $call:expr) => {{
        let t = Instant::now();
        let r = $call.await;
        $self.record($op, t);
        r
    }};
}

#[async_trait]
impl DockerApi for Traced {
    fn endpoint(&self) -> &Endpoint {
        self.inner.endpoint()
    }

    async fn version(&self) -> Result<EngineInfo, EngineError> {
        traced!(self, "version", self.inner.version())
    }

    async fn list_networks(&self, filter: &NetworkFilter) -> Result<Vec<NetworkInfo>, EngineError> {
        traced!(self, "list_networks", self.inner.list_networks(filter))
    }

    async fn inspect_network(&self, id: &str) -> Result<Option<NetworkInfo>, EngineError> {
        traced!(self, "inspect_network", self.inner.inspect_network(id))
    }

    async fn inspect_image(&self, reference: &str) -> Result<Option<ImageInfo>, EngineError> {
        traced!(self, "inspect_image", self.inner.inspect_image(reference))
    }

    async fn pull_image(
        &self,
        reference: &str,
        progress: ProgressSink<'_>,
    ) -> Result<(), EngineError> {
        traced!(
            self,
            "pull_image",
            self.inner.pull_image(reference, progress)
        )
    }

    async fn build_image(
        &self,
        context_tar: Vec<u8>,
        dockerfile: &str,
        tag: &str,
        labels: &BTreeMap<String, String>,
        progress: ProgressSink<'_>,
    ) -> Result<String, EngineError> {
        traced!(
            self,
            "build_image",
            self.inner
                .build_image(context_tar, dockerfile, tag, labels, progress)
        )
    }

    async fn create_container(&self, spec: &ContainerSpec) -> Result<Created, EngineError> {
        traced!(self, "create_container", self.inner.create_container(spec))
    }

    async fn start_container(&self, id: &str) -> Result<(), EngineError> {
        traced!(self, "start_container", self.inner.start_container(id))
    }

    async fn connect_network(
        &self,
        network_id: &str,
        container_id: &str,
        aliases: &[String],
    ) -> Result<(), EngineError> {
        traced!(
            self,
            "connect_network",
            self.inner
                .connect_network(network_id, container_id, aliases)
        )
    }

    async fn disconnect_network(
        &self,
        network_id: &str,
        container_id: &str,
    ) -> Result<(), EngineError> {
        traced!(
            self,
            "disconnect_network",
            self.inner.disconnect_network(network_id, container_id)
        )
    }

    async fn create_network(
        &self,
        spec: &odek_core::engine::NetworkSpec,
    ) -> Result<String, EngineError> {
        traced!(self, "create_network", self.inner.create_network(spec))
    }

    async fn remove_network(&self, id: &str) -> Result<bool, EngineError> {
        traced!(self, "remove_network", self.inner.remove_network(id))
    }

    async fn list_network_members(
        &self,
        names: &[String],
        all: bool,
    ) -> Result<Vec<odek_core::engine::ContainerSummary>, EngineError> {
        traced!(
            self,
            "list_network_members",
            self.inner.list_network_members(names, all)
        )
    }

    async fn inspect_container(&self, id: &str) -> Result<Option<ContainerInfo>, EngineError> {
        traced!(self, "inspect_container", self.inner.inspect_container(id))
    }

    async fn container_processes(&self, id: &str) -> Result<Vec<String>, EngineError> {
        traced!(
            self,
            "container_processes",
            self.inner.container_processes(id)
        )
    }

    async fn remove_container(&self, id: &str) -> Result<bool, EngineError> {
        traced!(self, "remove_container", self.inner.remove_container(id))
    }

    async fn list_containers(&self, label: &str) -> Result<Vec<ContainerSummary>, EngineError> {
        traced!(self, "list_containers", self.inner.list_containers(label))
    }

    async fn exec(
        &self,
        container_id: &str,
        spec: &ExecSpec,
        output: OutputSink<'_>,
    ) -> Result<ExecExit, EngineError> {
        traced!(self, "exec", self.inner.exec(container_id, spec, output))
    }

    async fn attach_stdin(&self, id: &str) -> Result<StdinHold, EngineError> {
        traced!(self, "attach_stdin", self.inner.attach_stdin(id))
    }

    async fn attach_session(&self, id: &str) -> Result<odek_core::engine::Link, EngineError> {
        traced!(self, "attach_session", self.inner.attach_session(id))
    }

    async fn exec_session(
        &self,
        id: &str,
        spec: &ExecSpec,
    ) -> Result<odek_core::engine::Link, EngineError> {
        traced!(self, "exec_session", self.inner.exec_session(id, spec))
    }

    async fn wait_removed(&self, id: &str) -> Result<ExitWait, EngineError> {
        traced!(self, "wait_removed", self.inner.wait_removed(id))
    }
    async fn security(&self) -> Result<EngineSecurity, EngineError> {
        traced!(self, "info", self.inner.security())
    }
    async fn container_logs(&self, id: &str, max: usize) -> Result<Option<String>, EngineError> {
        traced!(self, "logs", self.inner.container_logs(id, max))
    }
    async fn stat_path(&self, id: &str, path: &str) -> Result<Option<PathStat>, EngineError> {
        traced!(self, "stat_path", self.inner.stat_path(id, path))
    }
    async fn read_file(
        &self,
        id: &str,
        path: &str,
        max: usize,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        traced!(self, "read_file", self.inner.read_file(id, path, max))
    }

    async fn upload_archive(
        &self,
        id: &str,
        path: &str,
        archive: Vec<u8>,
    ) -> Result<(), EngineError> {
        traced!(
            self,
            "upload_archive",
            self.inner.upload_archive(id, path, archive)
        )
    }

    async fn download_archive(
        &self,
        id: &str,
        path: &str,
        max: u64,
    ) -> Result<Option<Vec<u8>>, EngineError> {
        traced!(
            self,
            "download_archive",
            self.inner.download_archive(id, path, max)
        )
    }
}
