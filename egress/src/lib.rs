//! odek's egress proxy (docs/SPEC.md §4.5): the policy it applies
//! ([`policy`]), shared with odek, which writes it. The proxy itself is the
//! `odek-egress` binary (feature `proxy`), a static executable that odek
//! bind-mounts read-only into a container of its own, beside the sandbox.

pub mod policy;
