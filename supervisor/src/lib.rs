//! odek's supervisor: the long-lived process of every sandbox, and the
//! framed protocol the core speaks with it (docs/SANDBOXING.md,
//! "The supervisor").
//!
//! The library half is the protocol only ([`proto`]): the core links it to
//! speak to the binary, so both sides share one definition. The binary
//! (`src/main.rs`) is static (`-C target-feature=+crt-static`), started by
//! the container's init from a read-only bind mount, and never linked by
//! anything else.

pub mod proto;
