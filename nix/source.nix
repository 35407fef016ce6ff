# Source trees for the derivations, cut out of the repository with
# builtins.path and a filter (plain builtins: the same under the real nixpkgs
# and nix/stub-nixpkgs). Each tree keeps only what its build reads, so editing
# docs or nix/ does not rebuild the Rust packages.
#
# Paths that do not exist yet (ffi/, bindings/) are simply absent from the
# tree: evaluation never requires them; the build that needs them fails.
let
  root = ../.;
  rootStr = toString root;
  rootLen = builtins.stringLength rootStr;

  # Path relative to the repository root ("" for the root itself).
  rel = path:
    let p = toString path;
    in if p == rootStr then "" else builtins.substring (rootLen + 1) (builtins.stringLength p) p;

  hasPrefix = pre: s: builtins.substring 0 (builtins.stringLength pre) s == pre;

  # Never part of a source tree: build output, caches, `nix build` results.
  junk = r:
    let name = baseNameOf r;
    in builtins.elem name [ "target" ".git" "__pycache__" ".pytest_cache" ".mypy_cache" "node_modules" ]
      || r == "result" || hasPrefix "result-" r
      || builtins.match ".*\\.(pyc|egg-info|so|dylib|a)" name != null;

  # Keep a path when it is one of `keep` (relative paths), lies below one,
  # or is a directory on the way to one.
  within = keep: r: type:
    builtins.any
      (k: r == k || hasPrefix (k + "/") r || (type == "directory" && hasPrefix (r + "/") k))
      keep;

  tree = name: keep:
    builtins.path {
      path = root;
      inherit name;
      filter = path: type:
        let r = rel path;
        in !(junk r) && (keep == null || within keep r type);
    };

  # The Cargo workspace: the root manifest, the lock, .cargo/ (the xtask
  # alias) and every member directory, read from Cargo.toml's
  # `workspace.members` so that a new member cannot be forgotten here (cargo
  # refuses to load the workspace when one member's manifest is missing:
  # "failed to load manifest for workspace member"). All of tests/ rather
  # than only tests/e2e and tests/supplychain: the e2e suite's scripts and
  # Compose fixture (tests/fixtures, tests/images, tests/registry) travel
  # with its test binaries (nix/e2e-tests.nix).
  members = (builtins.fromTOML (builtins.readFile ../Cargo.toml)).workspace.members;
  workspace =
    assert builtins.all (m: builtins.match ".*[][*?].*" m == null) members
      || throw "nix/source.nix: Cargo.toml's workspace.members has a glob; list its directories here";
    [ "Cargo.toml" "Cargo.lock" ".cargo" "tests" ] ++ members;

  # Files outside the member directories that the workspace's unit tests
  # read at test time: odek-cli's cli/src/docs_sync.rs compares the clap tree
  # and the ODEK_* variables with these reference docs.
  testData = [ "docs/CLI.md" "docs/CONFIG.md" "docs/SANDBOXING.md" ];
in
{
  # The Cargo workspace, for builds that compile but run no odek-cli test
  # (libodek, clippy, fmt, the e2e test binaries): editing docs/ does not
  # rebuild them.
  rust = tree "source" workspace;

  # The Cargo workspace plus what its unit tests read (the `odek` package,
  # whose check phase runs them).
  rustTested = tree "source" (workspace ++ testData);

  # The lists above, for scripts that copy the same paths elsewhere.
  paths = { inherit workspace testData; };

  # The whole repository (supplychain tests scan every file).
  full = tree "source" null;

  # bindings/python plus the checked-in header its tests compare the ctypes
  # declarations with (the library itself comes from libodek).
  python = tree "source" [ "bindings/python" "ffi/include" ];

  # bindings/go plus the checked-in header its cgo preamble includes through
  # a ${SRCDIR}-relative path (and its tests read).
  go = tree "source" [ "bindings/go" "ffi/include" ];
}
