//! Compiles this checkout's test namespace into the crate as `ODEK_TEST_NS`
//! (xtask/src/ns.rs: `ODEK_TEST_NS` when set, else a hash of the checkout
//! root), so `odek_e2e::PROJECT`, `BASE_IMAGE`, … name this checkout's
//! Compose project and images whether or not xtask runs the suite.

#[path = "../../xtask/src/ns.rs"]
#[allow(dead_code)]
mod ns;

fn main() {
    println!("cargo:rerun-if-env-changed={}", ns::VAR);
    println!("cargo:rerun-if-changed=../../xtask/src/ns.rs");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let ns = ns::namespace(&root).unwrap_or_else(|e| panic!("{e}"));
    println!("cargo:rustc-env=ODEK_TEST_NS={ns}");
}
